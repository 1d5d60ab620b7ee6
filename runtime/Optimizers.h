// Training's runtime half (docs/training.md): a full gradient reduced into
// this rank's rows (reduce_scatter), and the optimizer updates that run on
// those rows (sgd_step, adamw_step). The CPU kernels follow torch.optim's
// single-tensor formulas operation by operation, in the param's compute
// type (float for float32 / bfloat16 / float16, double for float64).
#pragma once

#include "runtime/Communicator.h"
#include "runtime/ExactSquareSum.h"
#include "runtime/ForwardKernels.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace shardc::runtime {

/// torch.optim.SGD (dampening 0): momentum 0 needs no buffer.
struct SgdParams {
  double lr = 0;
  double momentum = 0;
  double weightDecay = 0;
  /// Gradient clipping (clipCoefficient): > 0 when the step reads the
  /// gradients' global norm.
  double maxGradNorm = 0;
  /// The learning-rate schedule (scheduledLr, as AdamW's): the step then
  /// reads a step count.
  int64_t warmupSteps = 0;
  int64_t decaySteps = 0;
  double minLr = 0;
  /// Nesterov momentum (torch's nesterov=True): the update is
  /// grad + momentum * buf instead of buf.
  bool nesterov = false;
};

/// torch.optim.AdamW (amsgrad off).
struct AdamwParams {
  double lr = 0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.01;
  /// The learning-rate schedule (scheduledLr): a linear warmup over
  /// warmupSteps steps, then a cosine decay to minLr over decaySteps steps
  /// (0: lr stays).
  int64_t warmupSteps = 0;
  int64_t decaySteps = 0;
  double minLr = 0;
  /// Gradient clipping (clipCoefficient): > 0 when the step reads the
  /// gradients' global norm.
  double maxGradNorm = 0;
};

/// torch.nn.utils.clip_grad_norm_'s factor, in the step's math type C
/// (float for float32 and 16-bit parameters, double for float64), as torch
/// computes it on its norm tensor: max_norm / (norm + 1e-6), clamped to at
/// most 1 (a NaN norm stays NaN). Every gradient is multiplied by it, and
/// rounded to its dtype, before the update reads it.
template <typename C> C clipCoefficient(double maxGradNorm, double norm) {
  const C coefficient = C(maxGradNorm) / (C(norm) + C(1e-6));
  return coefficient > C(1) ? C(1) : coefficient;
}

/// The learning rate of step `step` (1, 2, ...): lr * step / warmupSteps
/// during the warmup, then lr * (m + (1 - m) * (1 + cos(pi * progress)) / 2)
/// with m = minLr / lr and progress = min(1, (step - warmupSteps) /
/// decaySteps), lr itself without decay steps. tools/torch_reference.py's
/// LambdaLR computes the same factor with the same double operations, so
/// torch's steps see the same learning rate to the bit.
/// (SgdParams and AdamwParams both carry it.)
template <typename Params> double scheduledLr(const Params &p, double step) {
  const double warmup = static_cast<double>(p.warmupSteps);
  if (p.warmupSteps > 0 && step <= warmup) return p.lr * (step / warmup);
  if (p.decaySteps <= 0) return p.lr;
  const double progress = std::min(1.0, (step - warmup) / static_cast<double>(p.decaySteps));
  const double floor = p.minLr / p.lr;
  return p.lr * (floor + (1 - floor) * (0.5 * (1 + std::cos(M_PI * progress))));
}

/// The scalars of one AdamW update at step count `step`, as
/// torch.optim.adamw computes them (Python floats); each backend's kernel
/// converts them to its math type.
struct AdamwStepScalars {
  double decay, averageWeight, beta2, squareWeight, minusStepSize, biasCorrection2Sqrt, eps;
};
inline AdamwStepScalars adamwStepScalars(const AdamwParams &p, double step) {
  const double lr = scheduledLr(p, step);
  const double biasCorrection1 = 1 - std::pow(p.beta1, step);
  const double biasCorrection2 = 1 - std::pow(p.beta2, step);
  return {1 - lr * p.weightDecay,     1 - p.beta1, p.beta2, 1 - p.beta2, -(lr / biasCorrection1),
          std::sqrt(biasCorrection2), p.eps};
}

/// Elements of a shard a reduce_scatter sums at a time (its window): the
/// workspace holds one window's running sums and one root's window as
/// received (12 MiB in float32), not the whole shard's (GPT-2's tied
/// embedding at N = 2: 221 MiB, the largest buffer of its step). Each
/// element's sum is the same at any window size (rank order, in double).
constexpr int64_t kReduceScatterWindow = int64_t(1) << 20;

