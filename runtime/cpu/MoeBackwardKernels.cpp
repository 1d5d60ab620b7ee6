// CPU kernels of moe_experts_backward, moe_experts_hidden and
// moe_experts_gated_grad (runtime/OpFamilies.h): the gradient of a mixture
// of experts' experts with respect to one operand, tokens grouped by expert
// as the forward groups them (runtime/cpu/MoeKernels.cpp), and the routed
// rows that the backward ops of one layer share: [gate; up] and da', the
// gradient at act(gate) * up before the slot's weight.
//
// Why one op per operand and recomputed rows: the graph's ops have one
// result, and keeping each routed row's gate/up activations from forward to
// backward would hold T * k * 2I floats per layer (k of the experts' hidden
// width per token) for the whole step. moe_experts_hidden recomputes them
// once, in the layer's backward, and moe_experts_gated_grad computes da'
// once; both live only while the layer's backward ops run. Without them
// (16-bit storage) each op recomputes its block's rows in float. A block's
// GEMMs, in units of rows x H x I: [gate; up] 2, da' 1, then weights 0 (a
// dot product of da' and a), down 1, gate_up 2, x 2; 8 with the forward's
// 3 where an eager backward saving everything needs 6 (docs/training.md).
//
// Bits: a weight gradient's element is the expert's routed rows in token
// order as Gemm.h sums any K: fma chains of 256 rows summed in order (each
// 256-row block one `accumulate` call adding its chain into the result:
// the bits of one call over all the rows), and x's gradient sums its slots in ascending expert order, as
// the forward sums y; nothing depends on the thread count, and the shared
// rows are the bits each op would recompute. The file is compiled without
// contraction, as the forward's.
#include "runtime/cpu/FamilyKernels.h"

#include "runtime/ForwardChecks.h"
#include "runtime/cpu/Gemm.h"
#include "runtime/cpu/KernelSupport.h"
#include "runtime/cpu/MoeSupport.h"
#include "runtime/cpu/VectorMath.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace shardc::runtime {
using plan::DType;

// Each block of rows is one whole group of Gemm.h's k (the last one may be
// shorter), so `accumulate` calls give one call's bits.
static_assert(kMoeBlockRows % cpu::kGroupK == 0, "MoE blocks are whole GEMM groups");

namespace {

/// slope[i] = act'(gate[i]) for one row of I values, in float with the
/// vectorized functions (runtime/cpu/VectorMath.h); `work` holds I floats.
void activationSlopes(GateActivation act, const float *gate, float *slope, float *work,
                      int64_t inner) {
  switch (act) {
  case GateActivation::Silu:  // s (1 + x (1 - s)), s = sigmoid(x)
    cpu::vecApply(cpu::VecFn::Sigmoid, gate, slope, inner);
    for (int64_t i = 0; i < inner; ++i) slope[i] = slope[i] * (1.0f + gate[i] * (1.0f - slope[i]));
    return;
  case GateActivation::Gelu: {  // Phi(x) + x phi(x)
    const float invSqrt2Pi = 0.3989422804014327f;
    for (int64_t i = 0; i < inner; ++i) {
      slope[i] = gate[i] * static_cast<float>(M_SQRT1_2);
      work[i] = -0.5f * gate[i] * gate[i];
    }
    cpu::vecApply(cpu::VecFn::Erf, slope, slope, inner);
    cpu::vecApply(cpu::VecFn::Exp, work, work, inner);
    for (int64_t i = 0; i < inner; ++i)
      slope[i] = 0.5f * (1.0f + slope[i]) + gate[i] * work[i] * invSqrt2Pi;
    return;
  }
  case GateActivation::GeluTanh: {  // t = tanh(k (x + c x^3))
    const float k = 0.7978845608028654f, c = 0.044715f;
    for (int64_t i = 0; i < inner; ++i) slope[i] = k * (gate[i] + c * gate[i] * gate[i] * gate[i]);
    cpu::vecApply(cpu::VecFn::Tanh, slope, slope, inner);
    for (int64_t i = 0; i < inner; ++i) {
      const float t = slope[i], x = gate[i];
      slope[i] = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k * (1.0f + 3.0f * c * x * x);
    }
    return;
  }
  case GateActivation::Relu:
    for (int64_t i = 0; i < inner; ++i) slope[i] = gate[i] > 0.0f ? 1.0f : 0.0f;
    return;
  }
}

/// One expert's block of routed rows and the float rows the backward
/// computes for them (moeExpertsBackwardWorkBytes's (3 H + 6 I) per row, 2 I
/// once).
struct Block {
  int64_t R, H, I;
  float *x;      // [R, H] the rows' input
  float *g;      // [R, H] the output gradient (down: times the slot's weight)
  float *o;      // [R, H] x's gradient rows
  float *h;      // [R, 2I] [gate; up] = x gate_up[e]^T
  float *a;      // [R, I] act(gate) * up, or act(gate)
  float *da;     // [R, I] da' = g down[e]
  float *dh;     // [R, 2I] [dgate; dup]
  float *slope;  // [I] one row's act'(gate)
  float *work;   // [I] scratch of activationSlopes

