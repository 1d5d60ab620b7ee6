// sgd_step and adamw_step on the CPU (runtime/Optimizers.h) against the
// update written in double from torch.optim's documentation, and their
// errors. reduce_scatter's tests need ranks: LocalCommunicatorTest.cpp.
#include "runtime/Optimizers.h"

#include "runtime/DeterministicInput.h"
#include "runtime/InitOps.h"
#include "runtime/LocalCommunicator.h"
#include "runtime/RuntimeError.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <memory>
#include <vector>

using namespace shardc::runtime;
using shardc::plan::DType;

namespace {

std::vector<float> values(int64_t n, uint64_t seed, float scale) {
  HostTensor t = makeDeterministicInput("v", DType::F32, {n}, seed);
  std::vector<float> out(t.as<float>(), t.as<float>() + n);
  for (float &v : out) v *= scale;
  return out;
}

KTensor view(std::vector<float> &v) {
  return {DType::F32, {static_cast<int64_t>(v.size())}, v.data()};
}

/// A communicator of one rank (grad_norm's collective with no one else).
struct LocalCommunicatorForOneRank {
  LocalGroup group{1, std::chrono::seconds(10)};
  std::unique_ptr<LocalCommunicator> comm = std::make_unique<LocalCommunicator>(group, 0);
};

}  // namespace