/// A reduce_scatter reads its gradient in the shard's dtype or in a
/// narrower float one whose every value the shard's holds exactly (master
/// weights' bfloat16 gradient into a float32 shard): the result is the bytes
/// of casting the gradient first, without the cast's full-size copy.
inline bool widensExactly(plan::DType from, plan::DType to) {
  if (from == to) return true;
  if (from == plan::DType::BF16 || from == plan::DType::F16)
    return to == plan::DType::F32 || to == plan::DType::F64;
  return from == plan::DType::F32 && to == plan::DType::F64;
}

/// One rank's reduce_scatter, for every backend: of the chunk's `elements`,
/// the first `valid` lie inside the full tensor (the rest is padding); each
/// rank's part of the full tensor is `partBytes` long (the gradient's
/// dtype). The chunk is reduced `window` elements at a time; the workspace
/// holds the window's running sums, then one root's window as received (the
/// gradient's dtype) at `receivedOffset`.
struct ReduceScatterLayout {
  int64_t elements = 0, valid = 0, window = 0;
  size_t partBytes = 0, fullBytes = 0;
  int64_t receivedOffset = 0;
};
/// Bytes of one running sum: double, long double for float64 (x87's 64-bit
/// mantissa keeps N equal float64 values' sum exact to N = 2^11).
inline int64_t reduceScatterSumBytes(plan::DType dtype) {
  return dtype == plan::DType::F64 ? static_cast<int64_t>(sizeof(long double)) : 8;
}
inline ReduceScatterLayout reduceScatterLayout(int64_t rank, const KTensor &full,
                                               const KTensor &shard) {
  ReduceScatterLayout l;
  const int64_t elementBytes = plan::dtypeSize(full.dtype);
  l.elements = shard.numel();
  l.window = std::min(l.elements, kReduceScatterWindow);
  l.partBytes = static_cast<size_t>(l.elements * elementBytes);
  l.fullBytes = static_cast<size_t>(full.numel() * elementBytes);
  l.valid = std::clamp<int64_t>(full.numel() - rank * l.elements, 0, l.elements);
  l.receivedOffset = l.window * reduceScatterSumBytes(shard.dtype);
  return l;
}

/// Working memory of a reduce_scatter of a `gradDtype` gradient into a
/// `shardDtype` shard: one window of a root's rows as received and their
/// running sums in double; -1 when it overflows.
int64_t reduceScatterWorkBytes(const std::vector<int64_t> &shardShape, plan::DType shardDtype,
                               plan::DType gradDtype);

/// reduce_scatter on host memory: `shard` (the param's chunk rows) receives
/// the mean (with `mean`; else the sum) over ranks of rows [rank * chunk,
/// (rank + 1) * chunk) of every rank's `full`, summed in double in rank
/// order and rounded once, rows past `full` zero. Identical fulls give back
/// their own bytes at every world size under the mean (N x, a sum of equal
/// values, is exact in double). `work` holds reduceScatterWorkBytes.
void reduceScatterKernel(Communicator &comm, const KTensor &full, const KTensor &shard,
                         std::byte *work, bool mean);

/// all_reduce_sum on host memory: y = every rank's x summed elementwise in
/// rank order, in double (long double for float64), rounded once, so every
/// rank gets the same bytes. `work` holds worldSize times x's bytes (the
/// gathered values, rank 0's first).
void allReduceSumKernel(Communicator &comm, const KTensor &x, const KTensor &y, std::byte *work);

/// Adds the squares of elements [begin, begin + n) of floating `values`
/// (of `dtype`, in host memory) to `sum`: the CPU's grad_norm, and the CUDA
/// backend's on host copies.
void addSquares(ExactSquareSum &sum, plan::DType dtype, const void *values, int64_t begin,
                int64_t n);

/// grad_norm on host memory: the 0-d float64 `norm` receives the L2 norm of
/// every rank's `grads` together, a `whole` one counted on rank 0 only,
/// the same bits at every world size and thread count.
void gradNormKernel(Communicator &comm, const std::vector<KTensor> &grads,
                    const std::vector<bool> &whole, const KTensor &norm, int threads);

/// `gradNorm` (with p.maxGradNorm > 0): the 0-d float64 global norm the
/// gradient is clipped by first.
/// `step` (with a schedule): the 0-d count of steps taken, this one
/// included.
void sgdStepKernel(const SgdParams &p, const KTensor &param, const KTensor &grad,
                   const KTensor *momentumBuffer, const KTensor *step, const KTensor *gradNorm,
                   int threads);

/// `step` is the 0-d count of steps taken, this one included.
void adamwStepKernel(const AdamwParams &p, const KTensor &param, const KTensor &grad,
                     const KTensor &expAvg, const KTensor &expAvgSq, const KTensor &step,
                     const KTensor *gradNorm, int threads);

}  // namespace shardc::runtime
