#include "runtime/ForwardKernels.h"
#include "runtime/RopeFrequencies.h"

#include "runtime/ForwardChecks.h"

#include "runtime/HalfFloat.h"
#include "runtime/RuntimeError.h"
#include "runtime/cpu/Gemm.h"
#include "runtime/cpu/KernelSupport.h"
#include "runtime/cpu/VectorMath.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <type_traits>

namespace shardc::runtime {
using plan::DType;

namespace {

// ------------------------------------------------------------------ helpers --

// Shape and dtype rules are the backends' shared ones (ForwardChecks.h).
using checks::fail;


// 16-bit storage conversion, the fixed-split task runner and OpenBLAS's
// single-threaded mode are shared with the family kernels.
using cpu::loadFloats;
using cpu::parallelTasks;
using cpu::singleThreadedBlas;
using cpu::storeFloats;

void checkBlasDims(const char *op, std::initializer_list<int64_t> dims) {
  for (int64_t d : dims)
    if (d > std::numeric_limits<int>::max())
      fail(op, "dimension " + std::to_string(d) + " exceeds the BLAS int range");
}

// ------------------------------------------------------ elementwise storage --

template <typename S, typename C, C (*Load)(S), S (*Store)(C)> struct Storage {
  using Stored = S;
  using Compute = C;
  static C load(S v) { return Load(v); }
  static S store(C v) { return Store(v); }
};
inline float idF(float v) { return v; }
inline double idD(double v) { return v; }
using F32Storage = Storage<float, float, idF, idF>;
using F64Storage = Storage<double, double, idD, idD>;
using BF16Storage = Storage<uint16_t, float, bfloat16BitsToFloat, floatToBFloat16Bits>;
using F16Storage = Storage<uint16_t, float, halfBitsToFloat, floatToHalfBits>;
// int64 (add, sub, mul): computed in uint64 so it wraps as torch's int64
// arithmetic does, without signed overflow.
inline uint64_t toU64(int64_t v) { return static_cast<uint64_t>(v); }
inline int64_t fromU64(uint64_t v) { return static_cast<int64_t>(v); }
using I64Storage = Storage<int64_t, uint64_t, toU64, fromU64>;

template <typename C> C applyBinary(BinaryOp op, C a, C b) {
  switch (op) {
  case BinaryOp::Add: return a + b;
  case BinaryOp::Sub: return a - b;
  case BinaryOp::Mul: return a * b;
  case BinaryOp::Div: return a / b;
  }
  return a;
}

template <typename St, BinaryOp Op>
void binaryTyped(const KTensor &aT, const KTensor &bT, const KTensor &outT, int threads) {
  using S = typename St::Stored;
  const S *a = static_cast<const S *>(aT.data);
  const S *b = static_cast<const S *>(bT.data);
  S *out = static_cast<S *>(outT.data);
  const Shape &outShape = outT.shape;
  const int64_t total = plan::numElements(outShape);
  if (total == 0) return;
  const int64_t aCount = aT.numel(), bCount = bT.numel();
  constexpr int64_t kChunk = 1 << 14;
  auto f = [](S x, S y) { return St::store(applyBinary(Op, St::load(x), St::load(y))); };
  if ((aCount == total || aCount == 1) && (bCount == total || bCount == 1)) {
    const int64_t as = aCount == total ? 1 : 0, bs = bCount == total ? 1 : 0;
    parallelTasks((total + kChunk - 1) / kChunk, threads, total, [&](int64_t task) {
      const int64_t begin = task * kChunk, end = std::min(total, begin + kChunk);
      if (as && bs)
        for (int64_t i = begin; i < end; ++i) out[i] = f(a[i], b[i]);
      else if (as)
        for (int64_t i = begin; i < end; ++i) out[i] = f(a[i], b[0]);
      else
        for (int64_t i = begin; i < end; ++i) out[i] = f(a[i * as], b[i * bs]);
    });
    return;
  }
  // General case: strides with 0 on broadcast dims; rows of the inner dim.
  const size_t rank = outShape.size();
  const std::vector<int64_t> as = broadcastStrides(aT.shape, rank),
                             bs = broadcastStrides(bT.shape, rank);
  const int64_t inner = outShape[rank - 1], ai = as[rank - 1], bi = bs[rank - 1];
  const int64_t rows = total / inner;
  const int64_t rowsPerTask = std::max<int64_t>(1, kChunk / inner);
  parallelTasks((rows + rowsPerTask - 1) / rowsPerTask, threads, total, [&](int64_t task) {
    const int64_t r0 = task * rowsPerTask, r1 = std::min(rows, r0 + rowsPerTask);
    std::vector<int64_t> index(rank, 0);
    int64_t aOffset = 0, bOffset = 0, rest = r0;
    for (size_t d = rank - 1; d-- > 0;) {
      index[d] = rest % outShape[d];
      rest /= outShape[d];
      aOffset += index[d] * as[d];
      bOffset += index[d] * bs[d];
    }
    for (int64_t r = r0; r < r1; ++r) {
      S *o = out + r * inner;
      // The inner dim is contiguous or broadcast on each side: loops the
      // compiler vectorizes (a bias add, a per-row scale), else the general one.
      const S *ar = a + aOffset, *br = b + bOffset;
      if (ai == 1 && bi == 1)
        for (int64_t j = 0; j < inner; ++j) o[j] = f(ar[j], br[j]);
      else if (ai == 1 && bi == 0)
        for (int64_t j = 0; j < inner; ++j) o[j] = f(ar[j], br[0]);
      else if (ai == 0 && bi == 1)
        for (int64_t j = 0; j < inner; ++j) o[j] = f(ar[0], br[j]);
      else
        for (int64_t j = 0; j < inner; ++j) o[j] = f(ar[j * ai], br[j * bi]);
      for (size_t d = rank - 1; d-- > 0;) {
        aOffset += as[d];
        bOffset += bs[d];
        if (++index[d] < outShape[d]) break;
        aOffset -= as[d] * outShape[d];
        bOffset -= bs[d] * outShape[d];
        index[d] = 0;
      }
    }
  });
}

template <typename St>
void binaryDispatchOp(BinaryOp op, const KTensor &a, const KTensor &b, const KTensor &out,
                      int threads) {
  switch (op) {
  case BinaryOp::Add: return binaryTyped<St, BinaryOp::Add>(a, b, out, threads);
  case BinaryOp::Sub: return binaryTyped<St, BinaryOp::Sub>(a, b, out, threads);
  case BinaryOp::Mul: return binaryTyped<St, BinaryOp::Mul>(a, b, out, threads);
  case BinaryOp::Div: return binaryTyped<St, BinaryOp::Div>(a, b, out, threads);
  }
}

template <typename St>
void activationTyped(Activation kind, const KTensor &xT, const KTensor &yT, int threads) {
  using S = typename St::Stored;
  const S *x = static_cast<const S *>(xT.data);
  S *y = static_cast<S *>(yT.data);
  const int64_t total = xT.numel();
  constexpr int64_t kChunk = 1 << 14;
  if (kind == Activation::Relu) {
    parallelTasks((total + kChunk - 1) / kChunk, threads, total * 8, [&](int64_t task) {
      const int64_t begin = task * kChunk, end = std::min(total, begin + kChunk);
      for (int64_t i = begin; i < end; ++i) {
        const float v = St::load(x[i]);
        y[i] = St::store(v > 0.0f || std::isnan(v) ? v : 0.0f);
      }
    });
    return;
  }
  // The transcendental ones go through the vectorized formulas
  // (runtime/cpu/VectorMath.h); 16-bit storage through a float block.
  const cpu::VecFn fn = kind == Activation::GeluErf    ? cpu::VecFn::GeluErf
                        : kind == Activation::GeluTanh ? cpu::VecFn::GeluTanh
                                                       : cpu::VecFn::Silu;
  parallelTasks((total + kChunk - 1) / kChunk, threads, total * 8, [&](int64_t task) {
    const int64_t begin = task * kChunk, end = std::min(total, begin + kChunk);
    if constexpr (std::is_same_v<S, float>) {
      cpu::vecApply(fn, x + begin, y + begin, end - begin);
    } else {
      constexpr int64_t kBlock = 512;
      float buf[kBlock];
      for (int64_t b = begin; b < end; b += kBlock) {
        const int64_t n = std::min(kBlock, end - b);
        loadFloats(xT.dtype, xT.data, b, n, buf);
        cpu::vecApply(fn, buf, buf, n);
        storeFloats(yT.dtype, buf, n, yT.data, b);
      }
    }
  });
}

}  // namespace

// ---------------------------------------------------------------- embedding --

void embeddingKernel(const KTensor &weight, const KTensor &ids, const KTensor &out) {
  const char *op = "embedding";
  checks::embedding(weight, ids, out);
  const int64_t V = weight.shape[0];
  const int64_t rowBytes = weight.shape[1] * plan::dtypeSize(weight.dtype);
  const int64_t *id = static_cast<const int64_t *>(ids.data);
  const int64_t n = ids.numel();
  for (int64_t i = 0; i < n; ++i)
    if (id[i] < 0 || id[i] >= V)
      fail(op, "id " + std::to_string(id[i]) + " at flat index " + std::to_string(i) +
                   " is out of range for a vocabulary of V = " + std::to_string(V));
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(static_cast<std::byte *>(out.data) + i * rowBytes,
                static_cast<const std::byte *>(weight.data) + id[i] * rowBytes,
                static_cast<size_t>(rowBytes));
}

// ------------------------------------------------------------------- linear --

void linearKernel(const KTensor &x, const KTensor &w, const KTensor *b, const KTensor &y,
                  int threads) {
  // Plain copies: clang 14 (the fuzz build) cannot capture structured bindings.
  const auto [rowsDim, nDim, kDim] = checks::linear(x, w, b, y);
  const int64_t rows = rowsDim, N = nDim, K = kDim;
  // Every row goes through the same fma chain whatever the row count
  // (cpu/Gemm.h), so a micro-batch's rows match the global batch's bits.
  cpu::gemm({rows, N, K, {x.dtype, x.data, 0, K}, {w.dtype, w.data, 0, K}, /*transB=*/true,
             b ? b->data : nullptr, x.dtype, 0, y.data, y.dtype, 0, N},
            threads);
}

// ------------------------------------------------------------------- matmul --

void matmulKernel(const KTensor &a, const KTensor &b, const KTensor &c, MatmulLayout layout,
                  int threads) {
  const checks::MatmulDims dims = checks::matmul(a, b, c, layout);
  const Shape &aBatch = dims.aBatch, &bBatch = dims.bBatch;
  const Shape *batch = &dims.batch;
  const int64_t M = dims.M, N = dims.N, K = dims.K;
  // Batch offsets (in matrices) of a and b for each output batch index.
  const size_t rank = batch->size();
  const std::vector<int64_t> as = broadcastStrides(aBatch, rank),
                             bs = broadcastStrides(bBatch, rank);
  const int64_t batches = plan::numElements(*batch);
  // A stored transposed is read in place (K rows of M); b transposed is
  // gemm's transB (N rows of K, a linear's weight).
  const int64_t lda = layout.transposeA ? M : K, ldb = layout.transposeB ? K : N;
  // One B for every batch (a 2-D weight) and an unbroadcast a: the batches
  // are just more rows of one GEMM, B packed once rather than per batch.
  // Same bits either way: a row's result does not depend on its call. (Not
  // for a transposed a: its batches' rows are not one matrix.)
  if (std::all_of(bs.begin(), bs.end(), [](int64_t s) { return s == 0; }) &&
      plan::numElements(aBatch) == batches && !layout.transposeA) {
    cpu::gemm({batches * M,
               N,
               K,
               {a.dtype, a.data, 0, K},
               {b.dtype, b.data, 0, ldb},
               layout.transposeB,
               nullptr,
               a.dtype,
               0,
               c.data,
               c.dtype,
               0,
               N},
              threads);
    return;
  }
  cpu::gemmBatched(batches, threads, [&](int64_t bi) {
    int64_t aMat = 0, bMat = 0, rest = bi;
    for (size_t d = rank; d-- > 0;) {
      const int64_t i = rest % (*batch)[d];
      rest /= (*batch)[d];
      aMat += i * as[d];
      bMat += i * bs[d];
    }
    cpu::GemmArgs g{M,
                    N,
                    K,
                    {a.dtype, a.data, aMat * M * K, lda},
                    {b.dtype, b.data, bMat * K * N, ldb},
                    layout.transposeB,
                    nullptr,
                    a.dtype,
                    0,
                    c.data,
                    c.dtype,
                    bi * M * N,
                    N};
    g.transA = layout.transposeA;
    return g;
  });
}

// ------------------------------------------------------- binary elementwise --

const char *binaryOpName(BinaryOp op) {
  switch (op) {
  case BinaryOp::Add: return "add";
  case BinaryOp::Sub: return "sub";
  case BinaryOp::Mul: return "mul";
  case BinaryOp::Div: return "div";
  }
  return "?";
}

void binaryKernel(BinaryOp op, const KTensor &a, const KTensor &b, const KTensor &out,
                  int threads) {
  checks::binary(op, a, b, out);
  switch (out.dtype) {
  case DType::F32: return binaryDispatchOp<F32Storage>(op, a, b, out, threads);
  case DType::F64: return binaryDispatchOp<F64Storage>(op, a, b, out, threads);
  case DType::I64: return binaryDispatchOp<I64Storage>(op, a, b, out, threads);
  default: return binaryDispatchOp<BF16Storage>(op, a, b, out, threads);
  }
}

// -------------------------------------------------------------- activations --

void activationKernel(Activation kind, const KTensor &x, const KTensor &y, int threads) {
  checks::activation(x, y);
  switch (x.dtype) {
  case DType::F32: return activationTyped<F32Storage>(kind, x, y, threads);
  case DType::BF16: return activationTyped<BF16Storage>(kind, x, y, threads);
  case DType::F16: return activationTyped<F16Storage>(kind, x, y, threads);
  default: return;
  }
}

// ------------------------------------------------------------- normalizing --

void layerNormKernel(const KTensor &x, const KTensor *weight, const KTensor *bias, double eps,
                     const KTensor &y, int threads) {
  const auto [rowsDim, dDim] = checks::norm("layer_norm", x, weight, bias, y);
  const int64_t rows = rowsDim, D = dDim;  // plain copies, as in linearKernel
  parallelTasks(rows, threads, rows * D, [&](int64_t r) {
    thread_local std::vector<float> buf;
    buf.resize(static_cast<size_t>(3 * D));
    float *v = buf.data(), *w = v + D, *bb = w + D;
    loadFloats(x.dtype, x.data, r * D, D, v);
    if (weight) loadFloats(x.dtype, weight->data, 0, D, w);
    if (bias) loadFloats(x.dtype, bias->data, 0, D, bb);
    // Eight-lane double sums (KernelSupport.h): they vectorize, and the order
    // depends only on D.
    const double mean = cpu::sumLanes(v, D) / static_cast<double>(D);
    const double sq = cpu::sumSquaredDeviationsLanes(v, D, mean);
    const double rstd = 1.0 / std::sqrt(sq / static_cast<double>(D) + eps);
    for (int64_t i = 0; i < D; ++i) {
      float n = static_cast<float>((v[i] - mean) * rstd);
      if (weight) n *= w[i];
      if (bias) n += bb[i];
      v[i] = n;
    }
    storeFloats(y.dtype, v, D, y.data, r * D);
  });
}

void rmsNormKernel(const KTensor &x, const KTensor *weight, double eps, const KTensor &y,
                   int threads) {
  const auto [rowsDim, dDim] = checks::norm("rms_norm", x, weight, nullptr, y);
  const int64_t rows = rowsDim, D = dDim;  // plain copies, as in linearKernel
  parallelTasks(rows, threads, rows * D, [&](int64_t r) {
    thread_local std::vector<float> buf;
    buf.resize(static_cast<size_t>(2 * D));
    float *v = buf.data(), *w = v + D;
    loadFloats(x.dtype, x.data, r * D, D, v);
    if (weight) loadFloats(x.dtype, weight->data, 0, D, w);
    const double sq = cpu::sumSquaredDeviationsLanes(v, D, 0.0);  // sum of squares, 8 lanes
    const float rstd = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(D) + eps));
    for (int64_t i = 0; i < D; ++i) {
      float n = v[i] * rstd;
      if (weight) n *= w[i];
      v[i] = n;
    }
    storeFloats(y.dtype, v, D, y.data, r * D);
  });
}

