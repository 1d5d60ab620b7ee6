// sdpa_backward (runtime/cpu/AttentionBackwardKernels.cpp) against the graph
// ops the attention gradient rule (compiler/AttentionGradients.cpp) emits
// for it, run through their own kernels: the scores' GEMM and scale, the
// causal mask, softmax, the probabilities' and scores' gradients, the
// GEMMs and, for grouped query heads, the sums over each key / value
// head's readers. The bytes must be equal: the rule switches to the
// blockwise op on long sequences and promises the same gradients. The
// sizes cross a block of kAttentionRows query rows.
#include "FamilyTestSupport.h"

#include "runtime/OpFamilies.h"
#include "runtime/cpu/FamilyKernels.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

using namespace shardc::runtime;
using namespace shardc::runtime::familytest;

namespace {

constexpr int kThreads = 2;

struct Case {
  DType dt;
  int64_t H, Hkv;
  bool causal;
  double scale;
};

/// x [B, Hkv, S, D] with each head repeated for its H / Hkv readers.
TT repeatHeads(const TT &x, int64_t H) {
  const int64_t B = x.shape[0], Hkv = x.shape[1], S = x.shape[2], D = x.shape[3];
  TT out = zeros(x.dtype, {B, H, S, D});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < S * D; ++i)
        out.set((b * H + h) * S * D + i, x.at((b * Hkv + h / (H / Hkv)) * S * D + i));
  return out;
}

TT binary(BinaryOp op, const TT &a, const TT &b, Shape shape) {
  TT out = zeros(a.dtype, std::move(shape));
  binaryKernel(op, a.k(), b.k(), out.k(), kThreads);
  return out;
}

TT matmul(const TT &a, const TT &b, Shape shape, MatmulLayout layout) {
  TT out = zeros(a.dtype, std::move(shape));
  matmulKernel(a.k(), b.k(), out.k(), layout, kThreads);
  return out;
}

TT scaled(const TT &x, double scale) {
  if (scale == 1.0) return x;
  return binary(BinaryOp::Mul, x, fromValues(x.dtype, {}, {scale}), x.shape);
}

/// The sum over each key / value head's readers: [B, H, S, D] -> [B, Hkv, S, D].
TT sumHeads(const TT &x, int64_t Hkv) {
  const int64_t B = x.shape[0], H = x.shape[1], S = x.shape[2], D = x.shape[3];
  if (H == Hkv) return x;
  TT grouped = x;
  grouped.shape = {B, Hkv, H / Hkv, S, D};
  TT out = zeros(x.dtype, {B, Hkv, 1, S, D});
  reduceKernel(ReduceKind::Sum, grouped.k(), {2}, 0, out.k(), kThreads);
  out.shape = {B, Hkv, S, D};
  return out;
}

/// The unfused gradients {dq, dk, dv}, op by op as the rule emits them.
std::vector<TT> unfused(const Case &c, const TT &q, const TT &k, const TT &v, const TT &g) {
  const int64_t B = q.shape[0], H = q.shape[1], T = q.shape[2], E = q.shape[3];
  const int64_t S = k.shape[2], Ev = v.shape[3];
  TT kx = repeatHeads(k, H), vx = repeatHeads(v, H);
  TT scores = scaled(matmul(q, kx, {B, H, T, S}, {false, true}), c.scale);
  if (c.causal)
    for (int64_t bh = 0; bh < B * H; ++bh)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = i + 1; j < S; ++j)
          scores.set((bh * T + i) * S + j, -std::numeric_limits<double>::infinity());
  TT probs = zeros(q.dtype, {B, H, T, S});
  softmaxKernel(scores.k(), 3, probs.k(), kThreads);
  TT dv = sumHeads(matmul(probs, g, {B, H, S, Ev}, {true, false}), k.shape[1]);
  TT dprobs = matmul(g, vx, {B, H, T, S}, {false, true});
  TT product = binary(BinaryOp::Mul, dprobs, probs, {B, H, T, S});
  TT rowSums = zeros(q.dtype, {B, H, T, 1});
  reduceKernel(ReduceKind::Sum, product.k(), {3}, 0, rowSums.k(), kThreads);
  TT dscores = binary(BinaryOp::Mul, probs, binary(BinaryOp::Sub, dprobs, rowSums, {B, H, T, S}),
                      {B, H, T, S});
  TT dq = scaled(matmul(dscores, kx, {B, H, T, E}, {}), c.scale);
  TT dk = sumHeads(scaled(matmul(dscores, q, {B, H, S, E}, {true, false}), c.scale), k.shape[1]);
  return {dq, dk, dv};
}

}  // namespace

TEST_CASE("sdpa_backward: the bytes of the attention gradient rule's ops", "[attention-grad]") {
  const Case cases[] = {{DType::F32, 4, 2, true, 1 / std::sqrt(8.0)},
                        {DType::BF16, 4, 2, false, 1 / std::sqrt(8.0)},
                        {DType::F32, 2, 2, false, 1.0},
                        {DType::BF16, 2, 1, true, 0.3}};
  for (const Case &c : cases) {
    INFO(shardc::plan::dtypeName(c.dt)
         << " H " << c.H << " Hkv " << c.Hkv << " causal " << c.causal << " scale " << c.scale);
    const int64_t B = 2, T = 300, S = 300, E = 8, Ev = 6;
    const TT q = random(c.dt, {B, c.H, T, E}, 1), k = random(c.dt, {B, c.Hkv, S, E}, 2),
             v = random(c.dt, {B, c.Hkv, S, Ev}, 3), g = random(c.dt, {B, c.H, T, Ev}, 4);
    const std::vector<TT> want = unfused(c, q, k, v, g);
    const AttentionOperand operands[] = {AttentionOperand::Q, AttentionOperand::K,
                                         AttentionOperand::V};
    for (int i = 0; i < 3; ++i) {
      INFO("wrt "
           << "qkv"[i]);
      AttentionGradParams p{operands[i], c.causal, c.scale};
      TT got = zeros(c.dt, want[i].shape);
      std::vector<std::byte> work(static_cast<size_t>(
          sdpaBackwardWorkBytes(p.wrt, c.H, c.Hkv, T, S, std::max(E, Ev), c.dt)));
      sdpaBackwardKernel(p, q.k(), k.k(), v.k(), g.k(), got.k(), work.data(), kThreads);
      CHECK(got.bytes == want[i].bytes);
    }
  }
}

TEST_CASE("sdpa_backward: the workspace holds a block of queries, not [B, H, T, S]",
          "[attention-grad]") {
  // Llama 3 70B's attention over 4,096 tokens: its [1, 64, 4096, 4096]
  // bfloat16 probabilities are 2 GiB; a block of 256 rows of one head is
  // 2 MiB (three of them, and the k / v accumulators and the 8 readers).
  const DType bf16 = DType::BF16;
  CHECK(sdpaBackwardWorkBytes(AttentionOperand::Q, 64, 8, 4096, 4096, 128, bf16) ==
        256 * (3 * 4096 + 1) * 2);
  CHECK(sdpaBackwardWorkBytes(AttentionOperand::K, 64, 8, 4096, 4096, 128, bf16) ==
        256 * (3 * 4096 + 1) * 2 + 4096 * 128 * 4 + 8 * 4096 * 128 * 2);
  CHECK(sdpaBackwardWorkBytes(AttentionOperand::V, 8, 8, 100, 50, 16, DType::F32) ==
        100 * (3 * 50 + 1) * 4 + 50 * 16 * 4);
}
