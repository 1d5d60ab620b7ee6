// The forward's per-rank peak at N = 8 for the transformer examples is
// exactly: one eighth of every parameter (rounded up to whole rows per
// parameter) + the largest gathered FSDP unit (the two largest with
// --prefetch) at most + activations and inputs, and the compiler predicted
// it allocation by allocation (issue 4's memory target).
#include "PipelineTestSupport.h"
#include "runtime/LocalRun.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <map>

using namespace shardc;

namespace {

constexpr int64_t kWorld = 8;

int64_t category(const runtime::PhaseReport &report, plan::Category c) {
  return report.peakByCategory[static_cast<size_t>(c)];
}

/// What the activations at the forward peak may hold, from the model's
/// shapes alone (not from the report): the residual stream [B, T, d] and
/// one MLP's hidden tensors [B, T, ffn]: GPT-2's c_fc output and its GELU
/// (2), Llama's gate, up and silu(gate) * up (3). Attention's [B, H, T, T]
/// scores are smaller than that in both examples.
struct ActivationShape {
  const char *model;
  const char *ffnWeightSuffix;  // [ffn, d]
  int64_t hiddenTensors;
};
const ActivationShape kActivationShapes[] = {{"gpt2-tiny", "h.0.mlp.c_fc.weight", 2},
                                             {"llama-tiny", "layers.0.mlp.gate_proj.weight", 3}};

int64_t activationBound(const std::string &model, const plan::Plan &plan) {
  const plan::Function *forward = plan.function("forward");
  REQUIRE(forward);
  REQUIRE(forward->inputs.size() >= 1);
  const plan::Buffer &ids = forward->buffers[forward->inputs[0]];  // [B, T] token ids
  REQUIRE(ids.shape.size() == 2);
  const int64_t tokens = ids.shape[0] * ids.shape[1];
  for (const ActivationShape &shape : kActivationShapes) {
    if (model != shape.model) continue;
    for (const plan::Param &p : plan.params) {
      const std::string suffix = shape.ffnWeightSuffix;
      if (p.name.size() < suffix.size() ||
          p.name.compare(p.name.size() - suffix.size(), suffix.size(), suffix) != 0)
        continue;
      REQUIRE(p.shape.size() == 2);
      const int64_t ffn = p.shape[0], d = p.shape[1], bytes = plan::dtypeSize(p.dtype);
      return tokens * (d + shape.hiddenTensors * ffn) * bytes;
    }
  }
  FAIL("no activation shape for " << model);
  return 0;
}

/// Bytes of forward's inputs and outputs: all that the IO category holds.
int64_t ioBytes(const plan::Plan &plan) {
  const plan::Function *forward = plan.function("forward");
  int64_t bytes = 0;
  for (int32_t id : forward->inputs) bytes += forward->buffers[id].bytes;
  for (int32_t id : forward->outputs) bytes += forward->buffers[id].bytes;
  return bytes;
}

}  // namespace

TEST_CASE("forward peak at N = 8 is shards + gathered units + activations, as predicted",
          "[pipeline][forward][memory]") {
  for (const char *model : {"gpt2-tiny", "llama-tiny"}) {
    for (bool prefetch : {false, true}) {
      INFO(model << (prefetch ? " with prefetch" : ""));
      const compiler::Graph graph = test::loadExample(model);
      compiler::ShardOptions shardOptions;
      shardOptions.prefetch = prefetch;
      const plan::Plan plan = test::compileForTest(graph, kWorld, shardOptions);

      // Expected shard bytes: ceil(d0 / 8) rows of every sharded parameter,
      // all of every replicated one; computed from the shapes alone.
      int64_t shardBytes = 0;
      std::map<std::string, int64_t> unitBytes;  // what one gather of a unit fills
      for (const plan::Param &p : plan.params) {
        const int64_t rowBytes = p.rowElements() * plan::dtypeSize(p.dtype);
        if (p.shape.empty()) {
          shardBytes += plan::dtypeSize(p.dtype);
          unitBytes[p.unit] += plan::dtypeSize(p.dtype);
          continue;
        }
        const int64_t chunk = (p.shape[0] + kWorld - 1) / kWorld;
        shardBytes += chunk * rowBytes;
        unitBytes[p.unit] += chunk * kWorld * rowBytes;
      }
      std::vector<int64_t> sizes;
      for (const auto &[unit, bytes] : unitBytes) sizes.push_back(bytes);
      std::sort(sizes.begin(), sizes.end(), std::greater<>());
      REQUIRE(sizes.size() >= 3);  // the root unit and at least two blocks
      const int64_t gatherBound = prefetch ? sizes[0] + sizes[1] : sizes[0];

      runtime::RunOptions options;
      options.inputs = runtime::makeDeterministicInputs(plan, /*seed=*/0, compiler::inputBounds(graph));
      runtime::RunResult result = runtime::runLocal(plan, options);
      REQUIRE(result.ranks.size() == size_t(kWorld));
      for (const runtime::RankReport &rank : result.ranks) {
        INFO("rank " << rank.rank);
        REQUIRE(rank.forward);
        const runtime::PhaseReport &f = *rank.forward;
        CHECK(rank.paramBytes == shardBytes);
        CHECK(category(f, plan::Category::Parameter) == shardBytes);
        const int64_t gathered = category(f, plan::Category::Gathered);
        CHECK(gathered > 0);
        CHECK(gathered <= gatherBound);
        // Gathered units are whole: the bytes at the peak are one unit's
        // (or, with prefetch, two units').
        bool wholeUnits = false;
        for (size_t i = 0; i < sizes.size(); ++i) {
          wholeUnits = wholeUnits || sizes[i] == gathered;
          for (size_t j = i + 1; prefetch && j < sizes.size(); ++j)
            wholeUnits = wholeUnits || sizes[i] + sizes[j] == gathered;
        }
        CHECK(wholeUnits);
        // Activations and IO bounded from the shapes, not from the report's
        // own categories: the peak is the sum of independently bounded parts.
        const int64_t activations = category(f, plan::Category::Activation);
        const int64_t io = category(f, plan::Category::IO);
        CHECK(activations > 0);
        CHECK(activations <= activationBound(model, plan));
        CHECK(io <= ioBytes(plan));
        CHECK(f.peakBytes <= shardBytes + gatherBound + activationBound(model, plan) + ioBytes(plan));
        CHECK(f.peakBytes == shardBytes + gathered + activations + io);
        CHECK(f.peakBytes == f.predictedPeakBytes);
        CHECK(f.liveAtPeak == f.predictedLiveAtPeak);
      }
    }
  }
}
