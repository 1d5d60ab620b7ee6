// The shape and dtype rules of the forward ops: one implementation, called
// on entry by every backend's kernels (runtime/ForwardKernels.cpp on the
// CPU, runtime/cuda/CudaForward.cu on a GPU), so the backends accept the
// same operands and reject the others with the same words. Each rule throws
// RuntimeError "<op>: <reason>" (the executor core prefixes the
// instruction's place) and returns the sizes the kernel needs. Limits of
// one backend (BLAS int range, CUDA's maximum rank) stay in that backend.
#pragma once

#include "runtime/ForwardKernels.h"
#include "runtime/OpFamilies.h"

#include <cstdint>
#include <string>
#include <vector>

namespace shardc::runtime::checks {

[[noreturn]] void fail(const char *op, const std::string &reason);

bool isFloatStorage(plan::DType dtype);  // float32, bfloat16, float16
void expectFloat(const char *op, const char *what, const KTensor &t);
void expectDType(const char *op, const char *what, const KTensor &t, plan::DType dtype);
void expectShape(const char *op, const char *what, const KTensor &t, const Shape &shape);

void embedding(const KTensor &weight, const KTensor &ids, const KTensor &out);

struct LinearDims {
  int64_t rows, N, K;  // x is rows x K, w is N x K
};
LinearDims linear(const KTensor &x, const KTensor &w, const KTensor *b, const KTensor &y);

struct MatmulDims {
  Shape batch, aBatch, bBatch;  // broadcast batch dims and each operand's
  int64_t M, N, K;
};
MatmulDims matmul(const KTensor &a, const KTensor &b, const KTensor &c, MatmulLayout layout);

/// float32, float64, bfloat16 and int64 (not div); one dtype; out has the
/// broadcast shape.
void binary(BinaryOp op, const KTensor &a, const KTensor &b, const KTensor &out);
void activation(const KTensor &x, const KTensor &y);

struct NormDims {
  int64_t rows, D;
};
NormDims norm(const char *op, const KTensor &x, const KTensor *weight, const KTensor *bias,
              const KTensor &y);
void softmax(const KTensor &x, int64_t dim, const KTensor &y);

struct SdpaDims {
  /// Hkv key / value heads, each read by H / Hkv query heads in a row
  /// (grouped-query attention; Hkv == H without).
  int64_t B, H, Hkv, T, S, D, Dv;
  /// The mask's element strides over the scores [B, H, T, S]: 0 along a dim
  /// the mask broadcasts (size 1); all 0 without a mask.
  int64_t maskStride[4] = {0, 0, 0, 0};
};
/// q [B, H, T, D], k [B, Hkv, S, D], v [B, Hkv, S, Dv] (runtime/AttentionShapes.h);
/// mask (optional: nullptr): additive, q's dtype, 4-d, each dim 1 or the
/// scores' [B, H, T, S].
SdpaDims sdpa(const KTensor &q, const KTensor &k, const KTensor &v, const KTensor *mask,
              const KTensor &o);
void rope(const KTensor &x, double theta, const KTensor &y);
void stridedCopy(const KTensor &x, const std::vector<int64_t> &strides, int64_t offset,
                 const KTensor &y);
void cat(const std::vector<KTensor> &inputs, int64_t dim, const KTensor &y);
void crossEntropy(const KTensor &logits, const KTensor &targets, const KTensor &loss);

// The op families' operand checks, one place for every backend.
/// conv / conv_transpose: x, weight, bias and y of one float dtype, y of convShape.
void conv(const ConvParams &p, const KTensor &x, const KTensor &w, const KTensor *b,
          const KTensor &y);
void convWeightGrad(const ConvParams &p, const KTensor &x, const KTensor &grad,
                    const std::vector<int64_t> &kernel, const KTensor &dw);
/// batch_norm (eval): x, statistics and affine parameters in float storage
/// (each its own), y of x's dtype and batchNormShape.
void batchNorm(const KTensor &x, const KTensor &mean, const KTensor &var, const KTensor *w,
               const KTensor *b, const KTensor &y);
/// group_norm: x, w, b in float storage, y of x's dtype and groupNormShape.
void groupNorm(const KTensor &x, int64_t groups, const KTensor *w, const KTensor *b,
               const KTensor &y);
/// A reduction over `dims`: float x (or float64), y of x's dtype (int64 for
/// argmax/argmin) with the reduced shape, keepdim or not.
void reduce(ReduceKind kind, const KTensor &x, const std::vector<int64_t> &dims,
            const KTensor &y);
/// topk: y int64 with topkShape.
void topk(const IndexParams &p, const KTensor &x, const KTensor &y);
/// gather: index int64, y of x's dtype with gatherShape (the index values
/// are data: each kernel checks them).
void gather(const IndexParams &p, const KTensor &x, const KTensor &index, const KTensor &y);
/// embedding_backward: src [M, D], index int64 [M], y (and acc, when
/// given) of src's dtype [rows, D]; then `indices` (the index's M values,
/// on the host) each in [0, rows), the first outside named.
void embeddingBackward(const IndexParams &p, const KTensor &src, const KTensor &index,
                       const KTensor *acc, const KTensor &y);
void embeddingIndices(const IndexParams &p, const int64_t *indices, int64_t count);
/// cross_entropy_backward: x [N, C] float, target int64 [N], y of x's
/// dtype and shape; then `targets` (on the host) each in [0, C) or
/// ignore_index, the first other named.
void crossEntropyBackward(const KTensor &x, const KTensor &target, const KTensor &y);
void crossEntropyTargets(const IndexParams &p, const int64_t *targets, int64_t count,
                         int64_t classes);
/// moe_experts: x in float storage, index int64, weights, gate_up, down and y
/// of x's dtype, y with moeExpertsShape (expert ids are data: kernels check).
void moeExperts(const KTensor &x, const KTensor &index, const KTensor &weights,
                const KTensor &gateUp, const KTensor &down, const KTensor &y);
/// moe_experts_backward: the forward's operands as above, grad of x's shape
/// and dtype, y with moeExpertsBackwardShape in x's dtype.
void moeExpertsBackward(MoeOperand wrt, const KTensor &x, const KTensor &index,
                        const KTensor &weights, const KTensor &gateUp, const KTensor &down,
                        const KTensor &grad, const KTensor *hidden, const KTensor *gatedGrad,
                        const KTensor &y);
/// moe_experts_hidden: x in float storage, index int64, gate_up and y of
/// x's dtype, y with moeExpertsHiddenShape.
void moeExpertsHidden(const KTensor &x, const KTensor &index, const KTensor &gateUp,
                      const KTensor &y);
/// moe_experts_gated_grad: grad in float storage, index int64, down and y of
/// grad's dtype, y with moeExpertsGatedGradShape.
void moeExpertsGatedGrad(const KTensor &grad, const KTensor &index, const KTensor &down,
                         const KTensor &y);

/// eq, ne, ...: a (and b) of one dtype, y int64 of compareShape.
void compare(CompareOp op, const KTensor &a, const KTensor *b, const KTensor &y);
/// where: cond int64, a and b one dtype, y of a's dtype and whereShape.
void where(const KTensor &cond, const KTensor &a, const KTensor &b, const KTensor &y);
/// cast: y of x's shape (its dtype is the target).
void cast(const KTensor &x, const KTensor &y);
/// cumsum: y of x's shape and dtype, dim in range.
void cumsum(const ScanParams &p, const KTensor &x, const KTensor &y);
/// dropout: step a 0-d float32 counter, y of x's shape and dtype.
void dropout(const DropoutParams &p, const KTensor &x, const KTensor &step, const KTensor &y);
/// grid_sample: x and grid one float dtype, y of x's dtype and gridSampleShape.
void gridSample(const KTensor &x, const KTensor &grid, const KTensor &y);
/// grid_sample_backward: x, grid and grad one float dtype, y of x's dtype
/// and gridSampleBackwardShape.
void gridSampleBackward(SampleGrad wrt, const KTensor &x, const KTensor &grid, const KTensor &grad,
                        const KTensor &y);

/// sgd_step and adamw_step (runtime/Optimizers.h): a floating param
/// (float64 too); the gradient and each state tensor of its dtype and
/// element count; adamw's step count one floating value of at least 1
/// (read by the caller: `stepCount`, nullptr for sgd).
void optimizerStep(const char *op, const KTensor &param, const KTensor &grad,
                   const std::vector<std::pair<const char *, const KTensor *>> &state,
                   const double *stepCount);
/// A step clips by the global norm exactly when it has maxGradNorm > 0 and
/// a `gradNorm`, a 0-d float64 (grad_norm's output).
void clipNorm(const char *op, double maxGradNorm, const KTensor *gradNorm);
/// grad_norm: one `whole` flag per floating gradient; `norm` 0-d float64.
void gradNorm(const std::vector<KTensor> &grads, const std::vector<bool> &whole,
              const KTensor &norm);

}  // namespace shardc::runtime::checks
