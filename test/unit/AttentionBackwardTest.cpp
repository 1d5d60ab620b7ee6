// sdpa_backward (runtime/cpu/AttentionBackwardKernels.cpp) against the graph
// ops the attention gradient rule (compiler/AttentionGradients.cpp) emits
// for it, run through their own kernels: the scores' GEMM and scale, the
// causal mask, softmax, the probabilities' and scores' gradients, the
// GEMMs and, for grouped query heads, the sums over each key / value
// head's readers; with a mask, its add and the zeroing of a query whose
// keys are all masked. The bytes must be equal: the rule switches to the
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

/// The masks a case adds to the scores.
enum class Mask {
  None,
  Padding,  // [B, 1, 1, S]: batch 1's last 50 keys -inf (a padded batch)
  Bias,     // [B, H, T, S] values, query 7 of (0, 0) with every key -inf
  Rows,     // [1, 1, T, S] values shared by every batch and head
};

struct Case {
  DType dt;
  int64_t H, Hkv;
  bool causal;
  double scale;
  Mask mask = Mask::None;
};

TT makeMask(const Case &c, int64_t B, int64_t T, int64_t S) {
  const double minusInf = -std::numeric_limits<double>::infinity();
  switch (c.mask) {
  case Mask::None: break;
  case Mask::Padding: {
    TT m = zeros(c.dt, {B, 1, 1, S});
    for (int64_t j = S - 50; j < S; ++j) m.set(S + j, minusInf);
    return m;
  }
  case Mask::Bias: {
    TT m = random(c.dt, {B, c.H, T, S}, 5);
    for (int64_t j = 0; j < S; ++j) m.set(7 * S + j, minusInf);
    return m;
  }
  case Mask::Rows: return random(c.dt, {1, 1, T, S}, 6);
  }
  return zeros(c.dt, {0});
}

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
std::vector<TT> unfused(const Case &c, const TT &q, const TT &k, const TT &v, const TT &g,
                        const TT *mask) {
  const int64_t B = q.shape[0], H = q.shape[1], T = q.shape[2], E = q.shape[3];
  const int64_t S = k.shape[2], Ev = v.shape[3];
  TT kx = repeatHeads(k, H), vx = repeatHeads(v, H);
  TT scores = scaled(matmul(q, kx, {B, H, T, S}, {false, true}), c.scale);
  if (mask) scores = binary(BinaryOp::Add, scores, *mask, {B, H, T, S});
  if (c.causal)
    for (int64_t bh = 0; bh < B * H; ++bh)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = i + 1; j < S; ++j)
          scores.set((bh * T + i) * S + j, -std::numeric_limits<double>::infinity());
  TT probs = zeros(q.dtype, {B, H, T, S});
  softmaxKernel(scores.k(), 3, probs.k(), kThreads);
  if (mask) {  // where(amax - amax != amax - amax, 0, probs)
    TT tops = zeros(q.dtype, {B, H, T, 1});
    reduceKernel(ReduceKind::Amax, scores.k(), {3}, 0, tops.k(), kThreads);
    for (int64_t row = 0; row < B * H * T; ++row)
      if (const double top = tops.at(row); !(top - top == 0))
        for (int64_t j = 0; j < S; ++j) probs.set(row * S + j, 0.0);
  }
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
                        {DType::BF16, 2, 1, true, 0.3},
                        {DType::F32, 4, 2, false, 1 / std::sqrt(8.0), Mask::Padding},
                        {DType::BF16, 2, 1, true, 0.3, Mask::Padding},
                        {DType::F32, 2, 2, true, 1.0, Mask::Bias},
                        {DType::BF16, 4, 4, false, 0.5, Mask::Bias},
                        {DType::F32, 4, 1, false, 0.3, Mask::Rows}};
  for (const Case &c : cases) {
    INFO(shardc::plan::dtypeName(c.dt)
         << " H " << c.H << " Hkv " << c.Hkv << " causal " << c.causal << " scale " << c.scale
         << " mask " << static_cast<int>(c.mask));
    const int64_t B = 2, T = 300, S = 300, E = 8, Ev = 6;
    const TT q = random(c.dt, {B, c.H, T, E}, 1), k = random(c.dt, {B, c.Hkv, S, E}, 2),
             v = random(c.dt, {B, c.Hkv, S, Ev}, 3), g = random(c.dt, {B, c.H, T, Ev}, 4);
    const TT maskValues = makeMask(c, B, T, S);
    const TT *mask = c.mask == Mask::None ? nullptr : &maskValues;
    const std::vector<TT> want = unfused(c, q, k, v, g, mask);
    const AttentionOperand operands[] = {AttentionOperand::Q, AttentionOperand::K,
                                         AttentionOperand::V};
    for (int i = 0; i < 3; ++i) {
      INFO("wrt "
           << "qkv"[i]);
      AttentionGradParams p{operands[i], c.causal, c.scale};
      TT got = zeros(c.dt, want[i].shape);
      std::vector<std::byte> work(static_cast<size_t>(
          sdpaBackwardWorkBytes(p.wrt, c.H, c.Hkv, T, S, std::max(E, Ev), c.dt)));
      const KTensor maskTensor = mask ? mask->k() : KTensor{};
      sdpaBackwardKernel(p, q.k(), k.k(), v.k(), g.k(), mask ? &maskTensor : nullptr, got.k(),
                         work.data(), kThreads);
      CHECK(got.bytes == want[i].bytes);
      if (c.mask == Mask::Bias && i == 0) {  // the fully masked query gets no gradient
        bool zero = true;
        for (int64_t e = 0; e < E; ++e) zero = zero && got.at(7 * E + e) == 0.0;
        CHECK(zero);
      }
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

TEST_CASE("sdpa_backward: a mask that does not broadcast to the scores is refused",
          "[attention-grad]") {
  const DType f32 = DType::F32;
  const TT q = random(f32, {1, 2, 4, 8}, 1), k = random(f32, {1, 2, 5, 8}, 2),
           v = random(f32, {1, 2, 5, 8}, 3), g = random(f32, {1, 2, 4, 8}, 4),
           mask = zeros(f32, {1, 1, 4, 4});
  TT got = zeros(f32, {1, 2, 4, 8});
  std::vector<std::byte> work(
      static_cast<size_t>(sdpaBackwardWorkBytes(AttentionOperand::Q, 2, 2, 4, 5, 8, f32)));
  const KTensor m = mask.k();
  CHECK_THROWS_WITH(
      sdpaBackwardKernel({AttentionOperand::Q, false, 1.0}, q.k(), k.k(), v.k(), g.k(), &m, got.k(),
                         work.data(), kThreads),
      Catch::Contains("mask [1, 1, 4, 4] does not broadcast to the scores [1, 2, 4, 5]"));
}
