// CPU kernels of the op families in runtime/OpFamilies.h. Same contract as
// runtime/ForwardKernels.h: operands as KTensor, the family's shape rule
// checked on entry (RuntimeError with the reason only), at most `threads`
// workers, fixed work splits so results are bit-identical for any thread
// count and for any batch size (a sample's result never depends on the
// others), per-worker heap scratch bounded (about 1 MiB) and not accounted,
// output never aliasing an input unless stated.
#pragma once

#include "runtime/OpFamilies.h"

namespace shardc::runtime {

/// Convolution (im2col blocks + sgemm in fixed tiles; depthwise directly).
void convKernel(const ConvParams &p, const KTensor &x, const KTensor &w, const KTensor *b,
                const KTensor &y, int threads);
/// conv_weight_grad: per (group, block of dw's columns), the samples'
/// im2col blocks in a fixed order, one sgemm each onto a float tile.
void convWeightGradKernel(const ConvParams &p, const KTensor &x, const KTensor &grad,
                          const std::vector<int64_t> &kernel, const KTensor &dw, int threads);

void poolKernel(const PoolParams &p, const KTensor &x, const KTensor &y, int threads);
/// max_pool's gradient (maxPoolBackwardShape): per (sample, channel), the
/// windows in output order, each adding its gradient at the first position
/// of its maximum (the last NaN if any; the window's first tap inside the
/// input when every tap is -inf), in float, rounded once to dx's dtype.
void maxPoolBackwardKernel(const PoolParams &p, const KTensor &x, const KTensor &grad,
                           const KTensor &dx, int threads);
/// adaptive_{avg,max}_pool with outputSize.size() spatial dims (1, 2 or 3).
void adaptivePoolKernel(PoolKind kind, const std::vector<int64_t> &outputSize, const KTensor &x,
                        const KTensor &y, int threads);

void batchNormKernel(const KTensor &x, const KTensor &mean, const KTensor &var,
                     const KTensor *w, const KTensor *b, double eps, const KTensor &y,
                     int threads);
void groupNormKernel(const KTensor &x, int64_t groups, const KTensor *w, const KTensor *b,
                     double eps, const KTensor &y, int threads);

/// y has reduceShape(kind, x.shape, dims, keepdim) (keepdim does not change
/// the layout, so the kernel takes y's shape as given and checks its numel).
void reduceKernel(ReduceKind kind, const KTensor &x, const std::vector<int64_t> &dims,
                  int64_t correction, const KTensor &y, int threads);

/// topk: y int64 [x with dim's size k] (topkShape); gather: y [index] in x's
/// dtype. Byte copies and comparisons only: exact for every float dtype.
void topkKernel(const IndexParams &p, const KTensor &x, const KTensor &y, int threads);
/// cross_entropy_backward; y may be x (each row is read whole first).
void crossEntropyBackwardKernel(const IndexParams &p, const KTensor &x, const KTensor &target,
                                const KTensor &y, int threads);
/// embedding_backward; with acc, y = acc + the sums (acc may be y itself).
void embeddingBackwardKernel(const IndexParams &p, const KTensor &src, const KTensor &index,
                             const KTensor &y, int threads, const KTensor *acc = nullptr);
void gatherKernel(const IndexParams &p, const KTensor &x, const KTensor &index, const KTensor &y,
                  int threads);

/// sdpa_backward (AttentionBackwardKernels.cpp); `workspace` holds
/// sdpaBackwardWorkBytes; `mask` optional (sdpa's additive mask).
void sdpaBackwardKernel(const AttentionGradParams &p, const KTensor &q, const KTensor &k,
                        const KTensor &v, const KTensor &g, const KTensor *mask, const KTensor &y,
                        std::byte *workspace, int threads);
/// linear_cross_entropy (scale == nullptr) and its backward (p.wrt)
/// (LossHeadKernels.cpp); `workspace` holds linearCrossEntropyWorkBytes.
void linearCrossEntropyKernel(const LossHeadParams &p, const KTensor &x, const KTensor &target,
                              const KTensor &weight, const KTensor *scale, const KTensor &y,
                              std::byte *workspace, int threads);
/// moe_experts; `workspace` holds moeExpertsWorkBytes(T, k, H, I, y.dtype).
void moeExpertsKernel(const MoeParams &p, const KTensor &x, const KTensor &index,
                      const KTensor &weights, const KTensor &gateUp, const KTensor &down,
                      const KTensor &y, std::byte *workspace, int threads);
/// moe_experts_backward (MoeBackwardKernels.cpp); `workspace` holds
/// moeExpertsBackwardWorkBytes(p.wrt, T, k, H, I, y.dtype).
void moeExpertsBackwardKernel(const MoeParams &p, const KTensor &x, const KTensor &index,
                              const KTensor &weights, const KTensor &gateUp, const KTensor &down,
                              const KTensor &grad, const KTensor *hidden, const KTensor *gatedGrad,
                              const KTensor &y, std::byte *workspace, int threads);
/// moe_experts_hidden (MoeBackwardKernels.cpp); `workspace` holds
/// moeExpertsHiddenWorkBytes(T, k, H, I).
void moeExpertsHiddenKernel(const KTensor &x, const KTensor &index, const KTensor &gateUp,
                            const KTensor &y, std::byte *workspace, int threads);
/// moe_experts_gated_grad (MoeBackwardKernels.cpp); `workspace` holds
/// moeExpertsGatedGradWorkBytes(T, k, H, I).
void moeExpertsGatedGradKernel(const KTensor &grad, const KTensor &index, const KTensor &down,
                               const KTensor &y, std::byte *workspace, int threads);

/// eq, ne, ...: y int64 1/0 (b == nullptr: a against `value`).
void compareKernel(CompareOp op, const KTensor &a, const KTensor *b, double value,
                   const KTensor &y, int threads);
/// y = cond ? a : b (cond int64, nonzero true), broadcast; element copies.
void whereKernel(const KTensor &cond, const KTensor &a, const KTensor &b, const KTensor &y,
                 int threads);
void castKernel(const KTensor &x, const KTensor &y, int threads);
void cumsumKernel(const ScanParams &p, const KTensor &x, const KTensor &y, int threads);
/// dropout (RandomKernels.cpp): runtime/DropoutMask.h's mask, in chunks of
/// whole Philox blocks, so neither threads nor ranks change a bit.
/// `offset`: the whole batch's index of x's first element.
void dropoutKernel(const DropoutParams &p, uint64_t seed, uint64_t offset, const KTensor &x,
                   const KTensor &step, const KTensor &y, int threads);

/// grid_sample (SampleKernels.cpp): y [N, C, Ho, Wo] of x [N, C, H, W] read
/// at grid [N, Ho, Wo, 2] (runtime/OpFamilies.h).
void gridSampleKernel(const SampleParams &p, const KTensor &x, const KTensor &grid,
                      const KTensor &y, int threads);
/// grid_sample's gradient (SampleBackwardKernels.cpp): given grad, the
/// gradient of grid_sample(x, grid) with respect to x or to the grid.
void gridSampleBackwardKernel(const SampleParams &p, SampleGrad wrt, const KTensor &x,
                              const KTensor &grid, const KTensor &grad, const KTensor &y,
                              int threads);

/// y may alias x.
void unaryKernel(UnaryOp op, double a, double b, const KTensor &x, const KTensor &y,
                 int threads);

}  // namespace shardc::runtime