// ------------------------------------------------------------------ softmax --

void softmaxKernel(const KTensor &x, int64_t dim, const KTensor &y, int threads) {
  checks::softmax(x, dim, y);
  const int64_t L = x.shape[dim];
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(dim) + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  if (L == 0 || x.numel() == 0) return;
  const int64_t outer = x.numel() / (L * inner);
  parallelTasks(outer * inner, threads, x.numel() * 4, [&](int64_t line) {
    thread_local std::vector<float> buf;
    buf.resize(static_cast<size_t>(L));
    float *v = buf.data();
    const int64_t o = line / inner, in = line % inner, base = o * L * inner + in;
    if (inner == 1) loadFloats(x.dtype, x.data, base, L, v);
    else
      for (int64_t i = 0; i < L; ++i) loadFloats(x.dtype, x.data, base + i * inner, 1, v + i);
    cpu::softmaxRow(v, L);
    if (inner == 1) storeFloats(y.dtype, v, L, y.data, base);
    else
      for (int64_t i = 0; i < L; ++i) storeFloats(y.dtype, v + i, 1, y.data, base + i * inner);
  });
}

// --------------------------------------------------------------------- sdpa --

void sdpaKernel(const KTensor &q, const KTensor &k, const KTensor &v, const KTensor *mask,
                const KTensor &o, bool causal, double scale, int threads) {
  const char *op = "sdpa";
  const checks::SdpaDims dims = checks::sdpa(q, k, v, mask, o);
  const int64_t B = dims.B, H = dims.H, T = dims.T, S = dims.S, D = dims.D, Dv = dims.Dv;
  // Query heads per key / value head (grouped-query attention; 1 without).
  const int64_t group = dims.Hkv ? H / dims.Hkv : 1;
  const int64_t *maskStride = dims.maskStride;
  checkBlasDims(op, {T, S, D, Dv});
  singleThreadedBlas();
  // Query rows per block: one block of scores (rows x S floats) stays <= 1 MiB.
  const int64_t rowsPerBlock =
      std::clamp<int64_t>((int64_t(1) << 18) / std::max<int64_t>(S, 1), 1, 64);
  const int64_t blocks = (T + rowsPerBlock - 1) / rowsPerBlock;
  const bool direct = q.dtype == DType::F32;
  const float alpha = static_cast<float>(scale);
  parallelTasks(B * H * blocks, threads, B * H * T * S * (D + Dv) / 8, [&](int64_t task) {
    thread_local std::vector<float> scratch, maskRow;
    const int64_t bh = task / blocks, t0 = (task % blocks) * rowsPerBlock;
    const int64_t tb = std::min(rowsPerBlock, T - t0);
    const int64_t sEnd = causal ? std::min(S, t0 + tb) : S;  // keys any row may see
    const int64_t kvHead = bh / group;  // (b * H + h) / group = b * Hkv + h / group
    const int64_t qOff = (bh * T + t0) * D, kOff = kvHead * S * D, vOff = kvHead * S * Dv;
    const int64_t oOff = (bh * T + t0) * Dv;
    constexpr int64_t kKeys = 256;  // keys per converted k/v block (16-bit path)
    scratch.resize(static_cast<size_t>(tb * sEnd + (direct ? 0 : tb * D + kKeys * std::max(D, Dv) + tb * Dv)));
    float *scores = scratch.data();
    // scores = scale * q_block k^T
    if (sEnd > 0 && D > 0) {
      if (direct) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(tb),
                    static_cast<int>(sEnd), static_cast<int>(D), alpha,
                    static_cast<const float *>(q.data) + qOff, static_cast<int>(D),
                    static_cast<const float *>(k.data) + kOff, static_cast<int>(D), 0.0f,
                    scores, static_cast<int>(sEnd));
      } else {
        float *qf = scores + tb * sEnd, *kv = qf + tb * D;
        loadFloats(q.dtype, q.data, qOff, tb * D, qf);
        for (int64_t s0 = 0; s0 < sEnd; s0 += kKeys) {
          const int64_t sb = std::min(kKeys, sEnd - s0);
          loadFloats(k.dtype, k.data, kOff + s0 * D, sb * D, kv);
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(tb),
                      static_cast<int>(sb), static_cast<int>(D), alpha, qf, static_cast<int>(D),
                      kv, static_cast<int>(D), 0.0f, scores + s0, static_cast<int>(sEnd));
        }
      }
    } else {
      std::fill_n(scores, tb * sEnd, 0.0f);
    }
    // Row softmax over the keys each query may see; masked keys get 0.
    for (int64_t i = 0; i < tb; ++i) {
      float *row = scores + i * sEnd;
      const int64_t valid = causal ? std::min(sEnd, t0 + i + 1) : sEnd;
      if (mask && valid > 0) {
        // The scaled score plus the mask element, in float: torch's CPU
        // attention adds its float mask to the float scores the same way.
        const int64_t at = (bh / H) * maskStride[0] + (bh % H) * maskStride[1] +
                           (t0 + i) * maskStride[2];
        maskRow.resize(static_cast<size_t>(maskStride[3] ? valid : 1));
        loadFloats(mask->dtype, mask->data, at, static_cast<int64_t>(maskRow.size()),
                   maskRow.data());
        for (int64_t s = 0; s < valid; ++s) row[s] += maskRow[maskStride[3] ? s : 0];
      }
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t s = 0; s < valid; ++s) mx = std::max(mx, row[s]);
      if (mx == -std::numeric_limits<float>::infinity()) {
        // No key allowed (every score -inf): zeros, torch's safe softmax.
        std::fill(row, row + sEnd, 0.0f);
        continue;
      }
      cpu::vecExpShifted(row, mx, row, valid);
      const double inv = 1.0 / cpu::sumLanes(row, valid);
      for (int64_t s = 0; s < valid; ++s) row[s] = static_cast<float>(row[s] * inv);
      std::fill(row + valid, row + sEnd, 0.0f);
    }
    // o_block = p v
    if (direct) {
      float *out = static_cast<float *>(o.data) + oOff;
      if (sEnd == 0 || Dv == 0) std::fill_n(out, tb * Dv, 0.0f);
      else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(tb),
                    static_cast<int>(Dv), static_cast<int>(sEnd), 1.0f, scores,
                    static_cast<int>(sEnd), static_cast<const float *>(v.data) + vOff,
                    static_cast<int>(Dv), 0.0f, out, static_cast<int>(Dv));
    } else {
      float *kv = scores + tb * sEnd + tb * D, *of = kv + kKeys * std::max(D, Dv);
      std::fill_n(of, tb * Dv, 0.0f);
      for (int64_t s0 = 0; s0 < sEnd && Dv > 0; s0 += kKeys) {
        const int64_t sb = std::min(kKeys, sEnd - s0);
        loadFloats(v.dtype, v.data, vOff + s0 * Dv, sb * Dv, kv);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(tb),
                    static_cast<int>(Dv), static_cast<int>(sb), 1.0f, scores + s0,
                    static_cast<int>(sEnd), kv, static_cast<int>(Dv), 1.0f, of,
                    static_cast<int>(Dv));
      }
      storeFloats(o.dtype, of, tb * Dv, o.data, oOff);
    }
  });
}

