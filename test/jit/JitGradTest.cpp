// JitOptions::grad (docs/training.md): forward() returns the loss and every
// parameter's gradient; the gradients are byte-identical at every world
// size, agree with central differences of the loss, and the memory of the
// joint forward and backward is predicted exactly. (Each gradient rule is
// checked against torch.autograd in test/lit/shardc/grad.test.)
#include "GptLoss.h"
#include "gpt.h"
#include "runtime/Safetensors.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>

using namespace shardc;

namespace {

/// Four blocks and 256 tokens (16 x 16): activations outweigh the full
/// gradients returned.
gpt::Config fourBlocks() {
  gpt::Config config;
  config.layers = 4;
  return config;
}

/// The loss of `model` over 16 x 16 tokens at 2 ranks.
JitOptions tokenLossOptions(GptLoss &model) {
  JitOptions options = lossOptions(model, 2);
  options.inputs = model.lossInputs(16, 16);
  return options;
}

void checkSameBytes(const std::vector<HostTensor> &out, const std::vector<HostTensor> &expected) {
  REQUIRE(out.size() == expected.size());
  for (size_t i = 0; i < out.size(); ++i) {
    INFO(out[i].name);
    CHECK(out[i].data == expected[i].data);
  }
}

}  // namespace

TEST_CASE("jit grad: the loss and every parameter's gradient, equal at N = 1, 2, 3",
          "[jit][grad]") {
  GptLoss model;
  CompiledModel one = jit(model, lossOptions(model, 1));
  std::vector<HostTensor> inputs = one.example_inputs(11);
  std::vector<HostTensor> reference = one.forward(inputs);
  // The loss, then one gradient per parameter (lm_head is tied to wte).
  REQUIRE(reference.size() == 1 + one.parameters().size());
  CHECK(reference[0].name == "loss");
  CHECK(reference[0].shape.empty());
  for (size_t i = 0; i < one.parameters().size(); ++i) {
    CHECK(reference[1 + i].name == "grad." + one.parameters()[i].name);
    CHECK(reference[1 + i].shape == one.parameters()[i].shape);
  }
  for (int64_t n : {2, 3}) {
    INFO("world size " << n);
    CompiledModel sharded = one.with_world_size(n);
    std::vector<HostTensor> out = sharded.forward(inputs);
    checkSameBytes(out, reference);
    for (const RankMemory &r : sharded.memory_report().ranks)
      CHECK(r.forward_peak == r.forward_predicted_peak);
  }
}

TEST_CASE("jit grad: recompute_activations gives the same bytes at a lower peak", "[jit][grad]") {
  // Activation checkpointing per unit (docs/training.md): each block's
  // backward recomputes its forward, so its activations are not kept
  // across the other blocks; kernels are deterministic, so nothing changes.
  GptLoss model(fourBlocks());
  JitOptions options = tokenLossOptions(model);
  CompiledModel keep = jit(model, options);
  options.recompute_activations = true;
  CompiledModel recompute = jit(model, options);
  std::vector<HostTensor> inputs = keep.example_inputs(11);
  std::vector<HostTensor> expected = keep.forward(inputs);
  std::vector<HostTensor> out = recompute.forward(inputs);

  checkSameBytes(out, expected);
  const MemoryReport keptReport = keep.memory_report();
  const MemoryReport recomputedReport = recompute.memory_report();
  for (size_t r = 0; r < 2; ++r) {
    const RankMemory &kept = keptReport.ranks[r];
    const RankMemory &recomputed = recomputedReport.ranks[r];
    CHECK(recomputed.forward_peak == recomputed.forward_predicted_peak);
    CHECK(recomputed.forward_peak < kept.forward_peak);
  }
  options.grad.clear();
  CHECK_THROWS_WITH(jit(model, options),
                    Catch::Contains("recompute_activations recomputes in the backward"));
}

