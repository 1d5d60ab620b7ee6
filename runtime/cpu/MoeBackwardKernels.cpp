// CPU kernel of moe_experts_backward (runtime/OpFamilies.h): the gradient of
// a mixture of experts' experts with respect to one operand, tokens grouped
// by expert as the forward groups them (runtime/cpu/MoeKernels.cpp).
//
// Why one op per operand and a recomputed forward: the graph's ops have one
// result, and keeping each routed row's gate/up activations from forward to
// backward would hold T * k * 2I floats per layer (k of the experts'
// hidden width per token) for the whole backward. Recomputing a block's
// [gate; up] is one GEMM of the forward's two; the four gradients cost
// 10 GEMMs of a block's size where a fused backward would need 6, and no
// memory beyond a block's rows (docs/training.md).
//
// Bits: a weight gradient's element is one fma chain over the expert's
// routed rows in token order (Gemm.h's `accumulate` continues it from block
// to block), and x's gradient sums its slots in ascending expert order, as
// the forward sums y; nothing depends on the thread count. The file is
// compiled without contraction, as the forward's.
#include "runtime/cpu/FamilyKernels.h"

#include "runtime/ForwardChecks.h"
#include "runtime/cpu/Gemm.h"
#include "runtime/cpu/KernelSupport.h"
#include "runtime/cpu/VectorMath.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace shardc::runtime {
using plan::DType;

namespace {

/// act(gate) for one row of I values, with the forward's bits.
void activate(GateActivation act, const float *gate, float *out, int64_t inner) {
  switch (act) {
  case GateActivation::Silu: cpu::vecApply(cpu::VecFn::Silu, gate, out, inner); return;
  case GateActivation::Gelu: cpu::vecApply(cpu::VecFn::GeluErf, gate, out, inner); return;
  case GateActivation::GeluTanh: cpu::vecApply(cpu::VecFn::GeluTanh, gate, out, inner); return;
  case GateActivation::Relu:
    for (int64_t i = 0; i < inner; ++i)
      out[i] = gate[i] > 0.0f || gate[i] != gate[i] ? gate[i] : 0.0f;
    return;
  }
}

/// act'(v), in double (the gradient rules' formulas, docs/training.md).
float activationSlope(GateActivation act, float value) {
  const double x = value;
  switch (act) {
  case GateActivation::Silu: {
    const double s = 1.0 / (1.0 + std::exp(-x));
    return static_cast<float>(s * (1.0 + x * (1.0 - s)));
  }
  case GateActivation::Gelu: {
    const double cdf = 0.5 * (1.0 + std::erf(x * M_SQRT1_2));
    const double pdf = std::exp(-0.5 * x * x) * 0.5 * M_2_SQRTPI * M_SQRT1_2;
    return static_cast<float>(cdf + x * pdf);
  }
  case GateActivation::GeluTanh: {
    const double k = M_2_SQRTPI * M_SQRT1_2, c = 0.044715;
    const double t = std::tanh(k * (x + c * x * x * x));
    return static_cast<float>(0.5 * (1.0 + t) +
                              0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * c * x * x));
  }
  case GateActivation::Relu: return x > 0.0 ? 1.0f : 0.0f;
  }
  return 0.0f;
}

/// One expert's block of routed rows and the float rows the backward
/// computes for them (moeExpertsBackwardWorkBytes's (4 H + 6 I) per row).
struct Block {
  int64_t R, H, I;
  float *x;   // [R, H] the rows' input
  float *h;   // [R, 2I] [gate; up] = x gate_up[e]^T
  float *a;   // [R, I] act(gate) * up
  float *gw;  // [R, H] the output gradient (times the slot's weight)
  float *o;   // [R, H] o, or do^T [H, R], or dx [R, H]
  float *da;  // [R, I] down[e]^T (w g)
  float *dh;  // [R, 2I] [dgate; dup], or transposed [2I, R]

  explicit Block(float *work, int64_t rows, int64_t hidden, int64_t inner)
      : R(rows), H(hidden), I(inner) {
    x = work, h = x + R * H, a = h + R * 2 * I, gw = a + R * I, o = gw + R * H, da = o + R * H,
    dh = da + R * I;
  }
  float *end() const { return dh + R * 2 * I; }
};

