// CPU kernel of moe_experts (runtime/OpFamilies.h): a mixture of experts'
// experts with tokens grouped by expert.
//
// Why grouped: each expert is a gated MLP with its own weights, and a token
// uses k of E experts. Gathering every token's k weight matrices (what a
// static graph of ordinary ops must do) costs k full expert matrices per
// token; here each expert's routed rows are packed into one block and run
// as two GEMMs, so an expert's weights are read once per block of rows and
// the work is the routed rows' only (k/E of a dense MLP over all experts).
//
// Bits: a routed row's gate/up and down rows are GEMM rows (runtime/cpu/
// Gemm.h: they do not depend on which rows share the block), the gate is
// elementwise, and token t's sum runs over its experts in ascending order:
// y[t] = ((0 + w_a * down_a) + w_b * down_b) ..., each product and sum
// rounded in float (the file is compiled without contraction), as Hugging
// Face's looping forward adds them (index_add_ per expert, in expert order).
// So a token's row depends only on its own input and routing: the same in
// any batch, micro-batch or thread count.
#include "runtime/cpu/FamilyKernels.h"

#include "runtime/ForwardChecks.h"
#include "runtime/cpu/Gemm.h"
#include "runtime/cpu/KernelSupport.h"
#include "runtime/cpu/MoeSupport.h"
#include "runtime/cpu/VectorMath.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace shardc::runtime {
using plan::DType;

void moeExpertsKernel(const MoeParams &p, const KTensor &x, const KTensor &index,
                      const KTensor &weights, const KTensor &gateUp, const KTensor &down,
                      const KTensor &y, std::byte *workspace, int threads) {
  checks::moeExperts(x, index, weights, gateUp, down, y);
  const int64_t T = x.shape[0], H = x.shape[1], k = index.shape[1];
  const int64_t E = gateUp.shape[0], I = gateUp.shape[1] / 2;

  // Indices are data: checked before any work, then grouped by expert in
  // token order (the order of a block's rows does not change their bits).
  const auto routed = cpu::routeByExpert("moe_experts", index, E);

  // Working memory (moeExpertsWorkBytes): a block's input rows [R, H], its
  // gate/up rows [R, 2I], its output rows [R, H]; then y's float
  // accumulator unless y is float32 (then y itself).
  const int64_t R = std::min(kMoeBlockRows, T * k);
  float *xBlock = reinterpret_cast<float *>(workspace);
  float *hBlock = xBlock + R * H;
  float *yBlock = hBlock + R * 2 * I;
  float *acc = y.dtype == DType::F32 ? static_cast<float *>(y.data) : yBlock + R * H;
  std::fill(acc, acc + T * H, 0.0f);
  std::vector<float> w(static_cast<size_t>(T * k));
  cpu::loadFloats(weights.dtype, weights.data, 0, T * k, w.data());

  for (int64_t e = 0; e < E; ++e) {
    const auto &rows = routed[static_cast<size_t>(e)];
    for (size_t first = 0; first < rows.size(); first += static_cast<size_t>(R)) {
      const int64_t n = std::min<int64_t>(R, static_cast<int64_t>(rows.size() - first));
      // [gate; up] = x gateUp[e]^T: 2I rows of H.
      cpu::gateUpBlock(x, rows, first, n, gateUp, e, xBlock, hBlock, threads);
      for (int64_t r = 0; r < n; ++r)
        cpu::gatedProduct(p.activation, hBlock + r * 2 * I, hBlock + r * 2 * I, I);
      // y = gated down[e]^T: H rows of I, reading the gate half of each row.
      cpu::GemmArgs dn{};
      dn.M = n, dn.N = H, dn.K = I;
      dn.A = {DType::F32, hBlock, 0, 2 * I};
      dn.B = {down.dtype, down.data, e * H * I, I};
      dn.transB = true;
      dn.C = yBlock, dn.cDtype = DType::F32, dn.cOffset = 0, dn.ldc = H;
      cpu::gemm(dn, threads);
      for (int64_t r = 0; r < n; ++r) {
        const auto [t, s] = rows[first + r];
        const float weight = w[static_cast<size_t>(t * k + s)];
        float *dst = acc + t * H;
        const float *src = yBlock + r * H;
        for (int64_t j = 0; j < H; ++j) {
          const float product = src[j] * weight;
          dst[j] = dst[j] + product;
        }
      }
    }
  }
  if (y.dtype != DType::F32) cpu::storeFloats(y.dtype, acc, T * H, y.data, 0);
}

}  // namespace shardc::runtime
