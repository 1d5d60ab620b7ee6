// CPU kernel of sdpa_backward (runtime/OpFamilies.h): attention's gradient
// with respect to q, k or v, a block of kAttentionRows query rows at a time,
// so that the [B, H, T, S] probabilities and their gradients the graph ops
// of the attention gradient rule make (compiler/AttentionGradients.cpp: 8.6
// GB each for Llama 3 70B's 64 heads over 4 x 4,096 tokens in bfloat16) are
// never held whole.
//
// Bits: those graph ops', each run here on a block of rows with its own
// kernel where it is row-wise (softmax, the row sums, mul, sub) and the
// GEMMs' rows otherwise (runtime/cpu/Gemm.h: a row's result does not depend
// on the rows sharing the call). A k or v gradient sums over the query rows:
// the blocks' GEMMs accumulate into a float [S, E] along k at multiples of
// 256 rows, one call's bits, then rounded once; grouped query heads' sums
// are the reduce kernel's, as the rule's `sum` over the readers.
// test/unit/AttentionBackwardTest.cpp checks the bytes against those ops.
#include "runtime/cpu/FamilyKernels.h"

#include "runtime/ForwardChecks.h"
#include "runtime/cpu/Gemm.h"
#include "runtime/cpu/KernelSupport.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

namespace shardc::runtime {
namespace {

using plan::DType;

/// The operands' dims: q [B, H, T, E], k [B, Hkv, S, E], v [B, Hkv, S, Ev].
struct Dims {
  int64_t B, H, Hkv, T, S, E, Ev;
  int64_t readers() const { return H / Hkv; }
};

/// One head's blocks and accumulator (the workspace's parts).
struct Work {
  std::byte *probs, *grad, *product, *rowSums;  // [rows, S] x 3 and [rows, 1], the dtype
  float *acc;                                   // [S, E] (k, v)
  std::byte *readers;                           // [readers, S, E] (k, v with Hkv < H)
};

/// The workspace as sdpaBackwardWorkBytes sizes it: k's and v's float
/// accumulator first (aligned), then the blocks, then the readers.
Work carve(std::byte *workspace, const Dims &d, DType dt, AttentionOperand wrt) {
  const int64_t item = plan::dtypeSize(dt), R = std::min(kAttentionRows, d.T);
  const bool accumulates = wrt != AttentionOperand::Q;
  Work w;
  w.acc = accumulates ? reinterpret_cast<float *>(workspace) : nullptr;
  w.probs = workspace + (accumulates ? d.S * std::max(d.E, d.Ev) * 4 : 0);
  w.grad = w.probs + R * d.S * item;
  w.product = w.grad + R * d.S * item;
  w.rowSums = w.product + R * d.S * item;
  w.readers = w.rowSums + R * item;
  return w;
}

/// a[i] = round(a[i] * factor), factor already rounded to the dtype: the
/// rule's `mul` by a 0-d constant (the softmax scale), on n values.
void scaleValues(DType dt, void *a, int64_t n, float factor, int threads) {
  const KTensor values{dt, {n}, a};
  float f = factor;
  uint16_t half = 0;
  void *scalar = &f;
  if (dt != DType::F32) {  // the constant as the graph stores it
    cpu::storeFloats(dt, &f, 1, &half, 0);
    scalar = &half;
  }
  binaryKernel(BinaryOp::Mul, values, KTensor{dt, {}, scalar}, values, threads);
}

/// out [rows, S] = a's rows [rows, K] times b's S rows [S, K] transposed
/// (a head's queries against a key / value head's keys), rounded to `dt`.
void rowsTimesKeys(DType dt, const void *a, int64_t aOffset, const void *b, int64_t bOffset,
                   int64_t rows, int64_t S, int64_t K, void *out, int threads) {
  cpu::gemm({rows,
             S,
             K,
             {dt, a, aOffset, K},
             {dt, b, bOffset, K},
             /*transB=*/true,
             nullptr,
             dt,
             0,
             out,
             dt,
             0,
             S},
            threads);
}

/// The rows [t0, t0 + rows) of head (b, h) of an additive mask that
/// broadcasts to the scores [B, H, T, S] (each dim 1 or the scores'): a
/// [rows or 1, S or 1] tensor, which the add kernel broadcasts as the
/// rule's `add` over the whole scores does.
KTensor maskRows(const KTensor &mask, int64_t b, int64_t h, int64_t t0, int64_t rows) {
  const Shape &m = mask.shape;
  const int64_t offset =
      ((m[0] > 1 ? b : 0) * m[1] + (m[1] > 1 ? h : 0)) * m[2] * m[3] + (m[2] > 1 ? t0 : 0) * m[3];
  return KTensor{mask.dtype,
                 {m[2] > 1 ? rows : 1, m[3]},
                 static_cast<std::byte *>(mask.data) + offset * plan::dtypeSize(mask.dtype)};
}

/// Block rows [t0, t0 + rows) of head (b, h): the probabilities into
/// w.probs, and unless only v's gradient is wanted, the scores' gradient
/// into w.grad.
void blockGradients(const AttentionGradParams &p, const Dims &d, const KTensor &q, const KTensor &k,
                    const KTensor &v, const KTensor &g, const KTensor *mask, int64_t b, int64_t h,
                    int64_t t0, int64_t rows, float scale, const Work &w, int threads) {
  const DType dt = q.dtype;
  const int64_t bh = b * d.H + h, bkv = b * d.Hkv + h / d.readers();
  // scores = q k^T (times the scale, plus the mask), -inf above the
  // diagonal when causal
  rowsTimesKeys(dt, q.data, (bh * d.T + t0) * d.E, k.data, bkv * d.S * d.E, rows, d.S, d.E, w.probs,
                threads);
  if (p.scale != 1.0) scaleValues(dt, w.probs, rows * d.S, scale, threads);
  const KTensor probs{dt, {rows, d.S}, w.probs};
  if (mask) binaryKernel(BinaryOp::Add, probs, maskRows(*mask, b, h, t0, rows), probs, threads);
  if (p.causal) {
    const float minusInf = -std::numeric_limits<float>::infinity();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = t0 + r + 1; j < d.S; ++j)
        cpu::storeFloats(dt, &minusInf, 1, w.probs, r * d.S + j);
  }
  // A masked query whose keys are all -inf attends to nothing: zeros, as
  // the forward kernel (torch's safe softmax), where softmax gives NaN. The
  // rule finds those rows by their amax, whose difference with itself is
  // not 0 (-inf, and so also +inf and NaN): so does this.
  const KTensor tops{dt, {rows, 1}, w.rowSums};
  if (mask) reduceKernel(ReduceKind::Amax, probs, {1}, 0, tops, threads);
  softmaxKernel(probs, 1, probs, threads);
  if (mask) {
    const float zero = 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      float top = 0;
      cpu::loadFloats(dt, w.rowSums, r, 1, &top);
      if (!(top - top == 0.0f))
        for (int64_t j = 0; j < d.S; ++j) cpu::storeFloats(dt, &zero, 1, w.probs, r * d.S + j);
    }
  }
  if (p.wrt == AttentionOperand::V) return;
  // dprobs = g v^T; dscores = probs (dprobs - rowsum(dprobs probs))
  const KTensor grad{dt, {rows, d.S}, w.grad}, product{dt, {rows, d.S}, w.product},
      rowSums{dt, {rows, 1}, w.rowSums};
  rowsTimesKeys(dt, g.data, (bh * d.T + t0) * d.Ev, v.data, bkv * d.S * d.Ev, rows, d.S, d.Ev,
                w.grad, threads);
  binaryKernel(BinaryOp::Mul, grad, probs, product, threads);
  reduceKernel(ReduceKind::Sum, product, {1}, 0, rowSums, threads);
  binaryKernel(BinaryOp::Sub, grad, rowSums, product, threads);
  binaryKernel(BinaryOp::Mul, probs, product, grad, threads);
}

