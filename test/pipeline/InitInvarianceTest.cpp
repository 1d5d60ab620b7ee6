// Invariant 2 (docs/design.md) end to end: from graph JSON through the compiler
// and the runtime, the gathered parameters are bit-identical for every world
// size, for every init op and dtype, on awkward shapes; and a parameter's
// values do not change when unrelated parameters are added, removed,
// renamed or reordered.
#include "PipelineTestSupport.h"
#include "runtime/LocalRun.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

using namespace shardc;
using json = nlohmann::json;

namespace {

/// Compiles `graph` for `worldSize` ranks, runs init, returns the gathered
/// parameters by name.
std::map<std::string, runtime::HostTensor> initParams(const json &graph,
                                                      int64_t worldSize,
                                                      uint64_t seed = 5) {
  plan::Plan plan =
      test::compileForTest(compiler::parseGraph(graph.dump(), "test.json"), worldSize);
  runtime::RunOptions options;
  options.gatherParams = true;
  options.seed = seed;
  runtime::RunResult result = runtime::runLocal(plan, options);
  std::map<std::string, runtime::HostTensor> byName;
  for (runtime::HostTensor &tensor : result.params)
    byName[tensor.name] = std::move(tensor);
  return byName;
}

json param(const std::string &name, const std::vector<int64_t> &shape,
           const std::string &dtype, json init) {
  return {{"name", name}, {"shape", shape}, {"dtype", dtype},
          {"device", "cuda:0"}, {"init", std::move(init)}};
}

json graphOf(json params) {
  return {{"format", "shardc-graph"}, {"version", 1},
          {"parameters", std::move(params)}};
}

/// Every init op of the graph format, each on a few awkward shapes.
json everyInitOp(const std::string &dtype) {
  json params = json::array();
  auto add = [&](const std::string &name, const std::vector<int64_t> &shape,
                 json init) {
    params.push_back(param(name, shape, dtype, std::move(init)));
  };
  const std::vector<std::vector<int64_t>> shapes = {
      {13, 7}, {3, 5}, {1, 11}, {2}, {17}, {5, 3, 2}};
  int index = 0;
  for (const auto &shape : shapes) {
    std::string s = "." + std::to_string(index++);
    add("fill" + s, shape, {{{"op", "fill"}, {"value", 0.25}}});
    add("uniform" + s, shape, {{{"op", "uniform"}, {"a", -0.5}, {"b", 0.5}}});
    add("normal" + s, shape, {{{"op", "normal"}, {"mean", 1.0}, {"std", 0.02}}});
    add("trunc" + s, shape,
        {{{"op", "trunc_normal"}, {"std", 0.02}, {"a", -0.04}, {"b", 0.04}}});
    add("arange" + s, shape, {{{"op", "arange"}, {"start", 3.0}, {"step", 0.5}}});
    add("chain" + s, shape,
        {{{"op", "uniform"}},
         {{"op", "mul"}, {"value", 2.0}},
         {{"op", "sub"}, {"value", 1.0}},
         {{"op", "erfinv"}},
         {{"op", "mul"}, {"value", 0.7}},
         {{"op", "add"}, {"value", 0.1}},
         {{"op", "div"}, {"value", 3.0}},
         {{"op", "clamp"}, {"min", -0.2}, {"max", 0.2}},
         {{"op", "neg"}}});
    add("sqrt" + s, shape, {{{"op", "uniform"}}, {{"op", "sqrt"}}});
    // Mamba's dt bias: exp of a scaled draw, clamped, then softplus's inverse;
    // Qwen3-Next's A_log: log of a draw.
    add("mamba_dt" + s, shape,
        {{{"op", "uniform"}},
         {{"op", "mul"}, {"value", 4.605170185988092}},
         {{"op", "add"}, {"value", -6.907755278982137}},
         {{"op", "exp"}},
         {{"op", "clamp"}, {"min", 1e-4}},
         {{"op", "inverse_softplus"}}});
    add("log_expm1" + s, shape,
        {{{"op", "uniform"}, {"a", 0.01}, {"b", 16.0}}, {{"op", "log"}}, {{"op", "expm1"}}});
    if (shape.size() >= 2) {
      add("kaiming_u" + s, shape, {{{"op", "kaiming_uniform"}, {"a", 2.23606797749979}}});
      add("kaiming_n" + s, shape,
          {{{"op", "kaiming_normal"}, {"mode", "fan_out"}, {"nonlinearity", "relu"}}});
      add("xavier_u" + s, shape, {{{"op", "xavier_uniform"}, {"gain", 1.5}}});
      add("xavier_n" + s, shape, {{{"op", "xavier_normal"}}});
      add("orthogonal" + s, shape, {{{"op", "orthogonal"}, {"gain", 2.0}}});
    }
    if (shape.size() == 2) {
      add("eye" + s, shape, {{{"op", "eye"}}});
      std::vector<int64_t> transposed = {shape[1], shape[0]};
      add("transposed" + s, shape,
          {{{"op", "normal"}, {"shape", transposed}},
           {{"op", "transpose"}, {"dim0", 0}, {"dim1", 1}},
           {{"op", "mul"}, {"value", 3.0}}});
      add("permuted" + s, shape,
          {{{"op", "arange"}, {"shape", transposed}},
           {{"op", "permute"}, {"dims", {1, 0}}}});
      std::vector<int64_t> doubled = {shape[0] * 2 + 1, shape[1]};
      add("sliced" + s, shape,
          {{{"op", "uniform"}, {"shape", doubled}},
           {{"op", "slice"}, {"dim", 0}, {"start", 1}, {"end", doubled[0]}, {"step", 2}}});
    }
    int64_t elements = 1;
    for (int64_t d : shape)
      elements *= d;
    add("reshaped" + s, shape,
        {{{"op", "trunc_normal"}, {"shape", {elements}}},
         {{"op", "reshape"}, {"shape", shape}}});
  }
  add("scalar", {}, {{{"op", "normal"}}});
  add("scalar_fill", {}, {{{"op", "fill"}, {"value", -3.0}}});
  return graphOf(params);
}

} // namespace

