// CPU kernels of linear_cross_entropy and linear_cross_entropy_backward
// (runtime/OpFamilies.h): a language model's head and loss without its
// [N, V] logits (GPT-2's 50,257 columns, Llama 3's 128,256).
//
// Bits: the same as the ops they replace, linear then cross_entropy, and in
// backward cross_entropy_backward, mul by the rows' scale and linear's two
// gradient GEMMs (compiler/FuseLinearCrossEntropy.cpp relies on it, and
// test/unit/LossHeadKernelsTest.cpp checks it):
//   - a row's logits are a GEMM row (cpu/Gemm.h: they do not depend on the
//     rows or columns sharing the call), rounded to the logits' dtype;
//   - the loss sums crossEntropyRowLoss over the rows in order, as
//     crossEntropyKernel does;
//   - x's gradient rows are cross_entropy_backward's and mul's rows (their
//     own kernels, run on a block of rows) times the weight, GEMM rows;
//   - the weight's gradient sums over the rows in blocks of kLossHeadRows,
//     a multiple of the GEMM's k group, accumulated in float: one call's
//     bits (GemmArgs::accumulate). A 16-bit gradient is accumulated a block
//     of vocabulary columns at a time, so that the float accumulator is
//     [kLossHeadColumns, H], not [V, H]; each element of that block's
//     logits gradient is then made from its row's softmax statistics
//     (cpu::softmaxRowExps, the softmax kernel's own) in the arithmetic of
//     cross_entropy_backward and mul, element by element.
#include "runtime/cpu/FamilyKernels.h"