// --------------------------------------------------------------------- rope --

void ropeKernel(const KTensor &x, double theta, const KTensor &y, int threads) {
  checks::rope(x, theta, y);
  const int64_t T = x.shape[2], D = x.shape[3];
  const int64_t half = D / 2, rows = x.numel() / std::max<int64_t>(D, 1);
  // torch's inv_freq, the table the CUDA backend uses too.
  const std::vector<float> invFreq = ropeInverseFrequencies(theta, D);
  if (D == 0) return;
  parallelTasks(rows, threads, x.numel() * 8, [&](int64_t r) {
    thread_local std::vector<float> buf;
    buf.resize(static_cast<size_t>(2 * D));
    float *v = buf.data(), *out = v + D;
    const float t = static_cast<float>(r % T);
    loadFloats(x.dtype, x.data, r * D, D, v);
    for (int64_t j = 0; j < half; ++j) {
      const float angle = t * invFreq[j];
      const float c = std::cos(angle), s = std::sin(angle);
      const float a = v[j], b = v[j + half];
      const float ac = a * c, bs = b * s, bc = b * c, as = a * s;
      out[j] = ac - bs;
      out[j + half] = bc + as;
    }
    storeFloats(y.dtype, out, D, y.data, r * D);
  });
}

// ------------------------------------------------------------- strided copy --

