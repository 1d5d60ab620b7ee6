// The forward instructions on a CUDA device (docs/plan.md, "Forward ops").
//
// Operands are KTensor (runtime/ForwardKernels.h) whose `data` are device
// pointers; dtypes and shapes are checked on entry as the CPU kernels check
// them, and errors are RuntimeError with the reason only (the executor adds
// the instruction's place). Work is enqueued on device.stream(); only
// `embedding` waits (to report an id out of range).
//
// Numerics: the same formulas as the CPU kernels (16-bit storage widened to
// float, reductions in double where the CPU reduces in double, one rounding
// to the storage dtype), but not the same bits: cuBLAS sums in another
// order and CUDA's expf/erff/tanhf round differently from glibc. test/gpu
// compares with the CPU kernels within tolerances.
//
// linear/matmul: cublasGemmEx, compute type CUBLAS_COMPUTE_32F (no TF32),
// inputs and output in the storage dtype (bf16/f16 rounded once: the bias
// is placed in the output first and the GEMM accumulates onto it, beta = 1).
#pragma once

#include "runtime/ForwardKernels.h"
#include "runtime/cuda/CudaDevice.h"

#include <cstdint>
#include <vector>

namespace shardc::runtime::cuda {

void embedding(CudaDevice &device, const KTensor &weight, const KTensor &ids, const KTensor &out);
void linear(CudaDevice &device, const KTensor &x, const KTensor &w, const KTensor *b,
            const KTensor &y);
void matmul(CudaDevice &device, const KTensor &a, const KTensor &b, const KTensor &c,
            MatmulLayout layout);
void binary(CudaDevice &device, BinaryOp op, const KTensor &a, const KTensor &b,
            const KTensor &out);
void activation(CudaDevice &device, Activation kind, const KTensor &x, const KTensor &y);
void layerNorm(CudaDevice &device, const KTensor &x, const KTensor *weight, const KTensor *bias,
               double eps, const KTensor &y);
void rmsNorm(CudaDevice &device, const KTensor &x, const KTensor *weight, double eps,
             const KTensor &y);
void softmax(CudaDevice &device, const KTensor &x, int64_t dim, const KTensor &y);
/// S (keys) up to kMaxSdpaKeys: one block per query row keeps its scores in
/// shared memory.
inline constexpr int64_t kMaxSdpaKeys = 8192;
void sdpa(CudaDevice &device, const KTensor &q, const KTensor &k, const KTensor &v,
          const KTensor *mask, const KTensor &o, bool causal, double scale);
void rope(CudaDevice &device, const KTensor &x, double theta, const KTensor &y);
void stridedCopy(CudaDevice &device, const KTensor &x, const std::vector<int64_t> &strides,
                 int64_t offset, const KTensor &y);
void cat(CudaDevice &device, const std::vector<KTensor> &inputs, int64_t dim, const KTensor &y);
/// Mean cross entropy (CudaLoss.cu): one block, deterministic; waits for
/// the device to report a target out of range.
void crossEntropy(CudaDevice &device, const KTensor &logits, const KTensor &targets,
                  int64_t ignoreIndex, const KTensor &loss);

}  // namespace shardc::runtime::cuda