TEST_CASE("jit grad: fuse_linear_cross_entropy gives the same bytes at a lower peak",
          "[jit][grad]") {
  // The head and its loss as one op (docs/training.md, "Fusing the head
  // and its loss"): 512 tokens over a vocabulary of 2,000, so the logits
  // (4 MB) outweigh the op's block of 256 rows (2 MB).
  gpt::Config config;
  config.vocab = 2000;
  GptLoss model(config);
  JitOptions options = lossOptions(model, 2);
  options.inputs = model.lossInputs(32, 16);
  CompiledModel plain = jit(model, options);
  options.fuse_linear_cross_entropy = true;
  CompiledModel fused = jit(model, options);
  CHECK(fused.graph_json().find("\"linear_cross_entropy\"") != std::string::npos);
  CHECK(plain.graph_json().find("\"linear_cross_entropy\"") == std::string::npos);
  std::vector<HostTensor> inputs = plain.example_inputs(5);
  checkSameBytes(fused.forward(inputs), plain.forward(inputs));
  const MemoryReport plainReport = plain.memory_report();
  const MemoryReport fusedReport = fused.memory_report();
  for (size_t r = 0; r < 2; ++r) {
    CHECK(fusedReport.ranks[r].forward_peak == fusedReport.ranks[r].forward_predicted_peak);
    CHECK(fusedReport.ranks[r].forward_peak < plainReport.ranks[r].forward_peak);
  }
  // The loss evaluated alone (no grad): fused too, the same loss bytes, a
  // lower peak; and data-parallel, each rank its rows' share (over twice
  // the batch: a rank's 512 tokens' logits outweigh the op's 256 rows).
  for (bool dataParallel : {false, true}) {
    INFO("data_parallel " << dataParallel);
    JitOptions eval = lossOptions(model, 2);
    eval.inputs = model.lossInputs(dataParallel ? 64 : 32, 16);
    eval.grad.clear();
    eval.data_parallel = dataParallel;
    CompiledModel evalPlain = jit(model, eval);
    eval.fuse_linear_cross_entropy = true;
    CompiledModel evalFused = jit(model, eval);
    CHECK(evalFused.graph_json().find("\"linear_cross_entropy\"") != std::string::npos);
    const std::vector<HostTensor> batch = evalPlain.example_inputs(5);
    checkSameBytes(evalFused.forward(batch), evalPlain.forward(batch));
    CHECK(evalFused.memory_report().ranks[0].forward_peak <
          evalPlain.memory_report().ranks[0].forward_peak);
  }

  // A budget between the two peaks: the fused plan, chosen (cheaper than
  // recomputing activations), and kept at another world size.
  options = lossOptions(model, 2);
  options.inputs = model.lossInputs(32, 16);
  options.memory_budget_bytes = (plain.predicted_peak_bytes() + fused.predicted_peak_bytes()) / 2;
  CompiledModel chosen = jit(model, options);
  CHECK(chosen.fuses_linear_cross_entropy());
  CHECK_FALSE(chosen.recomputes_activations());
  CHECK(chosen.predicted_peak_bytes() == fused.predicted_peak_bytes());
  CHECK(chosen.graph_json() == fused.graph_json());
  checkSameBytes(chosen.forward(inputs), plain.forward(inputs));
  CHECK(chosen.with_world_size(3).fuses_linear_cross_entropy());
  CHECK_FALSE(plain.fuses_linear_cross_entropy());
}

