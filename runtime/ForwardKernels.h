// CPU kernels of the forward instructions (docs/plan.md, "Forward ops").
//
// Every kernel takes its operands as KTensor (dtype, logical shape, data),
// checks dtypes and shapes once at entry, and throws RuntimeError with the
// reason only (the executor prefixes the instruction's place). Nothing throws
// once worker threads run. Floating kernels accept float32, bfloat16 and
// float16 storage: 16-bit values are widened to float, all math is float32
// (reductions in double where stated), and each result is rounded to the
// storage dtype once, round-to-nearest-even. Binary elementwise ops also take
// float64. Integer data (ids, targets) is int64.
//
// Threads: `threads` worker threads at most (the rank's share of the cores).
// OpenBLAS is put in single-threaded mode once (openblas_set_num_threads(1))
// and every sgemm call runs on the calling worker: the kernels split the work
// themselves into fixed tiles that do not depend on the thread count, so
// results are bit-identical for any thread count and ranks never
// oversubscribe the cores through OpenBLAS's own pool.
//
// Scratch: each worker uses at most about 1 MiB of heap scratch per kernel
// (converted 16-bit blocks, one block of attention scores); it is not
// accounted by the Device (docs/plan.md).
#pragma once

#include "runtime/Kernels.h"
#include "runtime/Plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace shardc::runtime {

/// A tensor operand: row-major, contiguous, `data` owned elsewhere.
struct KTensor {
  plan::DType dtype = plan::DType::F32;
  Shape shape;
  void *data = nullptr;

  int64_t numel() const { return plan::numElements(shape); }
};

/// out[..., :] = weight[ids[...], :]. weight [V, D] any dtype, ids int64,
/// out [ids..., D] weight's dtype. An id outside [0, V) is an error naming it.
void embeddingKernel(const KTensor &weight, const KTensor &ids, const KTensor &out);

/// y = x w^T (+ b). x [..., K], w [N, K], b [N] (optional: nullptr), y [..., N];
/// all one floating dtype.
void linearKernel(const KTensor &x, const KTensor &w, const KTensor *b, const KTensor &y,
                  int threads);

/// How matmul's operands are stored (the plan's transpose_a / transpose_b):
/// transposeA, a holds [..., K, M], the operand with its last two dims
/// swapped, read in place instead of copied; transposeB, b holds [..., N, K].
struct MatmulLayout {
  bool transposeA = false, transposeB = false;
};

/// c = a @ b with numpy broadcasting of the batch dims: a [..., M, K],
/// b [..., K, N] (as `layout` stores them), c [broadcast(...), M, N]; both
/// operands of rank >= 2.
void matmulKernel(const KTensor &a, const KTensor &b, const KTensor &c, MatmulLayout layout,
                  int threads);

enum class BinaryOp { Add, Sub, Mul, Div };
const char *binaryOpName(BinaryOp op);
/// out = a OP b with numpy broadcasting; float32, float64, bfloat16 (float16
/// is rejected, as `add` always did). out may alias a or b when it has their
/// shape.
void binaryKernel(BinaryOp op, const KTensor &a, const KTensor &b, const KTensor &out,
                  int threads);

enum class Activation { GeluErf, GeluTanh, Silu, Relu };
/// y = f(x) elementwise, same shape and dtype; y may alias x.
///   GeluErf:  x * 0.5 * (1 + erf(x / sqrt(2)))
///   GeluTanh: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
///   Silu:     x / (1 + exp(-x));  Relu: max(x, 0) (NaN stays NaN)
void activationKernel(Activation kind, const KTensor &x, const KTensor &y, int threads);

/// Over the last dim D: y = (x - mean) / sqrt(var + eps) * weight + bias
/// (biased variance; mean and variance in double). weight, bias [D] each
/// optional (nullptr).
void layerNormKernel(const KTensor &x, const KTensor *weight, const KTensor *bias, double eps,
                     const KTensor &y, int threads);
/// Over the last dim: y = x / sqrt(mean(x^2) + eps) * weight (mean in double).
void rmsNormKernel(const KTensor &x, const KTensor *weight, double eps, const KTensor &y,
                   int threads);

/// Numerically stable softmax over dim `dim` (0 <= dim < rank).
void softmaxKernel(const KTensor &x, int64_t dim, const KTensor &y, int threads);

/// Scaled dot-product attention. q [B, H, T, D], k [B, H, S, D],
/// v [B, H, S, Dv], o [B, H, T, Dv]. causal: query t attends keys s <= t
/// (torch's is_causal, a top-left aligned tril mask). mask (optional:
/// nullptr) is added to the scaled scores before softmax: q's dtype, 4-d,
/// each dim 1 or the scores' [B, H, T, S] (torch's float attn_mask; -inf
/// excludes a key). A query row whose every score is -inf gives zeros, as
/// torch's sdpa does (its safe softmax: a fully padded row). o must not
/// overlap q, k, v or mask.
void sdpaKernel(const KTensor &q, const KTensor &k, const KTensor &v, const KTensor *mask,
                const KTensor &o, bool causal, double scale, int threads);

/// Rotary position embedding, Llama/HF rotate_half convention, positions
/// t = 0..T-1 of x [B, H, T, D] (D even), computed as torch does in float32:
/// inv_freq_j = 1 / powf(theta, (2j) / D), angle = t * inv_freq_j,
/// y_j = x_j cos - x_{j+D/2} sin, y_{j+D/2} = x_{j+D/2} cos + x_j sin.
void ropeKernel(const KTensor &x, double theta, const KTensor &y, int threads);

/// y[i_0, ..., i_{r-1}] = x_flat[offset + sum_k i_k * strides[k]]; any dtype
/// (x's and y's equal). Every index read must lie in [0, numel(x)).
void stridedCopyKernel(const KTensor &x, const std::vector<int64_t> &strides, int64_t offset,
                       const KTensor &y);

/// y = concatenation of `inputs` along `dim` (0 <= dim < rank); any dtype.
void catKernel(const std::vector<KTensor> &inputs, int64_t dim, const KTensor &y);

/// loss = mean over targets != ignoreIndex of logsumexp(logits[n]) -
/// logits[n][target[n]] (torch's cross_entropy, reduction "mean"), in double.
/// logits [N, C] floating; targets int64 [N]; loss 0-d float32 or logits'
/// dtype. A target outside [0, C) that is not ignoreIndex is an error. All
/// targets ignored gives NaN (as torch). The rows' terms are computed on up
/// to `threads` threads and summed in row order: the same bits at any count.
void crossEntropyKernel(const KTensor &logits, const KTensor &targets, int64_t ignoreIndex,
                        const KTensor &loss, int threads = 1);

/// One counted row's term of crossEntropyKernel's sum: logsumexp(row) -
/// row[target], the exponentials in float as softmax's (VectorMath.h),
/// their sum, the log and the difference in double (linear_cross_entropy
/// sums the same terms in the same order). `scratch` holds `classes`
/// floats and may be `row` itself (then the row is overwritten).
double crossEntropyRowLoss(const float *row, int64_t classes, int64_t target, float *scratch);

/// terms[n] = crossEntropyRowLoss of row n of `logits` ([rows, classes] of
/// `dtype`) for every row whose target is not ignoreIndex (the others are
/// left alone), on up to `threads` threads: each row alone, so the terms do
/// not depend on the thread count.
void crossEntropyRowLosses(plan::DType dtype, const void *logits, int64_t rows, int64_t classes,
                           const int64_t *target, int64_t ignoreIndex, double *terms, int threads);

}  // namespace shardc::runtime
