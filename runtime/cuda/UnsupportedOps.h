// The ops the CUDA backend has no kernel for: the one place this is stated
// (CudaBackend::unsupportedOps returns it; docs/ops.md and docs/gpu.md list
// it, and a CPU-only unit test checks docs/ops.md against it). No CUDA
// header is included, so that test builds without the toolkit.
//
// orthogonal and norm_of run their CPU kernels on the host and copy the
// result over (CudaBackend). An op added to the table without a CUDA kernel
// is listed here. grad_norm (gradient clipping's global norm, 2026-12-05)
// is: its exact sum gathers a few hundred words per rank, and a device
// communicator needs those in device memory the plan's workspace does not
// size yet (workspace rules receive the world size since all_reduce_sum,
// so grad_norm can now get one). The steps' clipping itself has its CUDA
// code. moe_experts_backward, moe_experts_hidden and moe_experts_gated_grad
// (mixture-of-experts training, 2026-12-05/06) have CPU kernels only: a
// CUDA one would regroup the routed rows as CudaMoe.cu does and run the backward's GEMMs through
// cuBLAS, and it is not written until a GPU can run it. Nor is max_pool_backward's (2026-12-05): a
// deterministic one would have each input element sum, in output order, the gradients of the
// windows whose maximum it holds. grid_sample_backward's neither (2026-12-06): its input
// gradient scatters each output's taps, so a deterministic kernel would sort the taps by the
// pixel they land on, as the CPU kernel's one task per plane does in output order.
// linear_cross_entropy and its backward (a language model's head and loss
// fused, 2026-12-07) neither: on the GPU they would be cuBLAS calls per
// block of rows around the device's softmax and cross-entropy kernels; until
// a GPU can run them, a graph keeps its linear and cross_entropy there
// (compiler/FuseLinearCrossEntropy.h fuses only when asked). sdpa_backward
// (attention's gradient a block of queries at a time, 2026-12-07) runs its
// CPU kernel on the host, as orthogonal does (CudaBackend::sdpaBackward).
#pragma once

#include "runtime/OpTable.h"

#include <array>

namespace shardc::runtime::cuda {

inline constexpr std::array<plan::OpCode, 8> kCudaUnsupportedOps{
    plan::OpCode::GradNorm,           plan::OpCode::MoeExpertsBackward,
    plan::OpCode::MoeExpertsHidden,   plan::OpCode::MoeExpertsGatedGrad,
    plan::OpCode::MaxPoolBackward,    plan::OpCode::GridSampleBackward,
    plan::OpCode::LinearCrossEntropy, plan::OpCode::LinearCrossEntropyBackward};

}  // namespace shardc::runtime::cuda