void stridedCopyKernel(const KTensor &x, const std::vector<int64_t> &strides, int64_t offset,
                       const KTensor &y) {
  checks::stridedCopy(x, strides, offset, y);
  const size_t rank = y.shape.size();
  if (y.numel() == 0) return;
  const int64_t size = plan::dtypeSize(x.dtype);
  const std::byte *src = static_cast<const std::byte *>(x.data);
  std::byte *dst = static_cast<std::byte *>(y.data);
  const int64_t inner = rank ? y.shape[rank - 1] : 1, innerStride = rank ? strides[rank - 1] : 0;
  const int64_t rows = y.numel() / inner;
  std::vector<int64_t> index(rank, 0);
  int64_t at = offset;
  for (int64_t r = 0; r < rows; ++r) {
    std::byte *o = dst + r * inner * size;
    if (innerStride == 1) {
      std::memcpy(o, src + at * size, static_cast<size_t>(inner * size));
    } else if (size == 4) {
      for (int64_t j = 0; j < inner; ++j)
        std::memcpy(o + j * 4, src + (at + j * innerStride) * 4, 4);
    } else {
      for (int64_t j = 0; j < inner; ++j)
        std::memcpy(o + j * size, src + (at + j * innerStride) * size, static_cast<size_t>(size));
    }
    for (size_t d = rank > 0 ? rank - 1 : 0; d-- > 0;) {
      at += strides[d];
      if (++index[d] < y.shape[d]) break;
      at -= strides[d] * y.shape[d];
      index[d] = 0;
    }
  }
}

