// JitOptions::data_parallel (issue 18): forward() takes the global batch,
// each rank computes its own rows; outputs byte-identical at every world
// size (uneven splits and ranks without rows included) and equal to the
// replicated model's; every rank's memory prediction is its own
// micro-batch's and equals what it measured.
#include "GptJitOptions.h"
#include "gpt.h"

#include <catch2/catch.hpp>

using namespace shardc;

TEST_CASE("data-parallel forward: the global batch's outputs at N = 1..5",
          "[jit][data-parallel]") {
  const uint64_t seed = 5;
  DeviceGuard device("cuda:0");
  gpt::GPT model;
  JitOptions options = gptJitOptions(model, 1, seed);
  options.inputs = model.inputs(3, 8);  // the global batch: 3 rows
  CompiledModel replicated = jit(model, options);
  std::vector<HostTensor> inputs = replicated.example_inputs(seed);
  std::vector<HostTensor> reference = replicated.forward(inputs);
  REQUIRE(reference.size() == 1);
  REQUIRE(reference[0].shape == std::vector<int64_t>{3, 8, 101});

  options.data_parallel = true;
  CompiledModel parallel = jit(model, options);
  // The same global batch as the replicated model's example inputs.
  std::vector<HostTensor> examples = parallel.with_world_size(2).example_inputs(seed);
  REQUIRE(examples.size() == 1);
  CHECK(examples[0].shape == inputs[0].shape);
  CHECK(examples[0].data == inputs[0].data);
  // 3 rows: 3 | 2+1 | 1+1+1 | 1+1+1+0 | 1+1+1+0+0
  for (int64_t n : {1, 2, 3, 4, 5}) {
    INFO("world size " << n);
    CompiledModel sharded = parallel.with_world_size(n);
    std::vector<HostTensor> out = sharded.forward(inputs);
    REQUIRE(out.size() == 1);
    CHECK(out[0].shape == reference[0].shape);
    CHECK(out[0].data == reference[0].data);
    MemoryReport memory = sharded.memory_report();
    REQUIRE(memory.ranks.size() == static_cast<size_t>(n));
    for (const RankMemory &r : memory.ranks) {
      INFO("rank " << r.rank);
      CHECK(r.forward_peak == r.forward_predicted_peak);
      CHECK(r.forward_end >= r.param_bytes);  // the shards and the outputs
    }
    if (n == 2)  // 2 rows compute more activations than 1
      CHECK(memory.ranks[0].forward_peak > memory.ranks[1].forward_peak);
    if (n == 4) {  // no rows: only the gathered units beside the shards, no outputs
      CHECK(memory.ranks[2].forward_peak > memory.ranks[3].forward_peak);
      CHECK(memory.ranks[3].forward_end == memory.ranks[3].param_bytes);
    }
  }
}

TEST_CASE("data-parallel forward: inputs with another batch are refused",
          "[jit][data-parallel]") {
  DeviceGuard device("cuda:0");
  gpt::GPT model;
  JitOptions options = gptJitOptions(model, 2, 1);
  options.inputs = model.inputs(3, 8);
  options.data_parallel = true;
  CompiledModel parallel = jit(model, options);
  std::vector<HostTensor> inputs = parallel.example_inputs(1);
  REQUIRE(inputs[0].shape == std::vector<int64_t>{3, 8});
  inputs[0].shape = {1, 8};
  inputs[0].data.resize(8 * sizeof(int64_t));
  // 1 row over 2 ranks needs a function for 0 rows this plan lacks.
  CHECK_THROWS_WITH(parallel.forward(inputs),
                    Catch::Contains("not compiled for a global batch of 1 rows over 2 ranks"));
}

namespace {

/// A batch input and a 0-d one (a temperature every sample shares).
struct ScaledRows : Model {
  ScaledRows() { register_parameter("bias", {4}, init::arange(0.5, 0.25)); }
  std::vector<Tensor> forward(const std::vector<Tensor> &in) override {
    return {in[0] * in[1] + param("bias")};
  }
};

} // namespace

TEST_CASE("data-parallel forward: a 0-d input is every rank's whole", "[jit][data-parallel]") {
  ScaledRows model;
  JitOptions options;
  options.inputs = {{"x", {5, 4}}, {"temperature", {}}};
  CompiledModel replicated = jit(model, options);
  std::vector<HostTensor> inputs = replicated.example_inputs(3);
  REQUIRE(inputs.size() == 2);
  REQUIRE(inputs[1].shape.empty());
  std::vector<HostTensor> reference = replicated.forward(inputs);
  REQUIRE(reference.size() == 1);
  options.data_parallel = true;
  CompiledModel parallel = jit(model, options);
  for (int64_t n : {1, 2, 3, 5}) {  // 5 rows: 5 | 3+2 | 2+2+1 | 1 each
    INFO("world size " << n);
    std::vector<HostTensor> out = parallel.with_world_size(n).forward(inputs);
    REQUIRE(out.size() == 1);
    CHECK(out[0].shape == reference[0].shape);
    CHECK(out[0].data == reference[0].data);
  }
}
