// What moe_experts' kernels share (runtime/cpu/MoeKernels.cpp, forward;
// MoeBackwardKernels.cpp, the gradient and the rows its ops share): the
// tokens grouped by expert, the gate's activation, and the blocks' GEMMs,
// each with one set of bits.
#pragma once

#include "runtime/ForwardChecks.h"
#include "runtime/OpFamilies.h"
#include "runtime/cpu/Gemm.h"
#include "runtime/cpu/KernelSupport.h"
#include "runtime/cpu/VectorMath.h"

#include <string>
#include <utility>
#include <vector>

namespace shardc::runtime::cpu {

/// Each expert's routed rows (token, slot), in token order. Indices are
/// data: an index outside [0, experts) fails naming it, before any work.
inline std::vector<std::vector<std::pair<int64_t, int64_t>>>
routeByExpert(const char *op, const KTensor &index, int64_t experts) {
  const int64_t T = index.shape[0], k = index.shape[1];
  const int64_t *ids = static_cast<const int64_t *>(index.data);
  std::vector<std::vector<std::pair<int64_t, int64_t>>> routed(static_cast<size_t>(experts));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t s = 0; s < k; ++s) {
      const int64_t e = ids[t * k + s];
      if (e < 0 || e >= experts)
        checks::fail(op, "expert index " + std::to_string(e) + " of token " + std::to_string(t) +
                             " (slot " + std::to_string(s) + ") is out of range for " +
                             std::to_string(experts) + " experts");
      routed[static_cast<size_t>(e)].push_back({t, s});
    }
  return routed;
}

/// out = act(gate) for one row of `inner` values (out may be gate).
inline void activateGate(GateActivation act, const float *gate, float *out, int64_t inner) {
  switch (act) {
  case GateActivation::Silu: vecApply(VecFn::Silu, gate, out, inner); return;
  case GateActivation::Gelu: vecApply(VecFn::GeluErf, gate, out, inner); return;
  case GateActivation::GeluTanh: vecApply(VecFn::GeluTanh, gate, out, inner); return;
  case GateActivation::Relu:
    for (int64_t i = 0; i < inner; ++i)
      out[i] = gate[i] > 0.0f || gate[i] != gate[i] ? gate[i] : 0.0f;
    return;
  }
}

/// act(gate) * up of one routed row's [gate; up] (2I values) into out (I
/// values; out may be the row itself: the gate half is overwritten), the
/// forward's hidden row with its bits.
inline void gatedProduct(GateActivation act, const float *gateUp, float *out, int64_t inner) {
  activateGate(act, gateUp, out, inner);
  const float *up = gateUp + inner;
  for (int64_t i = 0; i < inner; ++i) out[i] = out[i] * up[i];
}

/// Routed rows [first, first + n) of src [T, H] (tokens as `rows` name them)
/// gathered into srcBlock [n, H] (float), times expert e's matrix of
/// `weight`: [E, N, H] read transposed (transposed) or [E, H, N], into
/// outBlock [n, N]. Every kernel of the family computes a block's GEMM this
/// one way, so the bits agree.
inline void routedRowsTimes(const KTensor &src,
                            const std::vector<std::pair<int64_t, int64_t>> &rows, size_t first,
                            int64_t n, const KTensor &weight, int64_t e, bool transposed,
                            float *srcBlock, float *outBlock, int threads) {
  const int64_t H = src.shape[1], N = transposed ? weight.shape[1] : weight.shape[2];
  for (int64_t r = 0; r < n; ++r)
    loadFloats(src.dtype, src.data, rows[first + r].first * H, H, srcBlock + r * H);
  GemmArgs g{};
  g.M = n, g.N = N, g.K = H;
  g.A = {plan::DType::F32, srcBlock, 0, H};
  g.B = {weight.dtype, weight.data, e * N * H, transposed ? H : N};
  g.transB = transposed;
  g.C = outBlock, g.cDtype = plan::DType::F32, g.cOffset = 0, g.ldc = N;
  gemm(g, threads);
}

/// [gate; up] = x gate_up[e]^T for a block of expert e's routed rows: the
/// input rows into xBlock [n, H], the forward's first GEMM into hBlock
/// [n, 2I].
inline void gateUpBlock(const KTensor &x, const std::vector<std::pair<int64_t, int64_t>> &rows,
                        size_t first, int64_t n, const KTensor &gateUp, int64_t e, float *xBlock,
                        float *hBlock, int threads) {
  routedRowsTimes(x, rows, first, n, gateUp, e, true, xBlock, hBlock, threads);
}

/// da' = g down[e] for a block of expert e's routed rows, the gradient at
/// each row's act(gate) * up before the slot's weight: the output gradient
/// rows into gBlock [n, H], da' into daBlock [n, I].
inline void gatedGradBlock(const KTensor &grad,
                           const std::vector<std::pair<int64_t, int64_t>> &rows, size_t first,
                           int64_t n, const KTensor &down, int64_t e, float *gBlock, float *daBlock,
                           int threads) {
  routedRowsTimes(grad, rows, first, n, down, e, false, gBlock, daBlock, threads);
}

}  // namespace shardc::runtime::cpu