// ---------------------------------------------------------------------- cat --

void catKernel(const std::vector<KTensor> &inputs, int64_t dim, const KTensor &y) {
  checks::cat(inputs, dim, y);
  const size_t rank = y.shape.size();
  int64_t inner = plan::dtypeSize(y.dtype), outer = 1;
  for (size_t d = static_cast<size_t>(dim) + 1; d < rank; ++d) inner *= y.shape[d];
  for (int64_t d = 0; d < dim; ++d) outer *= y.shape[d];
  std::byte *dst = static_cast<std::byte *>(y.data);
  for (int64_t o = 0; o < outer; ++o)
    for (const KTensor &t : inputs) {
      const int64_t bytes = t.shape[dim] * inner;
      if (bytes) std::memcpy(dst, static_cast<const std::byte *>(t.data) + o * bytes,
                             static_cast<size_t>(bytes));
      dst += bytes;
    }
}

// ------------------------------------------------------------ cross entropy --

double crossEntropyRowLoss(const float *row, int64_t classes, int64_t target, float *scratch) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t c = 0; c < classes; ++c) mx = std::max(mx, row[c]);
  const double picked = row[target];  // read first: scratch may be the row itself
  // exp(x - max) as softmax's (float, vectorized; a -inf or NaN max gives
  // NaN, as torch), summed in double in sumLanes' order.
  cpu::vecExpShifted(row, mx, scratch, classes);
  return static_cast<double>(mx) + std::log(cpu::sumLanes(scratch, classes)) - picked;
}

