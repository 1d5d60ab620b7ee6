// linear_cross_entropy and its backward (runtime/cpu/LossHeadKernels.cpp)
// against the unfused ops they replace, run through their own kernels:
// linear then cross_entropy, and cross_entropy_backward, mul by the rows'
// scale, then linear's gradient GEMMs (matmul). The bytes must be equal,
// not close: compiler/FuseLinearCrossEntropy.cpp promises the same
// gradients with and without the fusion. The sizes cross the kernels'
// blocks: more rows than kLossHeadRows and more vocabulary columns than
// kLossHeadColumns, with ignored targets, for float32, bfloat16, and a
// bfloat16 head whose loss casts the logits to float32 (a 16-bit weight
// gradient takes the column-blocked path).
#include "FamilyTestSupport.h"

#include "runtime/OpFamilies.h"
#include "runtime/RuntimeError.h"
#include "runtime/cpu/FamilyKernels.h"

#include <catch2/catch.hpp>

#include <vector>

using namespace shardc::runtime;
using namespace shardc::runtime::familytest;

namespace {

constexpr int kThreads = 2;

/// x [N, H], targets [N] (every 7th ignored), weight [V, H], scale [N, 1]
/// of the logits' dtype.
struct Head {
  TT x, targets, weight, scale;
  DType logits;
};

Head makeHead(DType dt, DType logits, int64_t N, int64_t H, int64_t V) {
  Head h{random(dt, {N, H}, 1, -2, 2), zeros(DType::I64, {N}), random(dt, {V, H}, 2, -0.5, 0.5),
         random(logits, {N, 1}, 3, 0.001, 0.01), logits};
  for (int64_t n = 0; n < N; ++n) h.targets.set(n, n % 7 == 3 ? -100 : (n * 7919) % V);
  return h;
}

LossHeadParams paramsOf(const Head &h) {
  LossHeadParams p;
  if (h.logits != h.x.dtype) p.logitsDtype = h.logits;
  return p;
}

std::vector<std::byte> workFor(LossHeadKind kind, LossHeadOperand wrt, const Head &h) {
  return std::vector<std::byte>(static_cast<size_t>(linearCrossEntropyWorkBytes(
      kind, wrt, h.x.shape[0], h.weight.shape[0], h.x.shape[1], h.x.dtype)));
}

/// `t` cast to `dtype` (the cast op's kernel), or `t` itself.
TT castTo(const TT &t, DType dtype) {
  if (t.dtype == dtype) return t;
  TT out = zeros(dtype, t.shape);
  castKernel(t.k(), out.k(), kThreads);
  return out;
}

/// The unfused graph's logits: linear, then the cast to the loss's dtype.
TT unfusedLogits(const Head &h) {
  TT logits = zeros(h.x.dtype, {h.x.shape[0], h.weight.shape[0]});
  linearKernel(h.x.k(), h.weight.k(), nullptr, logits.k(), kThreads);
  return castTo(logits, h.logits);
}

/// The unfused graph's logits gradient: cross_entropy_backward, mul, and
/// the cast back to x's dtype.
TT unfusedLogitsGrad(const Head &h) {
  TT logits = unfusedLogits(h);
  TT grad = zeros(h.logits, logits.shape);
  IndexParams ip;
  crossEntropyBackwardKernel(ip, logits.k(), h.targets.k(), grad.k(), kThreads);
  TT scaled = zeros(h.logits, logits.shape);
  binaryKernel(BinaryOp::Mul, grad.k(), h.scale.k(), scaled.k(), kThreads);
  return castTo(scaled, h.x.dtype);
}

/// float32; bfloat16; a bfloat16 model whose loss casts its logits to
/// float32 (Hugging Face's logits.float()).
const std::pair<DType, DType> kDtypes[] = {
    {DType::F32, DType::F32}, {DType::BF16, DType::BF16}, {DType::BF16, DType::F32}};

}  // namespace