  explicit Block(float *base, int64_t rows, int64_t hidden, int64_t inner)
      : R(rows), H(hidden), I(inner) {
    x = base, g = x + R * H, o = g + R * H, h = o + R * H, a = h + R * 2 * I;
    da = a + R * I, dh = da + R * I, slope = dh + R * 2 * I, work = slope + I;
  }
  float *end() const { return work + I; }
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
                              const KTensor &grad, const KTensor *hidden, const KTensor *gatedGrad,
                              const KTensor &y, std::byte *workspace, int threads) {
  checks::moeExpertsBackward(p.wrt, x, index, weights, gateUp, down, grad, hidden, gatedGrad, y);
  const int64_t T = x.shape[0], H = x.shape[1], k = index.shape[1];
  const int64_t E = gateUp.shape[0], I = gateUp.shape[1] / 2;
  const MoeOperand wrt = p.wrt;
  const auto routed = cpu::routeByExpert("moe_experts_backward", index, E);

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
  auto slotWeight = [&](const std::pair<int64_t, int64_t> &row) {
    return w[static_cast<size_t>(row.first * k + row.second)];
  };

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
      // The forward's [gate; up]: moe_experts_hidden's rows, or the same
      // GEMM here (which reads the input rows too); gate_up's gradient
      // needs the input rows either way.
      if (hidden) {
        for (int64_t r = 0; r < n; ++r) {
          const auto [t, s] = rows[first + r];
          if (wrt == MoeOperand::GateUp) cpu::loadFloats(x.dtype, x.data, t * H, H, b.x + r * H);
          cpu::loadFloats(hidden->dtype, hidden->data, (t * k + s) * 2 * I, 2 * I, b.h + r * 2 * I);
        }
      } else {
        cpu::gateUpBlock(x, rows, first, n, gateUp, e, b.x, b.h, threads);
      }

      if (wrt == MoeOperand::Down) {
        // d down[e] [H, I] += (w g)^T [H, n] a [n, I], a = act(gate) * up.
        for (int64_t r = 0; r < n; ++r) {
          const float weight = slotWeight(rows[first + r]);
          float *g = b.g + r * H;
          cpu::loadFloats(grad.dtype, grad.data, rows[first + r].first * H, H, g);
          for (int64_t j = 0; j < H; ++j) g[j] = g[j] * weight;
          cpu::gatedProduct(p.activation, b.h + r * 2 * I, b.a + r * I, I);
        }
        cpu::GemmArgs g = gemmArgs(H, I, n, {DType::F32, b.g, 0, H}, {DType::F32, b.a, 0, I}, false,
                                   expertGrad, I);
        g.transA = true;
        g.accumulate = true;
        cpu::gemm(g, threads);
        continue;
      }

      // da' = g down[e]: moe_experts_gated_grad's rows, or the same GEMM.
      if (gatedGrad) {
        for (int64_t r = 0; r < n; ++r) {
          const auto [t, s] = rows[first + r];
          cpu::loadFloats(gatedGrad->dtype, gatedGrad->data, (t * k + s) * I, I, b.da + r * I);
        }
      } else {
        cpu::gatedGradBlock(grad, rows, first, n, down, e, b.g, b.da, threads);
      }

      if (wrt == MoeOperand::Weights) {
        // dw[t, s] = <da', act(gate) * up>, a double dot product.
        for (int64_t r = 0; r < n; ++r) {
          const auto [t, s] = rows[first + r];
          const float *a = b.a + r * I, *da = b.da + r * I;
          cpu::gatedProduct(p.activation, b.h + r * 2 * I, b.a + r * I, I);
          double dot = 0.0;
          for (int64_t i = 0; i < I; ++i) dot += static_cast<double>(da[i]) * a[i];
          const float value = static_cast<float>(dot);
          cpu::storeFloats(y.dtype, &value, 1, y.data, t * k + s);
        }
        continue;
      }

      // da = w da'; dgate = da up act'(gate), dup = da act(gate).
      for (int64_t r = 0; r < n; ++r) {
        const float weight = slotWeight(rows[first + r]);
        const float *gate = b.h + r * 2 * I, *up = gate + I, *da = b.da + r * I;
        float *act = b.a + r * I, *dgate = b.dh + r * 2 * I, *dup = dgate + I;
        cpu::activateGate(p.activation, gate, act, I);
        activationSlopes(p.activation, gate, b.slope, b.work, I);
        for (int64_t i = 0; i < I; ++i) {
          const float weighted = weight * da[i];
          dgate[i] = weighted * up[i] * b.slope[i];
          dup[i] = weighted * act[i];
        }
      }
      if (wrt == MoeOperand::GateUp) {
        // d gate_up[e] [2I, H] += dh^T [2I, n] x [n, H].
        cpu::GemmArgs g = gemmArgs(2 * I, H, n, {DType::F32, b.dh, 0, 2 * I},
                                   {DType::F32, b.x, 0, H}, false, expertGrad, H);
        g.transA = true;
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

namespace {

/// The routed rows that the backward ops of one moe_experts share, y
/// [T, k, width]: per block of up to R of an expert's rows (experts
/// ascending), compute(e, first, n) fills `block` [n, width] and each row is
/// stored at its slot (t, s).
template <typename Compute>
void storeSharedRows(const std::vector<std::vector<std::pair<int64_t, int64_t>>> &routed, int64_t k,
                     int64_t R, int64_t width, const float *block, const KTensor &y,
                     const Compute &compute) {
  for (size_t e = 0; e < routed.size(); ++e) {
    const auto &rows = routed[e];
    for (size_t first = 0; first < rows.size(); first += static_cast<size_t>(R)) {
      const int64_t n = std::min<int64_t>(R, static_cast<int64_t>(rows.size() - first));
      compute(static_cast<int64_t>(e), first, n);
      for (int64_t r = 0; r < n; ++r) {
        const auto [t, s] = rows[first + r];
        cpu::storeFloats(y.dtype, block + r * width, width, y.data, (t * k + s) * width);
      }
    }
  }
}

}  // namespace

void moeExpertsHiddenKernel(const KTensor &x, const KTensor &index, const KTensor &gateUp,
                            const KTensor &y, std::byte *workspace, int threads) {
  checks::moeExpertsHidden(x, index, gateUp, y);
  const int64_t T = x.shape[0], H = x.shape[1], k = index.shape[1];
  const int64_t E = gateUp.shape[0], I = gateUp.shape[1] / 2;
  const auto routed = cpu::routeByExpert("moe_experts_hidden", index, E);
  // Working memory (moeExpertsHiddenWorkBytes): a block's input rows
  // [R, H] and their [gate; up] [R, 2I], the forward's GEMM.
  const int64_t R = std::min(kMoeBlockRows, T * k);
  float *xBlock = reinterpret_cast<float *>(workspace), *hBlock = xBlock + R * H;
  storeSharedRows(routed, k, R, 2 * I, hBlock, y, [&](int64_t e, size_t first, int64_t n) {
    cpu::gateUpBlock(x, routed[static_cast<size_t>(e)], first, n, gateUp, e, xBlock, hBlock,
                     threads);
  });
}

void moeExpertsGatedGradKernel(const KTensor &grad, const KTensor &index, const KTensor &down,
                               const KTensor &y, std::byte *workspace, int threads) {
  checks::moeExpertsGatedGrad(grad, index, down, y);
  const int64_t T = grad.shape[0], H = grad.shape[1], k = index.shape[1];
  const int64_t E = down.shape[0], I = down.shape[2];
  const auto routed = cpu::routeByExpert("moe_experts_gated_grad", index, E);
  // Working memory (moeExpertsGatedGradWorkBytes): a block's gradient rows
  // [R, H] and their da' [R, I].
  const int64_t R = std::min(kMoeBlockRows, T * k);
  float *gBlock = reinterpret_cast<float *>(workspace), *daBlock = gBlock + R * H;
  storeSharedRows(routed, k, R, I, daBlock, y, [&](int64_t e, size_t first, int64_t n) {
    cpu::gatedGradBlock(grad, routed[static_cast<size_t>(e)], first, n, down, e, gBlock, daBlock,
                        threads);
  });
}

}  // namespace shardc::runtime