TEST_CASE("sgd_step: torch's SGD with momentum and weight decay, three steps", "[training]") {
  const int64_t n = 50;
  std::vector<float> p = values(n, 1, 1.0f), buffer(n, 0.0f);
  std::vector<double> refP(p.begin(), p.end()), refBuffer(n, 0.0);
  const SgdParams sgd{0.05, 0.9, 0.01};
  for (int step = 0; step < 3; ++step) {
    std::vector<float> g = values(n, 10 + step, 0.5f);
    KTensor buf = view(buffer);
    sgdStepKernel(sgd, view(p), view(g), &buf, nullptr, nullptr, 1);
    for (int64_t i = 0; i < n; ++i) {
      const double d = g[i] + sgd.weightDecay * refP[i];
      refBuffer[i] = sgd.momentum * refBuffer[i] + d;
      refP[i] -= sgd.lr * refBuffer[i];
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    CHECK(p[i] == Approx(refP[i]).epsilon(1e-5).margin(1e-6));
    CHECK(buffer[i] == Approx(refBuffer[i]).epsilon(1e-5).margin(1e-6));
  }
}

TEST_CASE("adamw_step: torch's AdamW with bias correction, three steps", "[training]") {
  const int64_t n = 50;
  std::vector<float> p = values(n, 2, 1.0f), m(n, 0.0f), v(n, 0.0f);
  std::vector<double> refP(p.begin(), p.end()), refM(n, 0.0), refV(n, 0.0);
  const AdamwParams adamw{0.01, 0.8, 0.99, 1e-6, 0.1};
  for (int step = 1; step <= 3; ++step) {
    std::vector<float> g = values(n, 20 + step, 0.3f);
    float count = static_cast<float>(step);
    KTensor stepCount{DType::F32, {}, &count};
    adamwStepKernel(adamw, view(p), view(g), view(m), view(v), stepCount, nullptr, 1);
    const double c1 = 1 - std::pow(adamw.beta1, step), c2 = 1 - std::pow(adamw.beta2, step);
    for (int64_t i = 0; i < n; ++i) {
      refP[i] *= 1 - adamw.lr * adamw.weightDecay;
      refM[i] = adamw.beta1 * refM[i] + (1 - adamw.beta1) * g[i];
      refV[i] = adamw.beta2 * refV[i] + (1 - adamw.beta2) * double(g[i]) * g[i];
      refP[i] -= adamw.lr / c1 * refM[i] / (std::sqrt(refV[i]) / std::sqrt(c2) + adamw.eps);
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    CHECK(p[i] == Approx(refP[i]).epsilon(1e-5).margin(1e-6));
    CHECK(m[i] == Approx(refM[i]).epsilon(1e-5).margin(1e-7));
    CHECK(v[i] == Approx(refV[i]).epsilon(1e-5).margin(1e-9));
  }
}

TEST_CASE("scheduledLr: a linear warmup, then a cosine decay to min_lr", "[training]") {
  AdamwParams p;
  p.lr = 0.1;
  CHECK(scheduledLr(p, 1) == 0.1);  // no schedule: lr throughout
  CHECK(scheduledLr(p, 1000) == 0.1);
  p.warmupSteps = 4;
  p.decaySteps = 10;
  p.minLr = 0.01;
  CHECK(scheduledLr(p, 1) == 0.1 * (1.0 / 4));
  CHECK(scheduledLr(p, 2) == 0.1 * (2.0 / 4));
  CHECK(scheduledLr(p, 4) == 0.1);                                       // the warmup ends at lr
  CHECK(scheduledLr(p, 9) == Approx(0.01 + 0.09 * 0.5).epsilon(1e-15));  // half way
  CHECK(scheduledLr(p, 14) == Approx(0.01).epsilon(1e-15));              // the decay's end
  CHECK(scheduledLr(p, 100) == Approx(0.01).epsilon(1e-15));             // and after it
  for (int step = 5; step < 14; ++step) CHECK(scheduledLr(p, step + 1) < scheduledLr(p, step));
  // The AdamW scalars take the scheduled rate.
  const AdamwStepScalars warm = adamwStepScalars(p, 2);
  CHECK(warm.decay == 1 - 0.05 * p.weightDecay);
}

TEST_CASE("optimizer steps: the same bytes at any thread count", "[training]") {
  const int64_t n = 100000;  // many blocks
  std::vector<float> g = values(n, 5, 0.2f);
  std::vector<std::vector<float>> results;
  for (int threads : {1, 4}) {
    std::vector<float> p = values(n, 6, 1.0f), m(n, 0.1f), v(n, 0.2f);
    float count = 2.0f;
    KTensor stepCount{DType::F32, {}, &count};
    adamwStepKernel({0.01, 0.9, 0.999, 1e-8, 0.01}, view(p), view(g), view(m), view(v), stepCount,
                    nullptr, threads);
    results.push_back(p);
  }
  CHECK(results[0] == results[1]);
}

TEST_CASE("optimizer steps: mismatched operands and a zero step count are errors",
          "[training]") {
  std::vector<float> p(4, 1.0f), g(5, 1.0f), m(4, 0.0f), v(4, 0.0f);
  CHECK_THROWS_WITH(sgdStepKernel({0.1, 0, 0}, view(p), view(g), nullptr, nullptr, nullptr, 1),
                    Catch::Contains("sgd_step: the gradient (float32 [5]) does not match the "
                                    "param's float32 [4]"));
  std::vector<float> g4(4, 1.0f);
  float count = 0.0f;
  KTensor stepCount{DType::F32, {}, &count};
  CHECK_THROWS_WITH(adamwStepKernel({0.1, 0.9, 0.999, 1e-8, 0}, view(p), view(g4), view(m), view(v),
                                    stepCount, nullptr, 1),
                    Catch::Contains("the step count is 0"));
  std::vector<int64_t> ints(4, 1);
  KTensor intParam{DType::I64, {4}, ints.data()};
  CHECK_THROWS_WITH(sgdStepKernel({0.1, 0, 0}, intParam, view(g4), nullptr, nullptr, nullptr, 1),
                    Catch::Contains("the param is int64"));
}

TEST_CASE("clipping: the gradient scaled by max_norm / (norm + 1e-6), at most 1", "[training]") {
  // torch.nn.utils.clip_grad_norm_'s coefficient in float: clipped below
  // the norm, left alone (times 1) above it, NaN through.
  CHECK(clipCoefficient<float>(1.0, 5.0) == 1.0f / (5.0f + 1e-6f));
  CHECK(clipCoefficient<float>(10.0, 5.0) == 1.0f);
  CHECK(clipCoefficient<double>(1.0, 4.0) == 1.0 / (4.0 + 1e-6));
  CHECK(std::isnan(clipCoefficient<float>(1.0, std::nan(""))));

  // An SGD step with norm 5 and max 1: p - lr * (g * coefficient).
  std::vector<float> p{1.0f, 2.0f}, g{3.0f, 4.0f}, g2 = g;
  std::vector<double> norm{0.0};
  KTensor normView{DType::F64, {}, norm.data()};
  const std::vector<KTensor> grads{view(g)};
  LocalCommunicatorForOneRank one;
  gradNormKernel(*one.comm, grads, {false}, normView, 1);
  CHECK(norm[0] == 5.0);
  SgdParams sgd{0.5, 0, 0, 1.0};
  sgdStepKernel(sgd, view(p), view(g), nullptr, nullptr, &normView, 1);
  const float coefficient = 1.0f / (5.0f + 1e-6f);
  CHECK(p[0] == 1.0f + -0.5f * (3.0f * coefficient));
  CHECK(p[1] == 2.0f + -0.5f * (4.0f * coefficient));
  CHECK(g == g2);  // the gradient buffer itself is not written

  // A step that clips needs the norm, and a norm needs max_grad_norm.
  CHECK_THROWS_WITH(sgdStepKernel(sgd, view(p), view(g), nullptr, nullptr, nullptr, 1),
                    Catch::Contains("max_grad_norm > 0 and the gradients' norm go together"));
  CHECK_THROWS_WITH(sgdStepKernel({0.5, 0, 0}, view(p), view(g), nullptr, nullptr, &normView, 1),
                    Catch::Contains("max_grad_norm > 0 and the gradients' norm go together"));
}

TEST_CASE("sgd_step: a schedule reads the step count", "[training]") {
  // At count 2 of a 4-step warmup the rate is lr / 2: p - (lr / 2) g.
  std::vector<float> p{1.0f, -2.0f}, g{0.5f, 0.25f};
  float count = 2.0f;
  KTensor step{DType::F32, {}, &count};
  SgdParams sgd{0.2, 0, 0, 0, 4, 0, 0};
  sgdStepKernel(sgd, view(p), view(g), nullptr, &step, nullptr, 1);
  const float minusLr = static_cast<float>(-scheduledLr(sgd, 2.0));
  CHECK(minusLr == -0.1f);
  CHECK(p[0] == 1.0f + minusLr * 0.5f);
  CHECK(p[1] == -2.0f + minusLr * 0.25f);
  count = 0.0f;  // not advanced: an error, as AdamW's
  CHECK_THROWS_WITH(sgdStepKernel(sgd, view(p), view(g), nullptr, &step, nullptr, 1),
                    Catch::Contains("the step count is 0"));
}

TEST_CASE("sgd_step: Nesterov momentum steps by grad + momentum * buf", "[training]") {
  // A zero buffer: buf = g, the update g + 0.9 g (torch's first Nesterov
  // step), the buffer keeps g.
  std::vector<float> p{1.0f, -2.0f}, g{0.5f, 0.25f}, buffer{0.0f, 0.0f};
  KTensor buf = view(buffer);
  SgdParams sgd{0.1, 0.9, 0, 0, 0, 0, 0, /*nesterov=*/true};
  sgdStepKernel(sgd, view(p), view(g), &buf, nullptr, nullptr, 1);
  CHECK(buffer == g);
  for (int i = 0; i < 2; ++i) {
    const float update = g[i] + 0.9f * g[i];
    CHECK(p[i] == (i == 0 ? 1.0f : -2.0f) + -0.1f * update);
  }
}