cpu::GemmArgs gemmArgs(int64_t M, int64_t N, int64_t K, cpu::GemmOperand A, cpu::GemmOperand B,
                       bool transB, float *C, int64_t ldc) {
  cpu::GemmArgs g{};
  g.M = M, g.N = N, g.K = K, g.A = A, g.B = B, g.transB = transB;
  g.C = C, g.cDtype = DType::F32, g.cOffset = 0, g.ldc = ldc;
  return g;
}

}  // namespace

void moeExpertsBackwardKernel(const MoeParams &p, const KTensor &x, const KTensor &index,
                              const KTensor &weights, const KTensor &gateUp, const KTensor &down,
                              const KTensor &grad, const KTensor &y, std::byte *workspace,
                              int threads) {
  checks::moeExpertsBackward(p.wrt, x, index, weights, gateUp, down, grad, y);
  const int64_t T = x.shape[0], H = x.shape[1], k = index.shape[1];
  const int64_t E = gateUp.shape[0], I = gateUp.shape[1] / 2;
  const int64_t *ids = static_cast<const int64_t *>(index.data);
  const MoeOperand wrt = p.wrt;

  std::vector<std::vector<std::pair<int64_t, int64_t>>> routed(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t s = 0; s < k; ++s) {
      const int64_t e = ids[t * k + s];
      if (e < 0 || e >= E)
        checks::fail("moe_experts_backward", "expert index " + std::to_string(e) + " of token " +
                                                 std::to_string(t) + " (slot " + std::to_string(s) +
                                                 ") is out of range for " + std::to_string(E) +
                                                 " experts");
      routed[static_cast<size_t>(e)].push_back({t, s});
    }

  const int64_t R = std::min(kMoeBlockRows, T * k);
  Block b(reinterpret_cast<float *>(workspace), R, H, I);
  // The result's float accumulator: y itself when float32 (weights: each
  // element is stored once), else the workspace's tail.
  float *accumulator = y.dtype == DType::F32 ? static_cast<float *>(y.data) : b.end();
  if (wrt == MoeOperand::X) std::fill(accumulator, accumulator + T * H, 0.0f);
  const int64_t expertElements = wrt == MoeOperand::GateUp ? 2 * I * H : H * I;
  if (y.dtype == DType::F32 && (wrt == MoeOperand::GateUp || wrt == MoeOperand::Down))
    std::fill(accumulator, accumulator + E * expertElements, 0.0f);
  std::vector<float> w(static_cast<size_t>(T * k));
  cpu::loadFloats(weights.dtype, weights.data, 0, T * k, w.data());

  for (int64_t e = 0; e < E; ++e) {
    const auto &rows = routed[static_cast<size_t>(e)];
    // This expert's weight gradient: its slice of y, or the float
    // accumulator stored into it after the expert's last block.
    float *expertGrad = nullptr;
    if (wrt == MoeOperand::GateUp || wrt == MoeOperand::Down) {
      expertGrad = y.dtype == DType::F32 ? accumulator + e * expertElements : accumulator;
      if (y.dtype != DType::F32) std::fill(expertGrad, expertGrad + expertElements, 0.0f);
    }
    for (size_t first = 0; first < rows.size(); first += static_cast<size_t>(R)) {
      const int64_t n = std::min<int64_t>(R, static_cast<int64_t>(rows.size() - first));
      for (int64_t r = 0; r < n; ++r)
        cpu::loadFloats(x.dtype, x.data, rows[first + r].first * H, H, b.x + r * H);
      // The forward's [gate; up] and act(gate) * up, with its bits.
      cpu::gemm(gemmArgs(n, 2 * I, H, {DType::F32, b.x, 0, H},
                         {gateUp.dtype, gateUp.data, e * 2 * I * H, H}, true, b.h, 2 * I),
                threads);
      for (int64_t r = 0; r < n; ++r) {
        float *a = b.a + r * I;
        const float *up = b.h + r * 2 * I + I;
        activate(p.activation, b.h + r * 2 * I, a, I);
        for (int64_t i = 0; i < I; ++i) a[i] = a[i] * up[i];
      }
      // The output gradient rows: g[t] (weights), or w g[t].
      for (int64_t r = 0; r < n; ++r) {
        const auto [t, s] = rows[first + r];
        float *gw = b.gw + r * H;
        cpu::loadFloats(grad.dtype, grad.data, t * H, H, gw);
        if (wrt == MoeOperand::Weights) continue;
        const float weight = w[static_cast<size_t>(t * k + s)];
        for (int64_t j = 0; j < H; ++j) gw[j] = gw[j] * weight;
      }

      if (wrt == MoeOperand::Weights) {
        // dw[t, s] = <g[t], o>, o = a down[e]^T: the forward's output row.
        cpu::gemm(gemmArgs(n, H, I, {DType::F32, b.a, 0, I}, {down.dtype, down.data, e * H * I, I},
                           true, b.o, H),
                  threads);
        for (int64_t r = 0; r < n; ++r) {
          const auto [t, s] = rows[first + r];
          double dot = 0.0;
          for (int64_t j = 0; j < H; ++j)
            dot += static_cast<double>(b.gw[r * H + j]) * b.o[r * H + j];
          const float value = static_cast<float>(dot);
          cpu::storeFloats(y.dtype, &value, 1, y.data, t * k + s);
        }
        continue;
      }
      if (wrt == MoeOperand::Down) {
        // d down[e] [H, I] += (w g)^T [H, n] a [n, I].
        for (int64_t r = 0; r < n; ++r)
          for (int64_t j = 0; j < H; ++j) b.o[j * R + r] = b.gw[r * H + j];
        cpu::GemmArgs g = gemmArgs(H, I, n, {DType::F32, b.o, 0, R}, {DType::F32, b.a, 0, I}, false,
                                   expertGrad, I);
        g.accumulate = true;
        cpu::gemm(g, threads);
        continue;
      }
      // da = (w g) down[e] [n, I]; dgate = da up act'(gate), dup = da act(gate).
      cpu::gemm(gemmArgs(n, I, H, {DType::F32, b.gw, 0, H}, {down.dtype, down.data, e * H * I, I},
                         false, b.da, I),
                threads);
      const bool transposed = wrt == MoeOperand::GateUp;  // dh^T [2I, R] for its GEMM
      for (int64_t r = 0; r < n; ++r) {
        const float *gate = b.h + r * 2 * I, *up = gate + I, *da = b.da + r * I;
        float *act = b.a + r * I;  // act(gate) again: a is not needed past here
        activate(p.activation, gate, act, I);
        for (int64_t i = 0; i < I; ++i) {
          const float dgate = da[i] * up[i] * activationSlope(p.activation, gate[i]);
          const float dup = da[i] * act[i];
          if (transposed) {
            b.dh[i * R + r] = dgate;
            b.dh[(I + i) * R + r] = dup;
          } else {
            b.dh[r * 2 * I + i] = dgate;
            b.dh[r * 2 * I + I + i] = dup;
          }
        }
      }
      if (wrt == MoeOperand::GateUp) {
        // d gate_up[e] [2I, H] += dh^T [2I, n] x [n, H].
        cpu::GemmArgs g = gemmArgs(2 * I, H, n, {DType::F32, b.dh, 0, R}, {DType::F32, b.x, 0, H},
                                   false, expertGrad, H);
        g.accumulate = true;
        cpu::gemm(g, threads);
        continue;
      }
      // dx rows = dh [n, 2I] gate_up[e] [2I, H], added to their tokens in
      // ascending expert order.
      cpu::gemm(gemmArgs(n, H, 2 * I, {DType::F32, b.dh, 0, 2 * I},
                         {gateUp.dtype, gateUp.data, e * 2 * I * H, H}, false, b.o, H),
                threads);
      for (int64_t r = 0; r < n; ++r) {
        float *dst = accumulator + rows[first + r].first * H;
        const float *src = b.o + r * H;
        for (int64_t j = 0; j < H; ++j) dst[j] = dst[j] + src[j];
      }
    }
    if (expertGrad && y.dtype != DType::F32)
      cpu::storeFloats(y.dtype, expertGrad, expertElements, y.data, e * expertElements);
  }
  if (wrt == MoeOperand::X && y.dtype != DType::F32)
    cpu::storeFloats(y.dtype, accumulator, T * H, y.data, 0);
}

}  // namespace shardc::runtime
