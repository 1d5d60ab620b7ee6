// Derived parameters (docs/graph-format.md, "Derived parameters"): a
// `norm_of` parameter is the 2-norm of another parameter's initial values
// over some dims (weight norm's g = ||v||). End to end from graph JSON: the
// values equal the norm of the source as shardc made it, and they are
// bit-identical at every world size, with the source sharded on dim 0 and
// never gathered; memory is predicted exactly (the workspace included).
#include "PipelineTestSupport.h"
#include "runtime/InitOps.h"
#include "runtime/LocalRun.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <map>

using namespace shardc;
using json = nlohmann::json;

namespace {

json param(const std::string &name, const std::vector<int64_t> &shape, const std::string &dtype,
           json init) {
  return {{"name", name}, {"shape", shape}, {"dtype", dtype}, {"device", "cpu"},
          {"init", std::move(init)}};
}

/// v [13, 3, 5] (kaiming_uniform, then mul): its norms over dims {0, 1}
/// (weight_norm dim=2), {1, 2} (dim=0: g is sharded too) and all dims.
json weightNormGraph(const std::string &dtype) {
  json params = json::array();
  params.push_back(param("v", {13, 3, 5}, dtype,
                         {{{"op", "kaiming_uniform"}, {"a", 2.23606797749979}},
                          {{"op", "mul"}, {"value", 1.5}}}));
  params.push_back(param("g_dim2", {1, 1, 5}, dtype,
                         {{{"op", "norm_of"}, {"of", "v"}, {"dims", {0, 1}}}}));
  params.push_back(param("g_dim0", {13, 1, 1}, dtype,
                         {{{"op", "norm_of"}, {"of", "v"}, {"dims", {1, 2}}},
                          {{"op", "mul"}, {"value", 2.0}}}));
  params.push_back(param("g_all", {1, 1, 1}, dtype,
                         {{{"op", "norm_of"}, {"of", "v"}, {"dims", {0, 1, 2}}}}));
  return {{"format", "shardc-graph"}, {"version", 1}, {"parameters", params}};
}

struct Run {
  std::map<std::string, runtime::HostTensor> params;
  std::vector<runtime::RankReport> ranks;
};

Run initRun(const json &graph, int64_t worldSize) {
  plan::Plan plan =
      test::compileForTest(compiler::parseGraph(graph.dump(), "test.json"), worldSize);
  runtime::RunOptions options;
  options.gatherParams = true;
  options.seed = 3;
  runtime::RunResult result = runtime::runLocal(plan, options);
  Run run;
  for (runtime::HostTensor &tensor : result.params) run.params[tensor.name] = std::move(tensor);
  run.ranks = result.ranks;
  return run;
}

double at(const runtime::HostTensor &t, int64_t i) { return runtime::loadAsDouble(t.dtype, t.data.data(), i); }

}  // namespace

TEST_CASE("norm_of is the norm of the source's values, identical at every world size",
          "[pipeline][init][norm_of]") {
  for (const char *dtype : {"float32", "bfloat16", "float64"}) {
    json graph = weightNormGraph(dtype);
    Run reference = initRun(graph, 1);
    const runtime::HostTensor &v = reference.params.at("v");
    // The norms from the gathered source, summed in its row-major order in
    // double and rounded once, as the runtime does.
    std::vector<double> dim2(5, 0), dim0(13, 0);
    double all = 0;
    for (int64_t o = 0; o < 13; ++o)
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t k = 0; k < 5; ++k) {
          double x = at(v, (o * 3 + i) * 5 + k);
          dim2[k] += x * x;
          dim0[o] += x * x;
          all += x * x;
        }
    auto rounded = [&](double value) {
      std::vector<std::byte> one(8);
      runtime::storeFromDouble(v.dtype, one.data(), 0, value);
      return runtime::loadAsDouble(v.dtype, one.data(), 0);
    };
    INFO(dtype);
    for (int64_t k = 0; k < 5; ++k)
      CHECK(at(reference.params.at("g_dim2"), k) == rounded(std::sqrt(dim2[k])));
    for (int64_t o = 0; o < 13; ++o)
      CHECK(at(reference.params.at("g_dim0"), o) ==
            rounded(rounded(std::sqrt(dim0[o])) * 2.0));
    CHECK(at(reference.params.at("g_all"), 0) == rounded(std::sqrt(all)));
    CHECK(at(reference.params.at("g_all"), 0) > 0);

    for (int64_t worldSize : {2, 3, 4, 7}) {
      Run sharded = initRun(graph, worldSize);
      for (const auto &[name, tensor] : reference.params) {
        INFO("world size " << worldSize << " parameter " << name);
        CHECK(sharded.params.at(name).data == tensor.data);
      }
      for (const runtime::RankReport &rank : sharded.ranks) {
        CHECK(rank.init.peakBytes == rank.init.predictedPeakBytes);
        CHECK(rank.init.liveAtPeak == rank.init.predictedLiveAtPeak);
      }
    }
  }
}
