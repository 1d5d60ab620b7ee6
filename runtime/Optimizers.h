// Training's runtime half (docs/training.md): a full gradient reduced into
// this rank's rows (reduce_scatter), and the optimizer updates that run on
// those rows (sgd_step, adamw_step). The CPU kernels follow torch.optim's
// single-tensor formulas operation by operation, in the param's compute
// type (float for float32 / bfloat16 / float16, double for float64).
#pragma once

#include "runtime/Communicator.h"
#include "runtime/ForwardKernels.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace shardc::runtime {

/// torch.optim.SGD (dampening 0, no Nesterov): momentum 0 needs no buffer.
struct SgdParams {
  double lr = 0;
  double momentum = 0;
  double weightDecay = 0;
};

/// torch.optim.AdamW (amsgrad off).
struct AdamwParams {
  double lr = 0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.01;
};

/// Working memory of a reduce_scatter into `shard`: one root's rows as
/// received and their running sum in double; -1 when it overflows.
int64_t reduceScatterWorkBytes(const std::vector<int64_t> &shardShape, plan::DType dtype);

/// reduce_scatter on host memory: `shard` (the param's chunk rows) receives
/// the mean over ranks of rows [rank * chunk, (rank + 1) * chunk) of every
/// rank's `full`, summed in double in rank order and rounded once, rows past
/// `full` zero. Identical fulls give back their own bytes at every world
/// size (N x, a sum of equal values, is exact in double). `work` holds
/// reduceScatterWorkBytes.
void reduceScatterMeanKernel(Communicator &comm, const KTensor &full, const KTensor &shard,
                             std::byte *work);

void sgdStepKernel(const SgdParams &p, const KTensor &param, const KTensor &grad,
                   const KTensor *momentumBuffer, int threads);

/// `step` is the 0-d count of steps taken, this one included.
void adamwStepKernel(const AdamwParams &p, const KTensor &param, const KTensor &grad,
                     const KTensor &expAvg, const KTensor &expAvgSq, const KTensor &step,
                     int threads);

}  // namespace shardc::runtime