/// q's gradient: each block's scores' gradient times k, times the scale.
void queryGrad(const AttentionGradParams &p, const Dims &d, const KTensor &q, const KTensor &k,
               const KTensor &v, const KTensor &g, const KTensor *mask, const KTensor &y,
               const Work &w, float scale, int threads) {
  const DType dt = q.dtype;
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h)
      for (int64_t t0 = 0; t0 < d.T; t0 += kAttentionRows) {
        const int64_t rows = std::min(kAttentionRows, d.T - t0);
        blockGradients(p, d, q, k, v, g, mask, b, h, t0, rows, scale, w, threads);
        const int64_t bh = b * d.H + h, bkv = b * d.Hkv + h / d.readers();
        cpu::gemm({rows,
                   d.E,
                   d.S,
                   {dt, w.grad, 0, d.S},
                   {dt, k.data, bkv * d.S * d.E, d.E},
                   /*transB=*/false,
                   nullptr,
                   dt,
                   0,
                   y.data,
                   dt,
                   (bh * d.T + t0) * d.E,
                   d.E},
                  threads);
        if (p.scale != 1.0)
          scaleValues(
              dt, static_cast<std::byte *>(y.data) + (bh * d.T + t0) * d.E * plan::dtypeSize(dt),
              rows * d.E, scale, threads);
      }
}

