// JitOptions::optimizer (docs/training.md, "Training steps"): every
// forward() is a training step on the shards. One SGD step is exactly
// p - lr * grad (the gradient of JitOptions::grad alone); AdamW over
// several batches gives byte-identical losses and parameters at every
// world size; the optimizer state is not the model's state; each step's
// memory is predicted exactly; a run resumed from save_optimizer() at
// another world size continues byte for byte. (The update formulas are checked against
// torch.optim in test/lit/shardc/train.test.)
#include "GptLoss.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>

using namespace shardc;

namespace {

JitOptions trainOptions(GptLoss &model, int64_t worldSize, const std::string &optimizer,
                        double lr) {
  JitOptions options = lossOptions(model, worldSize);
  options.optimizer.name = optimizer;
  options.optimizer.lr = lr;
  return options;
}

/// Parameter `name`'s full value: its shards' rows concatenated.
std::vector<float> gathered(const CompiledModel &model, const ParameterInfo &p) {
  std::vector<float> full;
  int64_t elements = 1;
  for (int64_t d : p.shape) elements *= d;
  for (int64_t r = 0; r < model.world_size(); ++r) {
    HostTensor shard = model.shard(p.name, r);
    const float *v = reinterpret_cast<const float *>(shard.data.data());
    full.insert(full.end(), v, v + shard.data.size() / sizeof(float));
    if (!p.sharded) break;
  }
  full.resize(static_cast<size_t>(elements));  // padding rows dropped
  return full;
}

/// The largest |a - b| / (1 + |b|) over parameter p's elements in two
/// models (float rounding apart: the same training in another order).
float worstDifference(const CompiledModel &a, const CompiledModel &b, const ParameterInfo &p) {
  const std::vector<float> got = gathered(a, p), want = gathered(b, p);
  REQUIRE(got.size() == want.size());
  float worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::abs(got[i] - want[i]) / (1.0f + std::abs(want[i])));
  return worst;
}

std::string fileBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("jit optimizer: one SGD step is p - lr * grad, at N = 2", "[jit][train]") {
  GptLoss model;
  CompiledModel gradients = jit(model, lossOptions(model, 1));
  CompiledModel sgd = jit(model, trainOptions(model, 2, "sgd", 0.25));
  const std::vector<HostTensor> inputs = gradients.example_inputs(5);
  gradients.init();
  std::vector<std::vector<float>> before;
  for (const ParameterInfo &p : gradients.parameters()) before.push_back(gathered(gradients, p));
  const std::vector<HostTensor> grads = gradients.forward(inputs);
  const std::vector<HostTensor> step = sgd.forward(inputs);
  // The step returns forward's outputs only: the loss, as without it.
  REQUIRE(step.size() == 1);
  CHECK(step[0].data == grads[0].data);
  REQUIRE(sgd.parameters().size() == gradients.parameters().size());
  const float minusLr = -0.25f;
  for (size_t i = 0; i < sgd.parameters().size(); ++i) {
    const ParameterInfo &p = sgd.parameters()[i];
    INFO(p.name);
    CHECK(p.name.rfind("optim.", 0) == std::string::npos);
    const std::vector<float> after = gathered(sgd, p);
    const float *g = reinterpret_cast<const float *>(grads[1 + i].data.data());
    REQUIRE(after.size() == before[i].size());
    size_t exact = 0;
    for (size_t k = 0; k < after.size(); ++k) exact += after[k] == before[i][k] + minusLr * g[k];
    CHECK(exact == after.size());
  }
  for (const RankMemory &r : sgd.memory_report().ranks)
    CHECK(r.forward_peak == r.forward_predicted_peak);
}