TEST_CASE("every init op and dtype: shards concatenate to the N = 1 values",
          "[pipeline][init][invariance]") {
  for (const char *dtype : {"float32", "float64", "bfloat16", "float16"}) {
    json graph = everyInitOp(dtype);
    std::map<std::string, runtime::HostTensor> reference = initParams(graph, 1);
    REQUIRE(reference.size() == graph["parameters"].size());
    for (int64_t worldSize = 2; worldSize <= 8; ++worldSize) {
      std::map<std::string, runtime::HostTensor> sharded =
          initParams(graph, worldSize);
      for (const auto &[name, tensor] : reference) {
        INFO(dtype << " world size " << worldSize << " parameter " << name);
        REQUIRE(sharded.count(name));
        CHECK(sharded.at(name).shape == tensor.shape);
        CHECK(sharded.at(name).data == tensor.data);
      }
    }
  }
}

TEST_CASE("init values follow the seed", "[pipeline][init]") {
  json graph = graphOf({param("w", {4, 4}, "float32", {{{"op", "normal"}}})});
  CHECK(initParams(graph, 1, 1).at("w").data != initParams(graph, 1, 2).at("w").data);
  CHECK(initParams(graph, 2, 1).at("w").data == initParams(graph, 3, 1).at("w").data);
}

TEST_CASE("unrelated parameters change no other parameter's values",
          "[pipeline][init][invariance]") {
  json target = param("h.0.attn.weight", {9, 4}, "float32",
                      {{{"op", "trunc_normal"}, {"std", 0.02}}});
  json other = param("h.1.mlp.weight", {16, 4}, "float32",
                     {{{"op", "trunc_normal"}, {"std", 0.02}}});
  json renamed = other;
  renamed["name"] = "h.7.something.else";
  json bigger = param("embed", {1000, 3}, "float32", {{{"op", "normal"}}});

  runtime::HostTensor alone = initParams(graphOf({target}), 3).at("h.0.attn.weight");
  for (const json &params :
       {json{other, target}, json{target, other}, json{renamed, target},
        json{bigger, target, renamed}}) {
    INFO(params.dump());
    CHECK(initParams(graphOf(params), 3).at("h.0.attn.weight").data == alone.data);
  }
  // A different name is a different stream.
  json moved = target;
  moved["name"] = "h.0.attn.weight2";
  CHECK(initParams(graphOf({moved}), 3).at("h.0.attn.weight2").data != alone.data);
}

TEST_CASE("a subset of the ranks (--ranks) holds the full run's shards, bit for bit",
          "[pipeline][init][invariance][ranks]") {
  // Orthogonal parameters are not shardable: their owners are spread over
  // the ranks, so every subset below runs some owners and misses others
  // (the ranks run then compute those tensors themselves).
  const int64_t worldSize = 5;
  for (const char *dtype : {"float32", "bfloat16", "float64"}) {
    plan::Plan plan = test::compileForTest(
        compiler::parseGraph(everyInitOp(dtype).dump(), "test.json"), worldSize);
    plan.functions.erase(std::remove_if(plan.functions.begin(), plan.functions.end(),
                                        [](const plan::Function &f) { return f.name != "init"; }),
                         plan.functions.end());
    runtime::RunOptions options;
    options.keepShards = true;
    options.seed = 9;
    runtime::RunResult full = runtime::runLocal(plan, options);
    REQUIRE(full.shards.size() == static_cast<size_t>(worldSize));
    for (const std::vector<int64_t> &ranks :
         std::vector<std::vector<int64_t>>{{0}, {1, 3}, {4}, {2, 3, 4}}) {
      options.ranks = ranks;
      runtime::RunResult part = runtime::runLocal(plan, options);
      REQUIRE(part.ranks.size() == ranks.size());
      REQUIRE(part.shards.size() == ranks.size());
      for (size_t i = 0; i < ranks.size(); ++i) {
        const runtime::RankReport &report = part.ranks[i];
        CHECK(report.rank == ranks[i]);
        CHECK(report.init.peakBytes == report.init.predictedPeakBytes);
        CHECK(report.init.liveAtPeak == report.init.predictedLiveAtPeak);
        for (size_t p = 0; p < plan.params.size(); ++p) {
          INFO(dtype << " rank " << ranks[i] << " parameter " << plan.params[p].name);
          CHECK(part.shards[i][p].data == full.shards[ranks[i]][p].data);
        }
      }
    }
  }
}

TEST_CASE("a subset run refuses a forward and a gather of every param",
          "[pipeline][ranks]") {
  plan::Plan plan = test::compileForTest(test::loadExample("seed"), 2);
  runtime::RunOptions options;
  options.ranks = {1};
  CHECK_THROWS_WITH(runtime::runLocal(plan, options),
                    Catch::Contains("needs a plan without 'forward'"));
  options.ranks = {1, 0};
  CHECK_THROWS_WITH(runtime::runLocal(plan, options),
                    Catch::Contains("ranks must be sorted, distinct"));
}