#include "runtime/ForwardChecks.h"
#include "runtime/cpu/Gemm.h"
#include "runtime/cpu/KernelSupport.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace shardc::runtime {
namespace {

using plan::DType;

/// x [N, H], target [N], weight [V, H]: the shapes the family's rule
/// checked, the targets (data: checked before any work), and the dtypes:
/// x's (linear's output and the gradients) and the logits' (the loss's).
struct Head {
  int64_t N, H, V;
  const int64_t *target;
  DType x, logits;
};

Head headOf(const char *op, const LossHeadParams &p, const KTensor &x, const KTensor &target,
            const KTensor &weight) {
  Head head{x.shape[0],      x.shape[1],
            weight.shape[0], static_cast<const int64_t *>(target.data),
            x.dtype,         p.logitsDtype.value_or(x.dtype)};
  for (int64_t n = 0; n < head.N; ++n)
    if (head.target[n] != p.ignoreIndex && (head.target[n] < 0 || head.target[n] >= head.V))
      checks::fail(op, "target " + std::to_string(head.target[n]) + " of row " + std::to_string(n) +
                           " is out of range for " + std::to_string(head.V) +
                           " classes (ignore_index " + std::to_string(p.ignoreIndex) + ")");
  return head;
}

/// Rows of `cols` values of dtype `from` at `data` rewritten in place as
/// dtype `to` (a cast), each rounded once.
void castRows(const void *data, DType from, DType to, int64_t rows, int64_t cols) {
  if (from == to) return;
  const int64_t fromSize = plan::dtypeSize(from), toSize = plan::dtypeSize(to);
  auto *base = static_cast<std::byte *>(const_cast<void *>(data));
  auto castRow = [&](int64_t r) {
    thread_local std::vector<float> row;
    row.resize(static_cast<size_t>(cols));
    cpu::loadFloats(from, base + r * cols * fromSize, 0, cols, row.data());
    cpu::storeFloats(to, row.data(), cols, base + r * cols * toSize, 0);
  };
  // Narrowing: row r lands at or before where it was read, so rows go in
  // order on one thread; widening goes from the last row back.
  if (toSize <= fromSize)
    for (int64_t r = 0; r < rows; ++r) castRow(r);
  else
    for (int64_t r = rows; r-- > 0;) castRow(r);
}

/// linear's GEMM for rows [n0, n0 + rows) and columns [c0, c0 + cols) of
/// the logits, in float (not rounded yet), into `out` (leading dimension
/// cols).
void logitsGemm(const KTensor &x, const KTensor &weight, const Head &head, int64_t n0, int64_t rows,
                int64_t c0, int64_t cols, float *out, int threads) {
  cpu::gemm({rows,
             cols,
             head.H,
             {x.dtype, x.data, n0 * head.H, head.H},
             {weight.dtype, weight.data, c0 * head.H, head.H},
             /*transB=*/true,
             nullptr,
             x.dtype,
             0,
             out,
             DType::F32,
             0,
             cols},
            threads);
}

/// Logits of rows [n0, n0 + rows) into `out` ([rows, V] of the logits'
/// dtype) as the unfused graph has them: linear's GEMM rounded to x's
/// dtype, then cast to the logits' dtype; each value rounded here once per
/// dtype, as the GEMM's own rounding to x's dtype would.
void logitsBlock(const KTensor &x, const KTensor &weight, const Head &head, int64_t n0,
                 int64_t rows, void *out, int threads) {
  const int64_t cols = head.V;
  logitsGemm(x, weight, head, n0, rows, 0, cols, static_cast<float *>(out), threads);
  if (head.x == DType::F32 && head.logits == DType::F32) return;
  auto *values = static_cast<float *>(out);
  const int64_t count = rows * cols;
  for (int64_t i = 0; i < count; ++i)
    values[i] = cpu::roundedTo(head.logits, cpu::roundedTo(head.x, values[i]));
  castRows(out, DType::F32, head.logits, rows, cols);
}

/// The logits' gradient of rows [n0, n0 + rows), in place over their
/// logits `block` [rows, V] (the logits' dtype), left in x's dtype:
/// cross_entropy_backward's kernel, mul by the rows' scale (the unfused
/// graph's ops, on these rows), then the cast back to x's dtype.
void logitsGradRows(const LossHeadParams &p, const Head &head, const KTensor &scale, int64_t n0,
                    int64_t rows, void *block, int threads) {
  const KTensor logits{head.logits, {rows, head.V}, block};
  const KTensor targets{DType::I64, {rows}, const_cast<int64_t *>(head.target + n0)};
  const KTensor rowScale{scale.dtype,
                         {rows, 1},
                         static_cast<std::byte *>(scale.data) + n0 * plan::dtypeSize(scale.dtype)};
  IndexParams ip;
  ip.ignoreIndex = p.ignoreIndex;
  crossEntropyBackwardKernel(ip, logits, targets, logits, threads);
  binaryKernel(BinaryOp::Mul, logits, rowScale, logits, threads);
  castRows(block, head.logits, head.x, rows, head.V);
}

void forwardLoss(const LossHeadParams &p, const KTensor &x, const Head &head, const KTensor &weight,
                 const KTensor &loss, std::byte *work, int threads) {
  std::vector<double> terms(static_cast<size_t>(kLossHeadRows));
  double total = 0;
  int64_t counted = 0;
  for (int64_t n0 = 0; n0 < head.N; n0 += kLossHeadRows) {
    const int64_t rows = std::min(kLossHeadRows, head.N - n0);
    logitsBlock(x, weight, head, n0, rows, work, threads);
    crossEntropyRowLosses(head.logits, work, rows, head.V, head.target + n0, p.ignoreIndex,
                          terms.data(), threads);
    for (int64_t r = 0; r < rows; ++r) {  // in row order, as cross_entropy's kernel
      if (head.target[n0 + r] == p.ignoreIndex) continue;
      total += terms[static_cast<size_t>(r)];
      ++counted;
    }
  }
  const float value = static_cast<float>(total / static_cast<double>(counted));
  cpu::storeFloats(loss.dtype, &value, 1, loss.data, 0);
}

void inputGrad(const KTensor &x, const Head &head, const LossHeadParams &p, const KTensor &scale,
               const KTensor &weight, const KTensor &y, std::byte *work, int threads) {
  for (int64_t n0 = 0; n0 < head.N; n0 += kLossHeadRows) {
    const int64_t rows = std::min(kLossHeadRows, head.N - n0);
    logitsBlock(x, weight, head, n0, rows, work, threads);
    logitsGradRows(p, head, scale, n0, rows, work, threads);
    // dx rows = dlogits rows @ weight (matmul's GEMM: weight is K rows of H).
    cpu::gemm({rows,
               head.H,
               head.V,
               {head.x, work, 0, head.V},
               {weight.dtype, weight.data, 0, head.H},
               /*transB=*/false,
               nullptr,
               head.x,
               0,
               y.data,
               y.dtype,
               n0 * head.H,
               head.H},
              threads);
  }
}

/// acc [cols, H] (float, zeroed) += dlogits^T x over rows [n0, n0 + rows):
/// dlogits [rows, cols] stored row-major (read transposed in place).
void accumulateWeightGrad(const KTensor &x, const Head &head, int64_t n0, int64_t rows,
                          int64_t cols, DType gradDtype, const void *grad, float *acc,
                          int threads) {
  cpu::GemmArgs g{cols,
                  head.H,
                  rows,
                  {gradDtype, grad, 0, cols},
                  {x.dtype, x.data, n0 * head.H, head.H},
                  /*transB=*/false,
                  nullptr,
                  DType::F32,
                  0,
                  acc,
                  DType::F32,
                  0,
                  head.H};
  g.transA = true;
  g.accumulate = true;
  cpu::gemm(g, threads);
}

/// float32 x: each block of rows' logits gradient (logitsGradRows) summed
/// into y itself.
void weightGradFloat(const LossHeadParams &p, const KTensor &x, const Head &head,
                     const KTensor &scale, const KTensor &weight, const KTensor &y, std::byte *work,
                     int threads) {
  std::memset(y.data, 0, static_cast<size_t>(y.numel()) * 4);
  for (int64_t n0 = 0; n0 < head.N; n0 += kLossHeadRows) {
    const int64_t rows = std::min(kLossHeadRows, head.N - n0);
    logitsBlock(x, weight, head, n0, rows, work, threads);
    logitsGradRows(p, head, scale, n0, rows, work, threads);
    accumulateWeightGrad(x, head, n0, rows, head.V, head.x, work, static_cast<float *>(y.data),
                         threads);
  }
}

/// bfloat16 / float16 x: a block of vocabulary columns at a time, each
/// row's softmax statistics computed first (a pass over the logits), then
/// every (rows, columns) block's logits recomputed and their gradient made
/// element by element in cross_entropy_backward's, mul's and the cast's
/// arithmetic.
void weightGradBlocked(const LossHeadParams &p, const KTensor &x, const Head &head,
                       const KTensor &scale, const KTensor &weight, const KTensor &y,
                       std::byte *work, int threads) {
  const int64_t R = std::min(kLossHeadRows, head.N), C = std::min(kLossHeadColumns, head.V);
  // The workspace (linearCrossEntropyWorkBytes): doubles first for alignment.
  auto *inv = reinterpret_cast<double *>(work);
  auto *acc = reinterpret_cast<float *>(inv + head.N);
  float *gradBlock = acc + C * head.H;
  float *shift = gradBlock + R * C;
  float *logits = shift + head.N;

  for (int64_t n0 = 0; n0 < head.N; n0 += kLossHeadRows) {
    const int64_t rows = std::min(kLossHeadRows, head.N - n0);
    logitsBlock(x, weight, head, n0, rows, logits, threads);
    cpu::parallelTasks(rows, threads, rows * head.V * 8, [&](int64_t r) {
      thread_local std::vector<float> row;
      row.resize(static_cast<size_t>(head.V));
      cpu::loadFloats(head.logits, logits, r * head.V, head.V, row.data());
      const cpu::SoftmaxRowStats stats = cpu::softmaxRowExps(row.data(), head.V);
      shift[n0 + r] = stats.shift;
      inv[n0 + r] = stats.inv;
    });
  }
  std::vector<float> scales(static_cast<size_t>(head.N));
  cpu::loadFloats(scale.dtype, scale.data, 0, head.N, scales.data());
  const DType L = head.logits, X = head.x;
  for (int64_t c0 = 0; c0 < head.V; c0 += C) {
    const int64_t cols = std::min(C, head.V - c0);
    std::memset(acc, 0, static_cast<size_t>(cols * head.H) * 4);
    for (int64_t n0 = 0; n0 < head.N; n0 += kLossHeadRows) {
      const int64_t rows = std::min(kLossHeadRows, head.N - n0);
      logitsGemm(x, weight, head, n0, rows, c0, cols, gradBlock, threads);
      cpu::parallelTasks(rows, threads, rows * cols * 8, [&](int64_t r) {
        const int64_t n = n0 + r, t = head.target[n];
        float *g = gradBlock + r * cols;
        for (int64_t j = 0; j < cols; ++j) g[j] = cpu::roundedTo(L, cpu::roundedTo(X, g[j]));
        cpu::vecExpShifted(g, shift[n], g, cols);
        cpu::softmaxRowScale(g, cols, inv[n]);
        for (int64_t j = 0; j < cols; ++j) {
          // softmax's value as stored, one subtracted at the target (an
          // ignored row: zeros), times the row's scale, then the cast to
          // x's dtype, each rounded.
          float v = t == p.ignoreIndex ? 0.0f : cpu::roundedTo(L, g[j]);
          if (c0 + j == t) v = cpu::roundedTo(L, v - 1.0f);
          g[j] = cpu::roundedTo(X, cpu::roundedTo(L, v * scales[static_cast<size_t>(n)]));
        }
      });
      accumulateWeightGrad(x, head, n0, rows, cols, DType::F32, gradBlock, acc, threads);
    }
    cpu::storeFloats(X, acc, cols * head.H, y.data, c0 * head.H);
  }
}

}  // namespace

