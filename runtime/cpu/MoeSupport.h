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

/// A block of expert e's routed rows [first, first + n): their input rows
/// into xBlock [n, H] (float) and [gate; up] = x gate_up[e]^T into hBlock
/// [n, 2I], the forward's first GEMM (every kernel of the family computes
/// it this one way, so the bits agree).
inline void gateUpBlock(const KTensor &x, const std::vector<std::pair<int64_t, int64_t>> &rows,
                        size_t first, int64_t n, const KTensor &gateUp, int64_t e, float *xBlock,
                        float *hBlock, int threads) {
  const int64_t H = x.shape[1], I = gateUp.shape[1] / 2;
  for (int64_t r = 0; r < n; ++r)
    loadFloats(x.dtype, x.data, rows[first + r].first * H, H, xBlock + r * H);
  GemmArgs up{};
  up.M = n, up.N = 2 * I, up.K = H;
  up.A = {plan::DType::F32, xBlock, 0, H};
  up.B = {gateUp.dtype, gateUp.data, e * 2 * I * H, H};
  up.transB = true;
  up.C = hBlock, up.cDtype = plan::DType::F32, up.cOffset = 0, up.ldc = 2 * I;
  gemm(up, threads);
}

/// A block of expert e's routed rows [first, first + n): their output
/// gradient rows into gBlock [n, H] (float) and da' = g down[e] into daBlock
/// [n, I], the gradient at each row's act(gate) * up before the slot's
/// weight (every kernel of the family computes it this one way, so the
/// bits agree).
inline void gatedGradBlock(const KTensor &grad,
                           const std::vector<std::pair<int64_t, int64_t>> &rows, size_t first,
                           int64_t n, const KTensor &down, int64_t e, float *gBlock, float *daBlock,
                           int threads) {
  const int64_t H = grad.shape[1], I = down.shape[2];
  for (int64_t r = 0; r < n; ++r)
    loadFloats(grad.dtype, grad.data, rows[first + r].first * H, H, gBlock + r * H);
  GemmArgs da{};
  da.M = n, da.N = I, da.K = H;
  da.A = {plan::DType::F32, gBlock, 0, H};
  da.B = {down.dtype, down.data, e * H * I, I};
  da.transB = false;
  da.C = daBlock, da.cDtype = plan::DType::F32, da.cOffset = 0, da.ldc = I;
  gemm(da, threads);
}

}  // namespace shardc::runtime::cpu