TEST_CASE("linear_cross_entropy: the bytes of linear then cross_entropy", "[losshead]") {
  for (auto [dt, logitsDtype] : kDtypes) {
    INFO(shardc::plan::dtypeName(dt) << " logits " << shardc::plan::dtypeName(logitsDtype));
    Head h = makeHead(dt, logitsDtype, 300, 24, 1100);
    TT logits = unfusedLogits(h), want = zeros(logitsDtype, {}), got = zeros(logitsDtype, {});
    crossEntropyKernel(logits.k(), h.targets.k(), -100, want.k());
    std::vector<std::byte> work = workFor(LossHeadKind::Forward, LossHeadOperand::Input, h);
    linearCrossEntropyKernel(paramsOf(h), h.x.k(), h.targets.k(), h.weight.k(), nullptr, got.k(),
                             work.data(), kThreads);
    CHECK(got.bytes == want.bytes);
  }
}

TEST_CASE("linear_cross_entropy_backward: the bytes of the unfused gradients", "[losshead]") {
  // (float16 has no mul kernel, so no unfused gradient to compare with.)
  for (auto [dt, logitsDtype] : kDtypes) {
    INFO(shardc::plan::dtypeName(dt) << " logits " << shardc::plan::dtypeName(logitsDtype));
    const int64_t N = 300, H = 24, V = 1100;
    Head h = makeHead(dt, logitsDtype, N, H, V);
    TT g = unfusedLogitsGrad(h);
    LossHeadParams p = paramsOf(h);
    const KTensor scale = h.scale.k();
    {  // input: dlogits @ weight
      TT want = zeros(dt, {N, H}), got = zeros(dt, {N, H});
      matmulKernel(g.k(), h.weight.k(), want.k(), {}, kThreads);
      p.wrt = LossHeadOperand::Input;
      std::vector<std::byte> work = workFor(LossHeadKind::Backward, p.wrt, h);
      linearCrossEntropyKernel(p, h.x.k(), h.targets.k(), h.weight.k(), &scale, got.k(),
                               work.data(), kThreads);
      CHECK(got.bytes == want.bytes);
    }
    {  // weight: dlogits^T @ x
      TT want = zeros(dt, {V, H}), got = zeros(dt, {V, H});
      matmulKernel(g.k(), h.x.k(), want.k(), {true, false}, kThreads);
      p.wrt = LossHeadOperand::Weight;
      std::vector<std::byte> work = workFor(LossHeadKind::Backward, p.wrt, h);
      linearCrossEntropyKernel(p, h.x.k(), h.targets.k(), h.weight.k(), &scale, got.k(),
                               work.data(), kThreads);
      CHECK(got.bytes == want.bytes);
    }
  }
}

TEST_CASE("linear_cross_entropy: a target out of range names its row", "[losshead]") {
  Head h = makeHead(DType::F32, DType::F32, 5, 4, 6);
  h.targets.set(3, 6);
  TT loss = zeros(DType::F32, {});
  std::vector<std::byte> work = workFor(LossHeadKind::Forward, LossHeadOperand::Input, h);
  CHECK_THROWS_WITH(linearCrossEntropyKernel({}, h.x.k(), h.targets.k(), h.weight.k(), nullptr,
                                             loss.k(), work.data(), kThreads),
                    Catch::Contains("linear_cross_entropy: target 6 of row 3 is out of range "
                                    "for 6 classes"));
}

TEST_CASE("linear_cross_entropy: the workspace holds a block of rows, not [N, V]", "[losshead]") {
  // Llama 3's head over 4,096 tokens: a [4096, 128256] float32 logits
  // tensor is 2,101,346,304 bytes; the kernels hold 256 rows of it, plus,
  // for a bfloat16 weight's gradient, statistics and one block of columns.
  const DType bf16 = DType::BF16;
  CHECK(linearCrossEntropyWorkBytes(LossHeadKind::Forward, LossHeadOperand::Input, 4096, 128256,
                                    8192, bf16) == 256 * 128256 * 4);
  CHECK(linearCrossEntropyWorkBytes(LossHeadKind::Backward, LossHeadOperand::Input, 4096, 128256,
                                    8192, bf16) == 256 * 128256 * 4);
  CHECK(linearCrossEntropyWorkBytes(LossHeadKind::Backward, LossHeadOperand::Weight, 4096, 128256,
                                    8192, bf16) ==
        256 * 128256 * 4 + 4096 * 12 + 256 * 1024 * 4 + 1024 * 8192 * 4);
  CHECK(linearCrossEntropyWorkBytes(LossHeadKind::Backward, LossHeadOperand::Weight, 100, 50, 8,
                                    DType::F32) == 100 * 50 * 4);
}
