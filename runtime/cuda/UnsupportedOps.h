// The ops the CUDA backend has no kernel for: the one place this is stated
// (CudaBackend::unsupportedOps returns it; docs/ops.md and docs/gpu.md list
// it, and a CPU-only unit test checks docs/ops.md against it). No CUDA
// header is included, so that test builds without the toolkit.
//
// orthogonal and norm_of run their CPU kernels on the host and copy the
// result over (CudaBackend). An op added to the table without a CUDA kernel
// is listed here; none is now (embedding_backward got its kernel on
// 2026-12-04, CudaIndex.cu).
#pragma once

#include "runtime/OpTable.h"

#include <array>

namespace shardc::runtime::cuda {

inline constexpr std::array<plan::OpCode, 0> kCudaUnsupportedOps{};

}  // namespace shardc::runtime::cuda