TEST_CASE("jit optimizer: clipping scales every gradient by max_norm / norm, at every N",
          "[jit][train]") {
  GptLoss model;
  CompiledModel gradients = jit(model, lossOptions(model, 1));
  const std::vector<HostTensor> inputs = gradients.example_inputs(6);
  gradients.init();
  std::vector<std::vector<float>> before;
  for (const ParameterInfo &p : gradients.parameters()) before.push_back(gathered(gradients, p));
  const std::vector<HostTensor> grads = gradients.forward(inputs);
  double squares = 0;
  for (size_t i = 1; i < grads.size(); ++i) {
    const float *g = reinterpret_cast<const float *>(grads[i].data.data());
    for (size_t k = 0; k < grads[i].data.size() / sizeof(float); ++k)
      squares += double(g[k]) * g[k];
  }
  const double norm = std::sqrt(squares), maxNorm = norm / 4;  // clips to a quarter
  std::vector<std::string> saved;
  for (int64_t n : {1, 3}) {
    JitOptions options = trainOptions(model, n, "sgd", 0.25);
    options.optimizer.max_grad_norm = maxNorm;
    CompiledModel sgd = jit(model, options);
    // forward returns the loss, then the norm it clipped by.
    const std::vector<HostTensor> out = sgd.forward(inputs);
    REQUIRE(out.size() == 2);
    CHECK(out[1].name == "grad_norm");
    double clippedBy = 0;
    std::memcpy(&clippedBy, out[1].data.data(), sizeof clippedBy);
    CHECK(std::abs(clippedBy - norm) <= 1e-9 * norm);
    std::string bytes;
    for (size_t i = 0; i < sgd.parameters().size(); ++i) {
      const ParameterInfo &p = sgd.parameters()[i];
      INFO(p.name);
      const std::vector<float> after = gathered(sgd, p);
      bytes.append(reinterpret_cast<const char *>(after.data()), after.size() * sizeof(float));
      // Each update is -lr * g * (max_norm / (norm + 1e-6)): a quarter of
      // the plain step, up to float rounding.
      const float *g = reinterpret_cast<const float *>(grads[1 + i].data.data());
      for (size_t k = 0; k < after.size(); ++k)
        if (std::abs(g[k]) > 1e-3f)
          CHECK(std::abs((after[k] - before[i][k]) / (-0.25 * g[k]) - 0.25) < 1e-3);
    }
    saved.push_back(bytes);
  }
  CHECK(saved[0] == saved[1]);  // the exact norm: the same bits at N = 1 and 3
}