TEST_CASE("jit grad: memory_budget_bytes recomputes only when that is what fits", "[jit][grad]") {
  // Peaks are predicted exactly at compile time (docs/jit.md): a budget
  // between the two plans' peaks gets the recomputing plan, one the plain
  // plan fits keeps it, and one nothing at this world size fits is an
  // Error naming a world size that does.
  GptLoss model(fourBlocks());
  JitOptions options = tokenLossOptions(model);
  CompiledModel keep = jit(model, options);
  options.recompute_activations = true;
  const int64_t recomputingPeak = jit(model, options).predicted_peak_bytes();
  options.recompute_activations = false;
  REQUIRE(recomputingPeak < keep.predicted_peak_bytes());
  CHECK_FALSE(keep.recomputes_activations());

  options.memory_budget_bytes = keep.predicted_peak_bytes();
  CHECK_FALSE(jit(model, options).recomputes_activations());
  // Prefetching holds two units at once; the same budget leaves it out
  // first, before recomputing anything.
  options.prefetch = true;
  options.memory_budget_bytes = 0;
  REQUIRE(jit(model, options).predicted_peak_bytes() > keep.predicted_peak_bytes());
  options.memory_budget_bytes = keep.predicted_peak_bytes();
  CompiledModel withoutPrefetch = jit(model, options);
  CHECK_FALSE(withoutPrefetch.prefetches());
  CHECK_FALSE(withoutPrefetch.recomputes_activations());
  CHECK(withoutPrefetch.predicted_peak_bytes() == keep.predicted_peak_bytes());
  options.prefetch = false;

  options.memory_budget_bytes = (keep.predicted_peak_bytes() + recomputingPeak) / 2;
  CompiledModel fitted = jit(model, options);
  CHECK(fitted.recomputes_activations());
  CHECK(fitted.predicted_peak_bytes() == recomputingPeak);
  std::vector<HostTensor> inputs = keep.example_inputs(3);
  std::vector<HostTensor> expected = keep.forward(inputs);
  std::vector<HostTensor> out = fitted.forward(inputs);
  checkSameBytes(out, expected);
  for (const RankMemory &rank : fitted.memory_report().ranks) {
    CHECK(rank.forward_peak <= options.memory_budget_bytes);
    CHECK(rank.init_peak <= options.memory_budget_bytes);
  }

  // Below what either plan needs at 2 ranks: the error names 4, and 4 fit
  // (with_world_size keeps the budget).
  options.memory_budget_bytes = recomputingPeak - 1;
  CHECK_THROWS_WITH(jit(model, options), Catch::Contains("over the memory budget of") &&
                                             Catch::Contains("; recomputing activations, ") &&
                                             Catch::Contains("it fits with 4 ranks") &&
                                             Catch::Contains("(memory_budget_bytes)"));
  options.world_size = 4;
  CompiledModel four = jit(model, options);
  CHECK(four.predicted_peak_bytes() <= options.memory_budget_bytes);
  CHECK_THROWS_WITH(four.with_world_size(2), Catch::Contains("it fits with 4 ranks"));
  options.world_size = 2;
  options.memory_budget_bytes = -1;
  CHECK_THROWS_WITH(jit(model, options), Catch::Contains("memory_budget_bytes must be 0"));
}

TEST_CASE("jit grad: the gradient agrees with central differences of the loss", "[jit][grad]") {
  // Direction: every element of transformer.ln_f.bias moved by h; the
  // directional derivative is the sum of that parameter's gradient.
  GptLoss model;
  JitOptions options = lossOptions(model, 2);
  CompiledModel withGrad = jit(model, options);
  std::vector<HostTensor> inputs = withGrad.example_inputs(11);
  std::vector<HostTensor> out = withGrad.forward(inputs);
  const std::string name = "transformer.ln_f.bias";
  double directional = 0;
  for (const HostTensor &t : out)
    if (t.name == "grad." + name)
      for (int64_t i = 0; i < t.num_elements(); ++i) directional += t.as<float>()[i];

  options.grad.clear();
  CompiledModel plain = jit(model, options);
  plain.init();
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "shardc-jit-grad";
  std::filesystem::create_directories(dir);
  plain.save((dir / "base.safetensors").string());
  runtime::SafetensorsContents base = runtime::readSafetensors((dir / "base.safetensors").string());
  const float h = 1e-2f;
  double loss[2];
  for (int side = 0; side < 2; ++side) {
    std::vector<runtime::HostTensor> moved = base.tensors;
    for (runtime::HostTensor &t : moved)
      if (t.name == name)
        for (int64_t i = 0; i < t.numElements(); ++i) t.as<float>()[i] += side ? h : -h;
    std::string path = (dir / ("moved" + std::to_string(side) + ".safetensors")).string();
    runtime::writeSafetensors(path, moved);
    plain.load(path);
    loss[side] = scalar(plain.forward(inputs).at(0));
  }
  std::filesystem::remove_all(dir);
  const double central = (loss[1] - loss[0]) / (2.0 * h);
  INFO("gradient sum " << directional << ", central difference " << central);
  CHECK(std::abs(directional) > 1e-3);
  CHECK(std::abs(central - directional) <= 2e-2 * std::abs(directional));
}

TEST_CASE("jit grad: a loss that is not an output value, and data_parallel, are errors",
          "[jit][grad]") {
  GptLoss model;
  JitOptions options = lossOptions(model, 1);
  options.grad = "nope";
  CHECK_THROWS_WITH(jit(model, options), Catch::Contains("--grad nope: not a value of the graph"));
  options.grad = "loss";
  options.data_parallel = true;
  CHECK_THROWS_WITH(
      jit(model, options),
      Catch::Contains("grad with data_parallel is a data-parallel training step: set optimizer"));
}