void linearCrossEntropyKernel(const LossHeadParams &p, const KTensor &x, const KTensor &target,
                              const KTensor &weight, const KTensor *scale, const KTensor &y,
                              std::byte *workspace, int threads) {
  // The family's rule on entry, as every family kernel.
  const char *op = scale ? "linear_cross_entropy_backward" : "linear_cross_entropy";
  const Shape expected = scale ? linearCrossEntropyBackwardShape(p.wrt, x.shape, target.shape,
                                                                 weight.shape, scale->shape)
                               : linearCrossEntropyShape(x.shape, target.shape, weight.shape);
  const DType logits = p.logitsDtype.value_or(x.dtype);
  if (y.shape != expected || y.dtype != (scale ? x.dtype : logits) || weight.dtype != x.dtype ||
      (scale && scale->dtype != logits) || target.dtype != DType::I64)
    checks::fail(op, "takes x and weight of one float dtype, int64 targets and a scale of the "
                     "logits' dtype; the result " +
                         shapeToString(expected));
  const Head head = headOf(op, p, x, target, weight);
  if (!scale) return forwardLoss(p, x, head, weight, y, workspace, threads);
  if (p.wrt == LossHeadOperand::Input)
    return inputGrad(x, head, p, *scale, weight, y, workspace, threads);
  if (x.dtype == DType::F32)
    return weightGradFloat(p, x, head, *scale, weight, y, workspace, threads);
  weightGradBlocked(p, x, head, *scale, weight, y, workspace, threads);
}

}  // namespace shardc::runtime