TEST_CASE("jit optimizer: AdamW over three batches, the same at N = 1 and 3", "[jit][train]") {
  GptLoss model;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("shardc-jit-train-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::vector<std::vector<float>> losses;
  std::vector<std::string> saved;
  for (int64_t n : {1, 3}) {
    CompiledModel adamw = jit(model, trainOptions(model, n, "adamw", 0.01));
    std::vector<float> curve;
    for (uint64_t batch = 0; batch < 3; ++batch)
      curve.push_back(scalar(adamw.forward(adamw.example_inputs(20 + batch)).at(0)));
    // The moments are sharded parameters of their own, read by name.
    const HostTensor moment = adamw.shard("optim.exp_avg.transformer.wte.weight", n - 1);
    CHECK(std::any_of(moment.data.begin(), moment.data.end(),
                      [](std::byte b) { return b != std::byte{0}; }));
    const std::string path = (dir / ("adamw." + std::to_string(n) + ".safetensors")).string();
    adamw.save(path);
    saved.push_back(fileBytes(path));
    CHECK(saved.back().find("optim.") == std::string::npos);  // the model's state only
    for (const RankMemory &r : adamw.memory_report().ranks)
      CHECK(r.forward_peak == r.forward_predicted_peak);
    losses.push_back(curve);
  }
  CHECK(losses[0] == losses[1]);
  CHECK(saved[0] == saved[1]);
  // The same batch again: the loss it had before training went down.
  CompiledModel fresh = jit(model, trainOptions(model, 1, "adamw", 0.01));
  const std::vector<HostTensor> first = fresh.example_inputs(20);
  const float start = scalar(fresh.forward(first).at(0));
  fresh.forward(first);
  CHECK(scalar(fresh.forward(first).at(0)) < start);
  std::filesystem::remove_all(dir);
}

TEST_CASE("jit optimizer: resumed at another world size, the bytes of a straight run",
          "[jit][train]") {
  GptLoss model;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("shardc-jit-resume-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string straight = (dir / "straight.st").string(), half = (dir / "half.st").string(),
                    state = (dir / "state.st").string(), resumed = (dir / "resumed.st").string();
  CompiledModel a = jit(model, trainOptions(model, 2, "adamw", 0.01));
  for (uint64_t batch = 0; batch < 4; ++batch) a.forward(a.example_inputs(40 + batch));
  a.save(straight);
  CompiledModel b = jit(model, trainOptions(model, 2, "adamw", 0.01));
  for (uint64_t batch = 0; batch < 2; ++batch) b.forward(b.example_inputs(40 + batch));
  b.save(half);
  b.save_optimizer(state);
  JitOptions options = trainOptions(model, 3, "adamw", 0.01);
  options.optimizer.state_file = state;
  CompiledModel c = jit(model, options);
  c.load(half);
  for (uint64_t batch = 2; batch < 4; ++batch) c.forward(c.example_inputs(40 + batch));
  c.save(resumed);
  CHECK(fileBytes(resumed) == fileBytes(straight));
  CHECK(fileBytes(state).find("optim.step") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("jit data-parallel training: each rank its rows, the replicated run's values",
          "[jit][train][data-parallel]") {
  // A global batch of 4 sequences: every rank of the data-parallel step
  // runs forward and backward on 4 / N of them, and the ranks' gradient
  // shares are summed into the shards. SGD with momentum is linear in the
  // gradients, so three steps stay within float rounding of the replicated
  // run (every rank the whole batch) at N = 2 and 4.
  GptLoss model;
  auto options = [&](int64_t n, bool dataParallel) {
    JitOptions o = trainOptions(model, n, "sgd", 0.05);
    o.optimizer.momentum = 0.9;
    o.inputs = model.lossInputs(4, 8);
    o.data_parallel = dataParallel;
    return o;
  };
  CompiledModel replicated = jit(model, options(1, false));
  std::vector<float> reference;
  for (uint64_t batch = 0; batch < 3; ++batch)
    reference.push_back(scalar(replicated.forward(replicated.example_inputs(60 + batch)).at(0)));
  for (int64_t n : {2, 4}) {
    INFO("N = " << n);
    CompiledModel split = jit(model, options(n, true));
    for (uint64_t batch = 0; batch < 3; ++batch) {
      const std::vector<HostTensor> step = split.forward(split.example_inputs(60 + batch));
      REQUIRE(step.size() == 1);  // the loss: the ranks' shares summed
      CHECK(scalar(step[0]) == Approx(reference[batch]).epsilon(1e-5));
    }
    REQUIRE(split.parameters().size() == replicated.parameters().size());
    for (size_t i = 0; i < split.parameters().size(); ++i) {
      const ParameterInfo &p = split.parameters()[i];
      INFO(p.name);
      CHECK(worstDifference(split, replicated, p) < 1e-5f);
    }
    // Each rank holds its rows' activations only, predicted exactly.
    for (const RankMemory &r : split.memory_report().ranks)
      CHECK(r.forward_peak == r.forward_predicted_peak);
  }
  // Resume (load() of every parameter, optimizer.state_file): 2 + 1 steps
  // are the 3 straight ones, byte for byte.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("shardc-jit-dp-train-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string straight = (dir / "straight.st").string(), half = (dir / "half.st").string(),
                    state = (dir / "state.st").string(), resumed = (dir / "resumed.st").string();
  CompiledModel a = jit(model, options(2, true));
  for (uint64_t batch = 0; batch < 3; ++batch) a.forward(a.example_inputs(60 + batch));
  a.save(straight);
  CompiledModel b = jit(model, options(2, true));
  for (uint64_t batch = 0; batch < 2; ++batch) b.forward(b.example_inputs(60 + batch));
  b.save(half);
  b.save_optimizer(state);
  JitOptions resume = options(2, true);
  resume.optimizer.state_file = state;
  CompiledModel c = jit(model, resume);
  c.load(half);
  c.forward(c.example_inputs(62));
  c.save(resumed);
  CHECK(fileBytes(resumed) == fileBytes(straight));
  std::filesystem::remove_all(dir);

  JitOptions noOptimizer = options(2, true);
  noOptimizer.optimizer = {};
  CHECK_THROWS_WITH(jit(model, noOptimizer),
                    Catch::Contains("grad with data_parallel is a data-parallel training step"));
}

TEST_CASE("jit gradient accumulation: micro-steps give the whole batch's step",
          "[jit][train][data-parallel]") {
  // optimizer.accumulate K: each rank's rows run as K forward and backward
  // micro-steps before one step. The loss and the trained parameters stay
  // within float rounding of the replicated run on the whole batch, and a
  // rank's forward peak holds one micro-step's activations: below the
  // peak of the same step without accumulation.
  GptLoss model;
  auto options = [&](int64_t n, int64_t accumulate, bool dataParallel) {
    JitOptions o = trainOptions(model, n, "sgd", 0.05);
    o.optimizer.momentum = 0.9;
    o.inputs = model.lossInputs(8, 16);
    o.data_parallel = dataParallel;
    o.optimizer.accumulate = accumulate;
    return o;
  };
  CompiledModel replicated = jit(model, options(1, 1, false));
  std::vector<float> reference;
  for (uint64_t batch = 0; batch < 2; ++batch)
    reference.push_back(scalar(replicated.forward(replicated.example_inputs(70 + batch)).at(0)));
  for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 4}, {2, 2}}) {
    INFO("N = " << n << ", K = " << k);
    CompiledModel accumulated = jit(model, options(n, k, true));
    CompiledModel whole = jit(model, options(n, 1, true));
    for (uint64_t batch = 0; batch < 2; ++batch) {
      const std::vector<HostTensor> step =
          accumulated.forward(accumulated.example_inputs(70 + batch));
      whole.forward(whole.example_inputs(70 + batch));
      REQUIRE(step.size() == 1);
      CHECK(scalar(step[0]) == Approx(reference[batch]).epsilon(1e-5));
    }
    for (const ParameterInfo &p : accumulated.parameters()) {
      INFO(p.name);
      CHECK(worstDifference(accumulated, replicated, p) < 1e-5f);
    }
    const MemoryReport fewer = accumulated.memory_report(), more = whole.memory_report();
    for (size_t r = 0; r < fewer.ranks.size(); ++r) {
      CHECK(fewer.ranks[r].forward_peak == fewer.ranks[r].forward_predicted_peak);
      CHECK(fewer.ranks[r].forward_peak < more.ranks[r].forward_peak);
    }
  }
  // memory_budget_bytes: a budget only micro-steps fit at this world size
  // is an error that names them (accumulation changes the rounding, so it
  // is the user's to choose), and that many fit.
  JitOptions budgeted = options(2, 1, true);
  budgeted.memory_budget_bytes = jit(model, options(2, 2, true)).predicted_peak_bytes();
  JitOptions recomputing = budgeted;
  recomputing.memory_budget_bytes = 0;
  recomputing.recompute_activations = true;
  REQUIRE(jit(model, recomputing).predicted_peak_bytes() > budgeted.memory_budget_bytes);
  CHECK_THROWS_WITH(
      jit(model, budgeted),
      Catch::Contains("at 2 ranks it fits accumulating gradients over 2 micro-steps"));
  budgeted.optimizer.accumulate = 2;
  CHECK_FALSE(jit(model, budgeted).recomputes_activations());
  // Micro-steps split each rank's rows: 8 sequences do not make 3.
  CHECK_THROWS_WITH(jit(model, options(1, 3, true)), Catch::Contains("micro-steps"));
  CHECK_THROWS_WITH(jit(model, options(1, 2, false)), Catch::Contains("set data_parallel"));
}

TEST_CASE("jit optimizer: AdamW's learning-rate schedule warms up from lr / warmup_steps",
          "[jit][train]") {
  // The first step of a 4-step warmup moves every parameter by a quarter of
  // a flat first step's AdamW update (the update is lr times a ratio that
  // the first step makes +-1 wherever the gradient is not zero, and decay
  // 0 keeps the rest exact up to rounding).
  GptLoss model;
  JitOptions flat = trainOptions(model, 2, "adamw", 0.01);
  flat.optimizer.weight_decay = 0;
  JitOptions warm = flat;
  warm.optimizer.warmup_steps = 4;
  CompiledModel a = jit(model, flat), b = jit(model, warm), before = jit(model, flat);
  before.init();
  const std::vector<HostTensor> inputs = a.example_inputs(9);
  a.forward(inputs);
  b.forward(inputs);
  const ParameterInfo &p = a.parameters().front();
  const std::vector<float> p0 = gathered(before, p), pa = gathered(a, p), pb = gathered(b, p);
  size_t moved = 0;
  for (size_t k = 0; k < p0.size(); ++k) {
    const double fullStep = double(pa[k]) - p0[k], quarter = double(pb[k]) - p0[k];
    if (std::abs(fullStep) < 1e-3) continue;  // a zero gradient: no move
    CHECK(quarter == Approx(fullStep / 4).epsilon(1e-3));
    ++moved;
  }
  CHECK(moved > 0);
}

TEST_CASE("jit optimizer: errors name the setting", "[jit][train]") {
  GptLoss model;
  JitOptions noGrad = trainOptions(model, 1, "sgd", 0.1);
  noGrad.grad.clear();
  CHECK_THROWS_WITH(jit(model, noGrad),
                    Catch::Contains("optimizer 'sgd' steps on gradients; set grad to the loss"));
  CHECK_THROWS_WITH(jit(model, trainOptions(model, 1, "rmsprop", 0.1)),
                    Catch::Contains("optimizer must be sgd or adamw, got 'rmsprop'"));
  CHECK_THROWS_WITH(jit(model, trainOptions(model, 1, "adamw", 0.0)),
                    Catch::Contains("the learning rate must be positive"));
  CHECK_THROWS_WITH(jit(model, lossOptions(model, 1)).save_optimizer("never.st"),
                    Catch::Contains("save_optimizer: the model has no optimizer"));
  JitOptions endless = trainOptions(model, 1, "sgd", 0.1);
  endless.optimizer.min_lr = 0.01;  // a decay's end without a decay
  CHECK_THROWS_WITH(jit(model, endless),
                    Catch::Contains("min-lr is where the decay ends; give decay-steps"));
  JitOptions negative = trainOptions(model, 1, "sgd", 0.1);
  negative.optimizer.max_grad_norm = -1;
  CHECK_THROWS_WITH(jit(model, negative), Catch::Contains("max-grad-norm must not be negative"));
}
