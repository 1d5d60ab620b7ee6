// moe_experts_backward's CPU kernel (runtime/cpu/MoeBackwardKernels.cpp)
// and the rows its ops share (moe_experts_hidden, moe_experts_gated_grad)
// against central differences of moe_experts' double definition
// (MoeReference.h): the gradient of sum(g * y) with respect to each
// operand, for every gate activation, float32 and bfloat16; its bits at any
// thread count and batch split; the errors.
#include "FamilyTestSupport.h"
#include "MoeReference.h"

#include "runtime/RuntimeError.h"
#include "runtime/cpu/FamilyKernels.h"

#include <catch2/catch.hpp>

#include <random>
#include <string>

using namespace shardc::runtime;
using namespace shardc::runtime::familytest;

namespace {

struct MoeCase {
  TT x, index, w, gateUp, down, g;
  GateActivation act;
};

/// T tokens, k of E experts each, most tokens on expert 1 (its rows pass
/// the kernel's 256-row blocks when T > 128) and expert E - 1 unused.
MoeCase makeCase(DType dt, int64_t T, int64_t k, int64_t E, int64_t H, int64_t I,
                 GateActivation act) {
  MoeCase c{random(dt, {T, H}, 1),
            zeros(DType::I64, {T, k}),
            random(dt, {T, k}, 2, 0, 1),
            random(dt, {E, 2 * I, H}, 3, -0.4, 0.4),
            random(dt, {E, H, I}, 4, -0.4, 0.4),
            random(dt, {T, H}, 5),
            act};
  for (int64_t t = 0; t < T; ++t)
    for (int64_t s = 0; s < k; ++s)
      c.index.set(t * k + s, double(s == 0 ? (t % 5 == 0 ? 0 : 1) : 2 + (t + s) % (E - 3)));
  return c;
}

const char *operandName(MoeOperand wrt) {
  switch (wrt) {
  case MoeOperand::X: return "x";
  case MoeOperand::Weights: return "weights";
  case MoeOperand::GateUp: return "gate_up";
  case MoeOperand::Down: return "down";
  }
  return "?";
}

/// moe_experts_hidden of the case: each routed row's [gate; up].
TT runHidden(const MoeCase &c, int threads) {
  const int64_t T = c.x.shape[0], H = c.x.shape[1], k = c.index.shape[1];
  const int64_t I = c.gateUp.shape[1] / 2;
  TT h = random(c.x.dtype, {T, k, 2 * I}, 98);
  std::vector<std::byte> work(size_t(moeExpertsHiddenWorkBytes(T, k, H, I)));
  moeExpertsHiddenKernel(c.x.k(), c.index.k(), c.gateUp.k(), h.k(), work.data(), threads);
  return h;
}

/// moe_experts_gated_grad of the case: each routed row's da' = g down[e].
TT runGatedGrad(const MoeCase &c, int threads) {
  const int64_t T = c.x.shape[0], H = c.x.shape[1], k = c.index.shape[1];
  const int64_t I = c.down.shape[2];
  TT da = random(c.x.dtype, {T, k, I}, 97);
  std::vector<std::byte> work(size_t(moeExpertsGatedGradWorkBytes(T, k, H, I)));
  moeExpertsGatedGradKernel(c.g.k(), c.index.k(), c.down.k(), da.k(), work.data(), threads);
  return da;
}

TT runBackward(const MoeCase &c, MoeOperand wrt, int threads, const TT *hidden = nullptr,
               const TT *gatedGrad = nullptr) {
  const TT *operand = wrt == MoeOperand::X         ? &c.x
                      : wrt == MoeOperand::Weights ? &c.w
                      : wrt == MoeOperand::GateUp  ? &c.gateUp
                                                   : &c.down;
  TT y = random(operand->dtype, operand->shape, 99);  // garbage: every element is written
  const int64_t T = c.x.shape[0], H = c.x.shape[1], I = c.gateUp.shape[1] / 2;
  std::vector<std::byte> work(
      size_t(moeExpertsBackwardWorkBytes(wrt, T, c.index.shape[1], H, I, y.dtype)));
  const KTensor shared = hidden ? hidden->k() : KTensor{};
  const KTensor sharedGrad = gatedGrad ? gatedGrad->k() : KTensor{};
  moeExpertsBackwardKernel({c.act, wrt}, c.x.k(), c.index.k(), c.w.k(), c.gateUp.k(), c.down.k(),
                           c.g.k(), hidden ? &shared : nullptr, gatedGrad ? &sharedGrad : nullptr,
                           y.k(), work.data(), threads);
  return y;
}

MoeValues valuesOf(const MoeCase &c) {
  MoeValues m;
  m.T = c.x.shape[0], m.H = c.x.shape[1], m.k = c.index.shape[1], m.E = c.gateUp.shape[0];
  m.I = c.gateUp.shape[1] / 2, m.act = c.act;
  auto values = [](const TT &t) {
    std::vector<double> v(size_t(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) v[size_t(i)] = t.at(i);
    return v;
  };
  m.x = values(c.x), m.weights = values(c.w), m.gateUp = values(c.gateUp);
  m.down = values(c.down);
  for (int64_t i = 0; i < c.index.numel(); ++i) m.index.push_back(int64_t(c.index.at(i)));
  return m;
}

/// d sum(g * y) / d operand[i], central differences of the double forward.
double numericGradient(MoeValues m, const std::vector<double> &g, MoeOperand wrt, int64_t i) {
  std::vector<double> &v = wrt == MoeOperand::X         ? m.x
                           : wrt == MoeOperand::Weights ? m.weights
                           : wrt == MoeOperand::GateUp  ? m.gateUp
                                                        : m.down;
  const double h = 1e-5 * std::max(1.0, std::abs(v[size_t(i)])), at = v[size_t(i)];
  auto loss = [&](double value) {
    v[size_t(i)] = value;
    const std::vector<double> y = moeOutputReference(m);
    double sum = 0;
    for (size_t j = 0; j < y.size(); ++j) sum += g[j] * y[j];
    return sum;
  };
  return (loss(at + h) - loss(at - h)) / (2 * h);
}

/// Checks `samples` elements of the kernel's gradient (all of them when
/// samples <= 0) against numericGradient, within tol of the largest.
void checkAgainstDifferences(const MoeCase &c, MoeOperand wrt, const TT &got, int64_t samples,
                             double tol) {
  const MoeValues m = valuesOf(c);
  std::vector<double> g(size_t(c.g.numel()));
  for (int64_t i = 0; i < c.g.numel(); ++i) g[size_t(i)] = c.g.at(i);
  double largest = 1e-30;
  for (int64_t i = 0; i < got.numel(); ++i) largest = std::max(largest, std::abs(got.at(i)));
  std::mt19937 rng(17);
  const int64_t count = samples <= 0 ? got.numel() : samples;
  for (int64_t n = 0; n < count; ++n) {
    const int64_t i = samples <= 0 ? n : int64_t(rng() % uint64_t(got.numel()));
    const double want = numericGradient(m, g, wrt, i);
    INFO(operandName(wrt) << " element " << i << ": got " << got.at(i) << ", want " << want);
    REQUIRE(std::abs(got.at(i) - want) <= tol * largest);
  }
}

constexpr MoeOperand kOperands[] = {MoeOperand::X, MoeOperand::Weights, MoeOperand::GateUp,
                                    MoeOperand::Down};

}  // namespace

TEST_CASE("moe_experts_backward: every element is the derivative of the definition",
          "[family-kernels]") {
  // 12 tokens, 2 of 6 experts, H = 8, I = 5: every element of every
  // gradient, each activation (the unused expert's gradients are zeros).
  for (GateActivation act : {GateActivation::Silu, GateActivation::Gelu, GateActivation::GeluTanh,
                             GateActivation::Relu}) {
    const MoeCase c = makeCase(DType::F32, 12, 2, 6, 8, 5, act);
    for (MoeOperand wrt : kOperands) {
      INFO("activation " << int(act));
      checkAgainstDifferences(c, wrt, runBackward(c, wrt, 2), 0, 1e-5);
    }
    const TT dDown = runBackward(c, MoeOperand::Down, 1);
    for (int64_t i = 5 * 8 * 5; i < 6 * 8 * 5; ++i) CHECK(dDown.at(i) == 0.0);
  }
}

TEST_CASE("moe_experts_backward: blocks of rows, threads and batch splits keep the bits",
          "[family-kernels]") {
  // 400 tokens: expert 1 holds 320 rows, two of the kernel's 256-row
  // blocks, so its weight gradients' chains continue across blocks.
  const MoeCase c = makeCase(DType::F32, 400, 2, 6, 16, 24, GateActivation::Silu);
  for (MoeOperand wrt : kOperands) {
    const TT one = runBackward(c, wrt, 1);
    checkAgainstDifferences(c, wrt, one, 24, 1e-4);
    CHECK(runBackward(c, wrt, 3).bytes == one.bytes);
  }
  // A token's x and weights gradients depend only on its own row: tokens
  // 100..109 alone give the whole batch's rows.
  auto rows = [](const TT &t, int64_t first, int64_t count) {
    TT part = zeros(t.dtype, {count, t.shape[1]});
    const int64_t size = shardc::plan::dtypeSize(t.dtype) * t.shape[1];
    std::memcpy(part.bytes.data(), t.bytes.data() + first * size, size_t(count * size));
    return part;
  };
  MoeCase part = c;
  part.x = rows(c.x, 100, 10), part.index = rows(c.index, 100, 10);
  part.w = rows(c.w, 100, 10), part.g = rows(c.g, 100, 10);
  for (MoeOperand wrt : {MoeOperand::X, MoeOperand::Weights})
    CHECK(runBackward(part, wrt, 2).bytes == rows(runBackward(c, wrt, 2), 100, 10).bytes);
}

TEST_CASE("moe_experts_backward: the shared rows give the recomputed bits", "[family-kernels]") {
  // The shared [gate; up] (moe_experts_hidden) is the forward's GEMM row
  // for row, and the shared da' (moe_experts_gated_grad) the backward's:
  // each backward reading them writes the bytes it writes recomputing them
  // (float32; 400 tokens: two blocks for the busiest expert).
  for (GateActivation act : {GateActivation::Silu, GateActivation::Gelu}) {
    const MoeCase c = makeCase(DType::F32, 400, 2, 6, 16, 24, act);
    const TT hidden = runHidden(c, 2), gated = runGatedGrad(c, 2);
    CHECK(runHidden(c, 1).bytes == hidden.bytes);
    CHECK(runGatedGrad(c, 1).bytes == gated.bytes);
    // Row (t, s) of each against the double definition.
    const MoeValues m = valuesOf(c);
    double worstHidden = 0, worstGated = 0;
    for (int64_t t = 0; t < m.T; ++t)
      for (int64_t s = 0; s < m.k; ++s) {
        const int64_t e = m.index[size_t(t * m.k + s)];
        for (int64_t i = 0; i < 2 * m.I; ++i) {
          double want = 0;
          for (int64_t j = 0; j < m.H; ++j)
            want += m.gateUp[size_t((e * 2 * m.I + i) * m.H + j)] * m.x[size_t(t * m.H + j)];
          worstHidden =
              std::max(worstHidden, std::abs(hidden.at((t * m.k + s) * 2 * m.I + i) - want));
        }
        for (int64_t i = 0; i < m.I; ++i) {  // da'[i] = sum_j g[t, j] down[e, j, i]
          double want = 0;
          for (int64_t j = 0; j < m.H; ++j)
            want += c.g.at(t * m.H + j) * m.down[size_t((e * m.H + j) * m.I + i)];
          worstGated = std::max(worstGated, std::abs(gated.at((t * m.k + s) * m.I + i) - want));
        }
      }
    CHECK(worstHidden < 1e-5);
    CHECK(worstGated < 1e-5);
    for (MoeOperand wrt : kOperands) {
      INFO(operandName(wrt));
      const TT recomputed = runBackward(c, wrt, 2);
      CHECK(runBackward(c, wrt, 2, &hidden).bytes == recomputed.bytes);
      CHECK(runBackward(c, wrt, 2, &hidden, &gated).bytes == recomputed.bytes);
    }
  }
}

TEST_CASE("moe_experts_backward: bfloat16 through float accumulators", "[family-kernels]") {
  // The float32 kernel on the same (bf16-exact) values, rounded once.
  const MoeCase b = makeCase(DType::BF16, 40, 2, 5, 8, 6, GateActivation::Silu);
  MoeCase f = b;
  for (TT *t : {&f.x, &f.w, &f.gateUp, &f.down, &f.g}) {
    TT wide = zeros(DType::F32, t->shape);
    for (int64_t i = 0; i < t->numel(); ++i) wide.set(i, t->at(i));
    *t = wide;
  }
  for (MoeOperand wrt : kOperands) {
    const TT got = runBackward(b, wrt, 2), want = runBackward(f, wrt, 2);
    for (int64_t i = 0; i < got.numel(); ++i) {
      INFO(operandName(wrt) << " element " << i);
      const double rounded = TT(fromValues(DType::BF16, {1}, {want.at(i)})).at(0);
      REQUIRE(got.at(i) == rounded);
    }
  }
}

TEST_CASE("moe_experts_backward rejects bad operands with the reason", "[family-kernels]") {
  MoeCase c = makeCase(DType::F32, 4, 1, 4, 4, 2, GateActivation::Silu);
  c.index.set(3, 4.0);
  CHECK_THROWS_WITH(runBackward(c, MoeOperand::GateUp, 1),
                    "moe_experts_backward: expert index 4 of token 3 (slot 0) is out of range "
                    "for 4 experts");
  CHECK_THROWS_WITH(
      moeExpertsBackwardShape(MoeOperand::X, {4, 4}, {4, 1}, {4, 1}, {4, 4, 4}, {4, 4, 2}, {4, 5}),
      "moe_experts_backward: grad [4, 5] must have the shape of the forward's "
      "output [4, 4]");
  CHECK_THROWS_WITH(
      moeExpertsBackwardShape(MoeOperand::X, {4, 4}, {4, 1}, {4, 1}, {4, 4, 4}, {4, 4, 3}, {4, 4}),
      "moe_experts_backward: down must be [E, H, I] = [4, 4, 2], got [4, 4, 3]");
  CHECK(moeExpertsBackwardShape(MoeOperand::Weights, {4, 4}, {4, 1}, {4, 1}, {4, 4, 4}, {4, 4, 2},
                                {4, 4}) == Shape{4, 1});
  const Shape wrong{4, 1, 6};
  CHECK_THROWS_WITH(moeExpertsBackwardShape(MoeOperand::X, {4, 4}, {4, 1}, {4, 1}, {4, 4, 4},
                                            {4, 4, 2}, {4, 4}, &wrong),
                    "moe_experts_backward: hidden [4, 1, 6] must be moe_experts_hidden's "
                    "[T, k, 2I] = [4, 1, 4]");
  const Shape hidden{4, 1, 4}, gated{4, 1, 3};
  CHECK_THROWS_WITH(moeExpertsBackwardShape(MoeOperand::X, {4, 4}, {4, 1}, {4, 1}, {4, 4, 4},
                                            {4, 4, 2}, {4, 4}, nullptr, &gated),
                    "moe_experts_backward: gated_grad (operand 7) needs hidden (operand 6): "
                    "moe_experts_hidden's [T, k, 2I]");
  CHECK_THROWS_WITH(moeExpertsBackwardShape(MoeOperand::X, {4, 4}, {4, 1}, {4, 1}, {4, 4, 4},
                                            {4, 4, 2}, {4, 4}, &hidden, &gated),
                    "moe_experts_backward: gated_grad [4, 1, 3] must be moe_experts_gated_grad's "
                    "[T, k, I] = [4, 1, 2]");
  CHECK(moeExpertsGatedGradShape({4, 4}, {4, 1}, {4, 4, 2}) == Shape{4, 1, 2});
  CHECK_THROWS_WITH(moeExpertsGatedGradShape({4, 4}, {4, 1}, {4, 3, 2}),
                    "moe_experts_gated_grad: down must be [E, H, I] with H = 4, got [4, 3, 2]");
  CHECK_THROWS_WITH(runGatedGrad(c, 1), "moe_experts_gated_grad: expert index 4 of token 3 "
                                        "(slot 0) is out of range for 4 experts");
  CHECK_THROWS_WITH(moeExpertsHiddenShape({4, 4}, {3, 1}, {4, 4, 4}),
                    "moe_experts_hidden: index must be [T, k] with T = 4, got [3, 1]");
  CHECK_THROWS_WITH(runHidden(c, 1), "moe_experts_hidden: expert index 4 of token 3 (slot 0) is "
                                     "out of range for 4 experts");
  CHECK_THROWS_WITH(moeOperandNamed("up"),
                    "moe_experts_backward: wrt must be x, weights, gate_up or down, got \"up\"");
}
