// The compiled model's state (issue 7): init materializes the shards once,
// forward reuses them, load replaces their values from a checkpoint (each
// rank reading its own rows), save writes them cooperatively, and bad
// checkpoints are errors naming the file and the parameter that leave the
// shards untouched.
#include "GptJitOptions.h"
#include "gpt.h"

#include "compiler/CheckpointLoad.h"
#include "compiler/Pipeline.h"
#include "runtime/LocalSession.h"
#include "runtime/RuntimeError.h"
#include "runtime/checkpoint/LoadPlan.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <algorithm>
#include <map>

using namespace shardc;

namespace {

/// A file name in the test's working directory, removed at scope exit.
struct TempFile {
  std::string path;
  explicit TempFile(std::string name) : path("jit-state-test-" + std::move(name)) {
    std::filesystem::remove(path);
  }
  ~TempFile() { std::filesystem::remove(path); }
};

std::vector<char> bytesOf(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Every rank's shard of `name` joined; checks that padding rows are zero
/// and returns the valid rows only (the full tensor's bytes).
std::vector<std::byte> joinedShards(const CompiledModel &m, const std::string &name,
                                    int64_t fullBytes) {
  std::vector<std::byte> joined;
  for (int64_t r = 0; r < m.world_size(); ++r) {
    HostTensor s = m.shard(name, r);
    joined.insert(joined.end(), s.data.begin(), s.data.end());
  }
  REQUIRE(static_cast<int64_t>(joined.size()) >= fullBytes);
  for (size_t i = static_cast<size_t>(fullBytes); i < joined.size(); ++i)
    REQUIRE(joined[i] == std::byte{0});
  joined.resize(static_cast<size_t>(fullBytes));
  return joined;
}

std::map<std::string, HostTensor> byName(std::vector<HostTensor> tensors) {
  std::map<std::string, HostTensor> out;
  for (HostTensor &t : tensors)
    out[t.name] = std::move(t);
  return out;
}

/// The message of the Error `f` throws.
template <typename F> std::string errorOf(F &&f) {
  try {
    f();
  } catch (const Error &error) {
    return error.what();
  }
  FAIL("no shardc::Error was thrown");
  return {};
}

/// A float32 tensor of `shape` whose element i is start + i * step.
HostTensor ramp(const std::string &name, std::vector<int64_t> shape, float start, float step) {
  HostTensor t{name, DType::Float32, std::move(shape), {}};
  t.data.resize(static_cast<size_t>(t.num_elements()) * sizeof(float));
  for (int64_t i = 0; i < t.num_elements(); ++i)
    t.as<float>()[i] = start + static_cast<float>(i) * step;
  return t;
}

int64_t fullBytes(const ParameterInfo &p) {
  int64_t n = dtype_size(p.dtype);
  for (int64_t d : p.shape)
    n *= d;
  return n;
}

} // namespace

TEST_CASE("save at N = 3, load at N = 1, 2, 4: same shards, same outputs, same file",
          "[jit][state][checkpoint]") {
  gpt::GPT model;
  CompiledModel three = jit(model, gptJitOptions(model, 3, /*seed=*/5));
  const std::vector<HostTensor> inputs = three.example_inputs(1);
  three.init();
  const std::vector<HostTensor> reference = three.forward(inputs);
  TempFile saved("n3.safetensors");
  three.save(saved.path);
  const std::map<std::string, HostTensor> full = byName(load_tensors(saved.path));
  REQUIRE(full.size() == three.parameters().size());

  // Loaded into models whose own init (seed 9) differs from the saved values.
  CompiledModel other = jit(model, gptJitOptions(model, 1, /*seed=*/9));
  for (int64_t n : {1, 2, 4}) {
    for (bool initFirst : {false, true}) {
      INFO("world size " << n << (initFirst ? ", after init()" : ", no shards before"));
      CompiledModel m = other.with_world_size(n);
      if (initFirst) {
        m.init();
        CHECK(m.forward(inputs)[0].data != reference[0].data);
      }
      CHECK(m.load(saved.path).empty()); // every parameter was in the file
      for (const ParameterInfo &p : m.parameters()) {
        INFO(p.name);
        CHECK(joinedShards(m, p.name, fullBytes(p)) == full.at(p.name).data);
      }
      std::vector<HostTensor> out = m.forward(inputs);
      REQUIRE(out.size() == 1);
      CHECK(out[0].data == reference[0].data);

      // Peak during load: the shards alone, predicted exactly (the file has
      // the parameters' dtypes: read straight into the shards, no io buffer).
      MemoryReport memory = m.memory_report();
      for (const RankMemory &r : memory.ranks) {
        CHECK(r.load_peak == r.load_predicted_peak);
        CHECK(r.load_peak == r.param_bytes);
        CHECK(r.forward_peak == r.forward_predicted_peak);
      }

      // The shards saved again are the same file, byte for byte.
      TempFile again("again.safetensors");
      m.save(again.path);
      CHECK(bytesOf(again.path) == bytesOf(saved.path));
    }
  }
}

TEST_CASE("load of a subset: other parameters keep their values", "[jit][state][checkpoint]") {
  gpt::GPT model;
  CompiledModel two = jit(model, gptJitOptions(model, 2, /*seed=*/4));
  CompiledModel reference = two.with_world_size(1);
  reference.init();
  const std::string wte = "transformer.wte.weight", bias = "transformer.ln_f.bias";
  TempFile subset("subset.safetensors");
  save_tensors(subset.path, {ramp(wte, {101, 32}, 0.5f, 0.001f), ramp(bias, {32}, -1.0f, 0.25f)});

  for (bool initFirst : {false, true}) {
    INFO((initFirst ? "after init()" : "no shards before"));
    CompiledModel m = two.with_world_size(2);
    if (initFirst)
      m.init();
    std::vector<std::string> kept = m.load(subset.path);
    CHECK(kept.size() == m.parameters().size() - 2);
    CHECK(std::find(kept.begin(), kept.end(), wte) == kept.end());
    for (const ParameterInfo &p : m.parameters()) {
      INFO(p.name);
      std::vector<std::byte> values = joinedShards(m, p.name, fullBytes(p));
      if (p.name == wte)
        CHECK(values == ramp(wte, {101, 32}, 0.5f, 0.001f).data);
      else if (p.name == bias)
        CHECK(values == ramp(bias, {32}, -1.0f, 0.25f).data);
      else
        CHECK(values == reference.shard(p.name).data); // its init values
    }
  }

  SECTION("a second load keeps the first load's values; rename maps names") {
    CompiledModel m = two.with_world_size(2);
    m.load(subset.path);
    TempFile renamed("renamed.safetensors");
    save_tensors(renamed.path, {ramp("model.transformer.ln_f.weight", {32}, 3.0f, 1.0f),
                                ramp("unused.tensor", {2}, 0.0f, 1.0f)});
    std::vector<std::string> kept = m.load(renamed.path, {{"model.", ""}});
    CHECK(kept.size() == m.parameters().size() - 1);
    CHECK(joinedShards(m, "transformer.ln_f.weight", 32 * 4) ==
          ramp("x", {32}, 3.0f, 1.0f).data);
    CHECK(joinedShards(m, wte, 101 * 32 * 4) == ramp(wte, {101, 32}, 0.5f, 0.001f).data);
    // init() goes back to the init values of everything.
    m.init();
    CHECK(joinedShards(m, wte, 101 * 32 * 4) == reference.shard(wte).data);
  }

  SECTION("with unit patterns and prefetch, as given to jit") {
    JitOptions units = gptJitOptions(model, 3, 4);
    units.units = {"transformer\\.h\\.[0-9]+"};
    units.prefetch = true;
    CompiledModel m = jit(model, units);
    m.init();
    m.load(subset.path); // only two parameters: no unit pattern matches them all
    CHECK(joinedShards(m, wte, 101 * 32 * 4) == ramp(wte, {101, 32}, 0.5f, 0.001f).data);
    CHECK(joinedShards(m, "transformer.h.1.mlp.c_fc.weight", 128 * 32 * 4) ==
          reference.shard("transformer.h.1.mlp.c_fc.weight").data);
  }

  SECTION("other dtypes convert through the io buffer; peak = shards + io buffer") {
    // bfloat16 of 1.5 + small steps: exact in float32 after conversion.
    HostTensor bf{wte, DType::BFloat16, {101, 32}, {}};
    bf.data.resize(101 * 32 * 2);
    std::vector<float> expected(101 * 32);
    for (int64_t i = 0; i < 101 * 32; ++i) {
      uint16_t bits = static_cast<uint16_t>(0x3fc0 + (i % 64)); // 1.5 .. ~1.99
      std::memcpy(bf.data.data() + 2 * i, &bits, 2);
      uint32_t wide = uint32_t{bits} << 16;
      std::memcpy(&expected[i], &wide, 4);
    }
    TempFile file("bf16.safetensors");
    save_tensors(file.path, {bf});
    JitOptions small = gptJitOptions(model, 2, 4);
    small.io_buffer_bytes = 256; // 32 elements at a time
    CompiledModel m = jit(model, small);
    m.init();
    m.load(file.path);
    std::vector<std::byte> values = joinedShards(m, wte, 101 * 32 * 4);
    CHECK(std::memcmp(values.data(), expected.data(), values.size()) == 0);
    for (const RankMemory &r : m.memory_report().ranks) {
      CHECK(r.load_peak == r.load_predicted_peak);
      CHECK(r.load_peak == r.param_bytes + 256);
    }
  }
}

TEST_CASE("forward reuses the shards: no re-init, loaded values survive",
          "[jit][state]") {
  gpt::GPT model;
  CompiledModel m = jit(model, gptJitOptions(model, 2, /*seed=*/6));
  const std::vector<HostTensor> inputs = m.example_inputs(2);
  CHECK_THROWS_AS(m.memory_report(), Error); // nothing ran yet

  // The first forward materializes the shards (init), later ones reuse them.
  std::vector<HostTensor> first = m.forward(inputs);
  MemoryReport afterFirst = m.memory_report();
  std::vector<HostTensor> second = m.forward(inputs);
  CHECK(first[0].data == second[0].data);
  for (size_t r = 0; r < 2; ++r) {
    CHECK(afterFirst.ranks[r].init_peak > 0);
    CHECK(m.memory_report().ranks[r].param_bytes == afterFirst.ranks[r].param_bytes);
  }

  // Values set by load are what forward computes with, call after call.
  const std::string wte = "transformer.wte.weight";
  TempFile file("forward.safetensors");
  save_tensors(file.path, {ramp(wte, {101, 32}, -0.2f, 0.0001f)});
  m.load(file.path);
  std::vector<HostTensor> loaded = m.forward(inputs);
  CHECK(loaded[0].data != first[0].data);
  CHECK(m.forward(inputs)[0].data == loaded[0].data);
  CHECK(joinedShards(m, wte, 101 * 32 * 4) == ramp(wte, {101, 32}, -0.2f, 0.0001f).data);

  // The same values at N = 1, loaded into a model that never ran init.
  CompiledModel one = m.with_world_size(1);
  TempFile all("forward-all.safetensors");
  m.save(all.path);
  one.load(all.path);
  CHECK(one.forward(inputs)[0].data == loaded[0].data);
  CHECK(one.memory_report().ranks[0].init_peak == 0); // init never ran

  // init() returns to the init values.
  m.init();
  CHECK(m.forward(inputs)[0].data == first[0].data);
}

TEST_CASE("bad checkpoints: Error naming the file and the parameter, shards untouched",
          "[jit][state][checkpoint][errors]") {
  gpt::GPT model;
  CompiledModel m = jit(model, gptJitOptions(model, 2, /*seed=*/8));
  const std::vector<HostTensor> inputs = m.example_inputs(3);
  const std::string wte = "transformer.wte.weight";
  m.init();
  const std::vector<HostTensor> before = m.forward(inputs);
  const HostTensor shard = m.shard(wte, 1);
  auto untouched = [&] {
    CHECK(m.shard(wte, 1).data == shard.data);
    CHECK(m.forward(inputs)[0].data == before[0].data);
  };

  SECTION("missing file") {
    std::string message = errorOf([&] { m.load("jit-state-test-no-such.safetensors"); });
    CHECK_THAT(message, Catch::Contains("jit-state-test-no-such.safetensors"));
    untouched();
  }
  SECTION("wrong shape") {
    TempFile file("shape.safetensors");
    save_tensors(file.path, {ramp(wte, {32, 101}, 0, 1)});
    std::string message = errorOf([&] { m.load(file.path); });
    CHECK_THAT(message, Catch::Contains(file.path) && Catch::Contains("parameter '" + wte + "'") &&
                            Catch::Contains("[32, 101]") && Catch::Contains("[101, 32]"));
    untouched();
  }
  SECTION("truncated file") {
    TempFile file("truncated.safetensors");
    save_tensors(file.path, {ramp("transformer.ln_f.bias", {32}, 0, 1), ramp(wte, {101, 32}, 0, 1)});
    std::filesystem::resize_file(file.path, std::filesystem::file_size(file.path) - 100);
    std::string message = errorOf([&] { m.load(file.path); });
    CHECK_THAT(message, Catch::Contains(file.path) && Catch::Contains("'" + wte + "'") &&
                            Catch::Contains("truncated"));
    untouched();
  }
  SECTION("no parameter in the checkpoint") {
    TempFile file("unrelated.safetensors");
    save_tensors(file.path, {ramp("lm.weight", {4}, 0, 1)});
    std::string message = errorOf([&] { m.load(file.path); });
    CHECK_THAT(message, Catch::Contains(file.path) && Catch::Contains("none of the model's"));
    untouched();
  }
  SECTION("an int64 tensor") {
    TempFile file("int.safetensors");
    HostTensor t{"transformer.ln_f.bias", DType::Int64, {32}, {}};
    t.data.resize(32 * 8);
    save_tensors(file.path, {t});
    std::string message = errorOf([&] { m.load(file.path); });
    CHECK_THAT(message, Catch::Contains(file.path) &&
                            Catch::Contains("transformer.ln_f.bias") && Catch::Contains("I64"));
    untouched();
  }
  SECTION("two tensors renamed onto one parameter") {
    TempFile file("clash.safetensors");
    save_tensors(file.path, {ramp("a.transformer.ln_f.bias", {32}, 0, 1),
                             ramp("b.transformer.ln_f.bias", {32}, 0, 1)});
    std::string message = errorOf([&] { m.load(file.path, {{"a.", ""}, {"b.", ""}}); });
    CHECK_THAT(message, Catch::Contains(file.path) &&
                            Catch::Contains("parameter 'transformer.ln_f.bias'"));
    untouched();
  }
  SECTION("save to an unwritable place leaves nothing") {
    std::string message = errorOf([&] { m.save("jit-state-test-no-dir/x.safetensors"); });
    CHECK_THAT(message, Catch::Contains("jit-state-test-no-dir/x.safetensors"));
    CHECK_FALSE(std::filesystem::exists("jit-state-test-no-dir"));
    untouched();
  }
}

TEST_CASE("LocalSession: a replace that fails while running releases every shard",
          "[jit][state][session]") {
  gpt::GPT model;
  CompiledModel m = jit(model, gptJitOptions(model, 2, /*seed=*/1));
  compiler::Graph graph = compiler::parseGraph(m.graph_json(), "traced.json");
  mlir::MLIRContext context;
  compiler::loadTcDialects(context);
  mlir::FailureOr<plan::Plan> plan = compiler::compileToPlan(graph, 2, context);
  REQUIRE(mlir::succeeded(plan));
  TempFile file("session.safetensors");
  save_tensors(file.path, {ramp("transformer.wte.weight", {101, 32}, 0, 1)});
  compiler::Graph loading = graph;
  CHECK(compiler::applyCheckpointLoad(loading, file.path, {}).size() == 27);
  mlir::FailureOr<plan::Plan> source = compiler::compileToPlan(loading, 2, context);
  REQUIRE(mlir::succeeded(source));
  runtime::checkpoint::setIoBufferCap(*source, 1 << 20);

  runtime::LocalSession session(*plan, /*seed=*/1);
  CHECK_FALSE(session.materialized());
  session.init();
  REQUIRE(session.materialized());
  const int64_t held = session.paramBytes(1);

  // Refused before anything changes: another world size.
  mlir::FailureOr<plan::Plan> three = compiler::compileToPlan(loading, 3, context);
  REQUIRE(mlir::succeeded(three));
  CHECK_THROWS_AS(session.replaceParams(*three), runtime::RuntimeError);
  CHECK(session.materialized());
  CHECK(session.paramBytes(1) == held);

  // The file changes after it was validated: the run fails, nothing is half
  // replaced, every shard is released.
  std::filesystem::resize_file(file.path, 200);
  CHECK_THROWS_AS(session.replaceParams(*source), runtime::RuntimeError);
  CHECK_FALSE(session.materialized());
  CHECK(session.paramBytes(0) == 0);
  CHECK(session.paramBytes(1) == 0);
  session.init();
  CHECK(session.materialized());
  CHECK(session.paramBytes(1) == held);
}
