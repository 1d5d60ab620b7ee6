// The embedded C++ JIT API (issue 7): tracing, trace-time errors naming the
// C++ call site and module path, world-size invariance, and equality with
// the same model given as graph JSON (examples/gpt2-tiny.json).
#include "GptJitOptions.h"
#include "gpt.h"

#include "compiler/Pipeline.h"
#include "runtime/LocalRun.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace shardc;

namespace {

/// Runs a graph file as `shardc run` does, without --inputs.
runtime::RunResult runGraphFile(const std::string &file, int64_t worldSize, uint64_t seed) {
  compiler::Graph graph = compiler::loadGraph(file);
  mlir::MLIRContext context;
  compiler::loadTcDialects(context);
  mlir::FailureOr<plan::Plan> plan = compiler::compileToPlan(graph, worldSize, context);
  REQUIRE(mlir::succeeded(plan));
  runtime::RunOptions options;
  options.seed = seed;
  options.inputs = runtime::makeDeterministicInputs(*plan, seed, compiler::inputBounds(graph));
  return runtime::runLocal(*plan, options);
}

/// The message of the TraceError `f` throws.
template <typename F> TraceError traceError(F &&f) {
  try {
    f();
  } catch (const TraceError &error) {
    return error;
  }
  FAIL("no TraceError was thrown");
  throw;
}

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace

TEST_CASE("construction records parameters, devices and inits; no storage",
          "[jit][trace]") {
  DeviceGuard device("cuda:0");
  gpt::GPT model;
  std::vector<ParameterSpec> params = model.named_parameters();
  REQUIRE(params.size() == 2 + 2 * 12 + 2);
  CHECK(params[0].name == "transformer.wte.weight");
  CHECK(params[0].shape == std::vector<int64_t>{101, 32});
  CHECK(params[0].device == "cuda:0");
  CHECK(params[2].name == "transformer.h.0.ln_1.weight");
  CHECK(params[4].name == "transformer.h.0.attn.c_attn.weight");
  CHECK(params.back().name == "transformer.ln_f.bias");
  CHECK(model.h[1]->attn->path() == "transformer.h.1.attn");
  // Every parameter name of the hand-written graph, and no other.
  compiler::Graph reference =
      compiler::loadGraph(std::string(SHARDC_EXAMPLES_DIR) + "/gpt2-tiny.json");
  std::set<std::string> expected, traced;
  for (const compiler::GraphParam &p : reference.params)
    expected.insert(p.name);
  for (const ParameterSpec &p : params)
    traced.insert(p.name);
  CHECK(traced == expected);
}

TEST_CASE("jit traces once; other world sizes reuse the trace", "[jit][trace]") {
  gpt::GPT model;
  CompiledModel one = jit(model, gptJitOptions(model, 1));
  CHECK(model.forward_calls == 1);
  CompiledModel four = one.with_world_size(4);
  CompiledModel three = four.with_world_size(3);
  CHECK(model.forward_calls == 1);
  CHECK(four.trace_count() == 1);
  CHECK(four.world_size() == 4);
  CHECK(three.world_size() == 3);
  // The original device is kept whatever runs it.
  for (const ParameterInfo &p : four.parameters())
    CHECK(p.device == "cpu");
  const ParameterInfo &wte = four.parameters()[0];
  CHECK(wte.name == "transformer.wte.weight");
  CHECK(wte.local_shape == std::vector<int64_t>{26, 32}); // ceil(101 / 4) rows
  // The trace is a graph file shardc reads.
  compiler::Graph graph = compiler::parseGraph(four.graph_json(), "traced.json");
  CHECK(graph.outputs == std::vector<std::string>{"logits"});
  CHECK(graph.inputs.at(0).high == 101);
}

TEST_CASE("outputs at N = 1, 2, 4 equal the graph-JSON model bit for bit",
          "[jit][run]") {
  const uint64_t seed = 11;
  DeviceGuard device("cuda:0");
  gpt::GPT model;
  CompiledModel compiled = jit(model, gptJitOptions(model, 1, seed));
  std::vector<HostTensor> inputs = compiled.example_inputs(seed);
  std::vector<HostTensor> reference = compiled.forward(inputs);
  REQUIRE(reference.size() == 1);
  CHECK(reference[0].name == "logits");
  CHECK(reference[0].shape == std::vector<int64_t>{2, 8, 101});

  runtime::RunResult json =
      runGraphFile(std::string(SHARDC_EXAMPLES_DIR) + "/gpt2-tiny.json", 2, seed);
  REQUIRE(json.outputs.size() == 1);
  CHECK(json.outputs[0].data == reference[0].data);

  for (int64_t n : {2, 4}) {
    INFO("world size " << n);
    CompiledModel sharded = compiled.with_world_size(n);
    std::vector<HostTensor> out = sharded.forward(inputs);
    CHECK(out[0].data == reference[0].data);
    MemoryReport memory = sharded.memory_report();
    REQUIRE(memory.ranks.size() == static_cast<size_t>(n));
    for (const RankMemory &r : memory.ranks) {
      CHECK(r.init_peak == r.init_predicted_peak);
      CHECK(r.forward_peak == r.forward_predicted_peak);
      CHECK(r.param_bytes < memory.unsharded_param_bytes);
    }
  }
}

TEST_CASE("shards: each rank holds its rows; together they are the N = 1 tensor",
          "[jit][shard]") {
  gpt::GPT model;
  CompiledModel one = jit(model, gptJitOptions(model, 1));
  one.init();
  HostTensor full = one.shard("transformer.wte.weight");
  CHECK(full.shape == std::vector<int64_t>{101, 32});
  CompiledModel four = one.with_world_size(4);
  CHECK_THROWS_AS(four.shard("transformer.wte.weight"), Error); // before init
  four.init();
  std::vector<std::byte> joined;
  for (int64_t r = 0; r < 4; ++r) {
    HostTensor s = four.shard("transformer.wte.weight", r);
    CHECK(s.shape == std::vector<int64_t>{26, 32});
    joined.insert(joined.end(), s.data.begin(), s.data.end());
  }
  joined.resize(full.data.size()); // rank 3's padding row goes
  CHECK(joined == full.data);
  for (const RankMemory &r : four.memory_report().ranks)
    CHECK(r.param_bytes * 3 < four.memory_report().unsharded_param_bytes);
  CHECK_THROWS_AS(four.shard("nope"), Error);
  CHECK_THROWS_AS(four.load("x.safetensors"), Error);
}

TEST_CASE("save writes full parameters equal to the N = 1 init", "[jit][save]") {
  gpt::GPT model;
  CompiledModel four = jit(model, gptJitOptions(model, 4));
  std::string path = "jit-test-params.safetensors";
  four.save(path);
  std::vector<HostTensor> saved = load_tensors(path);
  REQUIRE(saved.size() == 28);
  CompiledModel one = four.with_world_size(1);
  one.init();
  for (const HostTensor &t : saved) {
    INFO(t.name);
    CHECK(t.data == one.shard(t.name).data);
  }
  std::remove(path.c_str());
}

namespace {

struct BadAttention : Model {
  int64_t line = 0;
  BadAttention() {
    attn = add<nn::Linear>("h.0.attn", 64, 96);
  }
  std::vector<Tensor> forward(const std::vector<Tensor> &in) override {
    line = __LINE__ + 1;
    return {(*attn)(in[0])};
  }
  std::shared_ptr<nn::Linear> attn;
};

struct BadAdd : Model {
  int64_t line = 0;
  BadAdd() { register_parameter("w", {4, 3}, init::ones()); }
  std::vector<Tensor> forward(const std::vector<Tensor> &in) override {
    line = __LINE__ + 1;
    return {param("w") + in[0]};
  }
};

struct Typo : Model {
  int64_t line = 0;
  Typo() { fc = add<nn::Linear>("fc", 4, 4); }
  std::vector<Tensor> forward(const std::vector<Tensor> &in) override {
    line = __LINE__ + 1;
    return {linear(in[0], fc->param("wieght"))};
  }
  std::shared_ptr<nn::Linear> fc;
};

struct Twice : Module {
  static inline int64_t line = 0;
  Twice() {
    register_parameter("weight", {4}, init::zeros());
    line = __LINE__ + 1;
    register_parameter("weight", {4}, init::zeros());
  }
};

struct HasTwice : Model {
  HasTwice() { block = add<Twice>("blocks.3"); }
  std::vector<Tensor> forward(const std::vector<Tensor> &in) override { return in; }
  std::shared_ptr<Twice> block;
};

JitOptions oneInput(std::vector<int64_t> shape) {
  JitOptions options;
  options.inputs = {{"x", std::move(shape)}};
  return options;
}

} // namespace

TEST_CASE("trace-time errors name the C++ call site and the module path",
          "[jit][errors]") {
  SECTION("shape mismatch in a built-in block") {
    BadAttention model;
    TraceError error = traceError([&] { jit(model, oneInput({2, 8, 32})); });
    INFO(error.what());
    CHECK(endsWith(error.file(), "test/jit/JitTest.cpp"));
    CHECK(error.line() == model.line);
    CHECK(error.module_path() == "h.0.attn");
    std::string expected = ":" + std::to_string(model.line) +
                           ": in module 'h.0.attn': linear: x ";
    CHECK(std::string(error.what()).find(expected) != std::string::npos);
    CHECK(std::string(error.what()).find("[2, 8, 32]") != std::string::npos);
    CHECK(std::string(error.what()).find("does not fit weight 'h.0.attn.weight' [96, 64]") !=
          std::string::npos);
  }
  SECTION("operators carry the expression's line") {
    BadAdd model;
    TraceError error = traceError([&] { jit(model, oneInput({2})); });
    INFO(error.what());
    CHECK(error.line() == model.line);
    CHECK(error.module_path() == "");
    CHECK(std::string(error.what()).find("do not broadcast") != std::string::npos);
  }
  SECTION("undefined parameter") {
    Typo model;
    TraceError error = traceError([&] { jit(model, oneInput({2, 4})); });
    INFO(error.what());
    CHECK(error.line() == model.line);
    CHECK(error.module_path() == "fc");
    CHECK(std::string(error.what()).find("undefined parameter 'wieght' (this module "
                                         "registers: weight, bias)") != std::string::npos);
  }
  SECTION("parameter registered twice") {
    TraceError error = traceError([&] { HasTwice model; });
    INFO(error.what());
    CHECK(error.line() == Twice::line);
    CHECK(error.module_path() == "blocks.3");
    CHECK(std::string(error.what()).find("parameter 'weight' is registered twice (first at ") !=
          std::string::npos);
  }
  SECTION("a bad init program is caught at registration") {
    struct BadInit : Module {
      int64_t line = 0;
      BadInit() {
        line = __LINE__ + 1;
        register_parameter("w", {4, 4}, init::normal().reshape({3, 5}));
      }
    };
    TraceError error = traceError([&] { BadInit m; });
    INFO(error.what());
    CHECK(std::string(error.what()).find("parameter 'w': init") != std::string::npos);
  }
  SECTION("Tensor ops outside a trace") {
    nn::Linear fc(4, 4);
    CHECK_THROWS_AS(fc.param("weight"), TraceError);
  }
}

namespace {

/// Mamba's time-step bias through the JIT API's init chain: a log-uniform
/// dt in [0.001, 0.1], stored as softplus's inverse. Its clamp has no upper
/// bound: +inf must reach the graph as "inf" (JSON has no literal for it).
struct TimeStepBias : Model {
  TimeStepBias() {
    const double low = std::log(0.001), high = std::log(0.1);
    register_parameter(
        "dt_bias", {37},
        init::uniform().mul(high - low).add(low).exp().clamp(1e-4, INFINITY).inverse_softplus());
  }
  std::vector<Tensor> forward(const std::vector<Tensor> &in) override {
    return {param("dt_bias") + in[0]};
  }
};

} // namespace

TEST_CASE("jit: Mamba's dt bias chain (exp, inverse_softplus) shards and means softplus = dt",
          "[jit][init]") {
  TimeStepBias model;
  CompiledModel one = jit(model, oneInput({37}));
  one.init();
  HostTensor full = one.shard("dt_bias");
  REQUIRE(full.data.size() == 37 * sizeof(float));
  std::vector<float> bias(37);
  std::memcpy(bias.data(), full.data.data(), full.data.size());
  for (float b : bias) {
    double dt = std::log1p(std::exp(static_cast<double>(b)));  // softplus
    INFO("bias " << b << " softplus " << dt);
    CHECK(dt >= 0.001 * (1 - 1e-6));
    CHECK(dt <= 0.1 * (1 + 1e-6));
  }
  CHECK(*std::min_element(bias.begin(), bias.end()) < *std::max_element(bias.begin(), bias.end()));
  CompiledModel three = one.with_world_size(3);
  three.init();
  std::vector<std::byte> joined;
  for (int64_t r = 0; r < 3; ++r) {
    HostTensor s = three.shard("dt_bias", r);
    joined.insert(joined.end(), s.data.begin(), s.data.end());
  }
  joined.resize(full.data.size());  // the last rank's padding row goes
  CHECK(joined == full.data);
}