void crossEntropyRowLosses(plan::DType dtype, const void *logits, int64_t rows, int64_t classes,
                           const int64_t *target, int64_t ignoreIndex, double *terms, int threads) {
  // One row buffer per thread, kept between calls (the fused loss head calls
  // this once per 256-row block, and a vocabulary's row is 0.5 MB): the
  // exponentials of a float32 row, the widened values of other dtypes.
  const int64_t chunks = std::min<int64_t>(rows, std::max(1, threads) * 4);
  cpu::parallelTasks(chunks, threads, rows * classes * 8, [&](int64_t chunk) {
    thread_local std::vector<float> buf;
    if (buf.size() < static_cast<size_t>(classes)) buf.resize(static_cast<size_t>(classes));
    for (int64_t n = chunk * rows / chunks; n < (chunk + 1) * rows / chunks; ++n) {
      if (target[n] == ignoreIndex) continue;
      const float *row = buf.data();
      if (dtype == plan::DType::F32)
        row = static_cast<const float *>(logits) + n * classes;
      else
        loadFloats(dtype, logits, n * classes, classes, buf.data());
      terms[n] = crossEntropyRowLoss(row, classes, target[n], buf.data());
    }
  });
}

void crossEntropyKernel(const KTensor &logits, const KTensor &targets, int64_t ignoreIndex,
                        const KTensor &loss, int threads) {
  const char *op = "cross_entropy";
  checks::crossEntropy(logits, targets, loss);
  const int64_t N = logits.shape[0], C = logits.shape[1];
  const int64_t *target = static_cast<const int64_t *>(targets.data);
  for (int64_t n = 0; n < N; ++n)
    if (target[n] != ignoreIndex && (target[n] < 0 || target[n] >= C))
      fail(op, "target " + std::to_string(target[n]) + " at index " + std::to_string(n) +
                   " is out of range for C = " + std::to_string(C) +
                   " classes and is not ignore_index (" + std::to_string(ignoreIndex) + ")");
  std::vector<double> terms(static_cast<size_t>(N));
  crossEntropyRowLosses(logits.dtype, logits.data, N, C, target, ignoreIndex, terms.data(),
                        threads);
  double total = 0;
  int64_t counted = 0;
  for (int64_t n = 0; n < N; ++n) {  // in row order, as it always was
    if (target[n] == ignoreIndex) continue;
    total += terms[static_cast<size_t>(n)];
    ++counted;
  }
  const float value = static_cast<float>(total / static_cast<double>(counted));
  storeFloats(loss.dtype, &value, 1, loss.data, 0);
}

}  // namespace shardc::runtime