/// k's or v's gradient: per query head, the blocks' scores' (k) or
/// probabilities' (v) gradient^T times q (k) or g (v) summed in float over
/// the query rows and rounded once (k: then times the scale); a key / value
/// head read by several query heads sums theirs (the reduce kernel's sum).
void keyValueGrad(const AttentionGradParams &p, const Dims &d, const KTensor &q, const KTensor &k,
                  const KTensor &v, const KTensor &g, const KTensor *mask, const KTensor &y,
                  const Work &w, float scale, int threads) {
  const DType dt = q.dtype;
  const int64_t item = plan::dtypeSize(dt), G = d.readers();
  const bool key = p.wrt == AttentionOperand::K;
  const int64_t width = key ? d.E : d.Ev, headElems = d.S * width;
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t kv = 0; kv < d.Hkv; ++kv) {
      const int64_t bkv = b * d.Hkv + kv;
      for (int64_t r = 0; r < G; ++r) {
        const int64_t h = kv * G + r, bh = b * d.H + h;
        std::memset(w.acc, 0, static_cast<size_t>(headElems) * 4);
        for (int64_t t0 = 0; t0 < d.T; t0 += kAttentionRows) {
          const int64_t rows = std::min(kAttentionRows, d.T - t0);
          blockGradients(p, d, q, k, v, g, mask, b, h, t0, rows, scale, w, threads);
          cpu::GemmArgs a{d.S,
                          width,
                          rows,
                          {dt, key ? w.grad : w.probs, 0, d.S},
                          key ? cpu::GemmOperand{dt, q.data, (bh * d.T + t0) * d.E, d.E}
                              : cpu::GemmOperand{dt, g.data, (bh * d.T + t0) * d.Ev, d.Ev},
                          /*transB=*/false,
                          nullptr,
                          DType::F32,
                          0,
                          w.acc,
                          DType::F32,
                          0,
                          width};
          a.transA = true;
          a.accumulate = true;
          cpu::gemm(a, threads);
        }
        // One head's gradient: y's own slot, or its place among the readers.
        void *head = G == 1 ? static_cast<std::byte *>(y.data) + bkv * headElems * item
                            : w.readers + r * headElems * item;
        cpu::storeFloats(dt, w.acc, headElems, head, 0);
        if (key && p.scale != 1.0) scaleValues(dt, head, headElems, scale, threads);
      }
      if (G > 1)
        reduceKernel(
            ReduceKind::Sum, KTensor{dt, {G, d.S, width}, w.readers}, {0}, 0,
            KTensor{dt, {1, d.S, width}, static_cast<std::byte *>(y.data) + bkv * headElems * item},
            threads);
    }
}

}  // namespace

void sdpaBackwardKernel(const AttentionGradParams &p, const KTensor &q, const KTensor &k,
                        const KTensor &v, const KTensor &g, const KTensor *mask, const KTensor &y,
                        std::byte *workspace, int threads) {
  const Shape expected =
      sdpaBackwardShape(p.wrt, q.shape, k.shape, v.shape, g.shape, mask ? &mask->shape : nullptr);
  const DType dt = q.dtype;
  if (y.shape != expected || !checks::isFloatStorage(dt) || k.dtype != dt || v.dtype != dt ||
      g.dtype != dt || y.dtype != dt || (mask && mask->dtype != dt))
    checks::fail("sdpa_backward", "takes q, k, v, g, the mask and the result of one float dtype, "
                                  "the result " +
                                      shapeToString(expected));
  const Dims d{q.shape[0], q.shape[1], k.shape[1], q.shape[2], k.shape[2], q.shape[3], v.shape[3]};
  if (d.B * d.H * d.T == 0 || y.numel() == 0) return;
  const Work w = carve(workspace, d, dt, p.wrt);
  // The rule's 0-d constant: the scale rounded to the dtype.
  const float scale = cpu::roundedTo(dt, static_cast<float>(p.scale));
  if (p.wrt == AttentionOperand::Q) return queryGrad(p, d, q, k, v, g, mask, y, w, scale, threads);
  keyValueGrad(p, d, q, k, v, g, mask, y, w, scale, threads);
}

}  // namespace shardc::runtime
