// The op families (runtime/OpFamilies.h) on a CUDA device: the same
// contract as CudaForward.h (device pointers in KTensor, shapes and dtypes
// checked on entry with the CPU kernels' words, work enqueued on
// device.stream()). The numerics follow the CPU kernels
// (runtime/cpu/FamilyKernels.h): float32 math for 16-bit storage, sums and
// means in double, one rounding into the storage dtype, NaN propagated where
// the CPU propagates it; CUDA's libm (expf, tanhf, erff, ...: not the fast
// intrinsics) stands in for the CPU's vectorized formulas, so results agree
// within the backend suite's tolerances, not bit for bit. Every output
// element is computed by one thread in a fixed order (group_norm's
// statistics by one block in a fixed tree), so results are deterministic.
#pragma once

#include "runtime/OpFamilies.h"
#include "runtime/Optimizers.h"
#include "runtime/cuda/CudaDevice.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace shardc::runtime::cuda {

/// y may alias x.
void unary(CudaDevice &device, UnaryOp op, double a, double b, const KTensor &x,
           const KTensor &y);
/// One thread per output element walks the reduced elements in index order.
void reduce(CudaDevice &device, ReduceKind kind, const KTensor &x,
            const std::vector<int64_t> &dims, int64_t correction, const KTensor &y);
void batchNorm(CudaDevice &device, const KTensor &x, const KTensor &mean, const KTensor &var,
               const KTensor *w, const KTensor *b, double eps, const KTensor &y);
void groupNorm(CudaDevice &device, const KTensor &x, int64_t groups, const KTensor *w,
               const KTensor *b, double eps, const KTensor &y);
void pool(CudaDevice &device, const PoolParams &p, const KTensor &x, const KTensor &y);
/// `outputSize` has one entry per spatial dim (1, 2 or 3).
void adaptivePool(CudaDevice &device, PoolKind kind, const std::vector<int64_t> &outputSize,
                  const KTensor &x, const KTensor &y);
void conv(CudaDevice &device, const ConvParams &p, const KTensor &x, const KTensor &w,
          const KTensor *b, const KTensor &y);
void convWeightGrad(CudaDevice &device, const ConvParams &p, const KTensor &x, const KTensor &grad,
                    const std::vector<int64_t> &kernel, const KTensor &dw);

/// topk's int64 indices: the CPU's kernel on a host copy of x, so equal
/// values pick the indices the CPU (torch's CPU selection) picks.
void topk(CudaDevice &device, const IndexParams &p, const KTensor &x, const KTensor &y);
/// An index out of range fails with the CPU's words, after the kernel.
void gather(CudaDevice &device, const IndexParams &p, const KTensor &x, const KTensor &index,
            const KTensor &y);
/// The CPU's sums bit for bit: the indices are sorted by row on the host
/// (one wait), one thread per output element sums in double (and adds
/// acc's element, read before y's is written: acc may be y).
void embeddingBackward(CudaDevice &device, const IndexParams &p, const KTensor &src,
                       const KTensor &index, const KTensor *acc, const KTensor &y);
/// The device's softmax, then one subtracted at each target (ignored rows
/// zeroed) by one block per row; the targets are checked on the host first
/// (one wait), with the CPU's words. y may be x: the softmax block reads
/// its whole row (two block-wide reductions) before it writes it.
void crossEntropyBackward(CudaDevice &device, const IndexParams &p, const KTensor &x,
                          const KTensor &target, const KTensor &y);
/// moe_experts (CudaMoe.cu): the routing is read on the host; waits for
/// the device before it returns. `workspace`: moeExpertsWorkBytes.
void moeExperts(CudaDevice &device, const MoeParams &p, const KTensor &x, const KTensor &index,
                const KTensor &weights, const KTensor &gateUp, const KTensor &down,
                const KTensor &y, std::byte *workspace);

/// Comparisons, where, casts and cumsum (CudaValues.cu): bit-identical to the CPU.
void compare(CudaDevice &device, CompareOp op, const KTensor &a, const KTensor *b, double value,
             const KTensor &y);
void where(CudaDevice &device, const KTensor &cond, const KTensor &a, const KTensor &b,
           const KTensor &y);
void cast(CudaDevice &device, const KTensor &x, const KTensor &y);
void cumsum(CudaDevice &device, const ScanParams &p, const KTensor &x, const KTensor &y);
/// dropout (CudaValues.cu): runtime/DropoutMask.h's mask, the CPU's bits;
/// the step counter is read on the device.
void dropout(CudaDevice &device, const DropoutParams &p, uint64_t seed, uint64_t offset,
             const KTensor &x, const KTensor &step, const KTensor &y);

/// grid_sample (CudaSample.cu): the CPU's element rules (runtime/SampleRules.h).
void gridSample(CudaDevice &device, const SampleParams &p, const KTensor &x, const KTensor &grid,
                const KTensor &y);

/// reduce_scatter, sgd_step and adamw_step (CudaOptimizers.cu): the CPU
/// kernels' order and math type, no contracted multiply-adds. `comm` must
/// move device memory; adamw_step reads the step count on the host (one
/// wait).
void reduceScatter(CudaDevice &device, Communicator &comm, const KTensor &full,
                   const KTensor &shard, std::byte *work, bool mean);
/// all_reduce_sum: every rank's x gathered into `work` (device memory,
/// worldSize x its bytes), then summed in rank order in double.
void allReduceSum(CudaDevice &device, Communicator &comm, const KTensor &x, const KTensor &y,
                  std::byte *work);
/// `gradNorm`: the 0-d float64 norm to clip by (read on the host, one wait).
void sgdStep(CudaDevice &device, const SgdParams &p, const KTensor &param, const KTensor &grad,
             const KTensor *momentumBuffer, const KTensor *step, const KTensor *gradNorm);
void adamwStep(CudaDevice &device, const AdamwParams &p, const KTensor &param, const KTensor &grad,
               const KTensor &expAvg, const KTensor &expAvgSq, const KTensor &step,
               const KTensor *gradNorm);

}  // namespace shardc::runtime::cuda
