// The ops the CUDA backend has no kernel for: the one place this is stated
// (CudaBackend::unsupportedOps returns it; docs/ops.md and docs/gpu.md list
// it, and a CPU-only unit test checks docs/ops.md against it). No CUDA
// header is included, so that test builds without the toolkit.
#pragma once

#include "runtime/OpTable.h"

namespace shardc::runtime::cuda {

inline constexpr plan::OpCode kCudaUnsupportedOps[] = {
    plan::OpCode::Orthogonal,    // Householder QR runs on the host only
    plan::OpCode::NormOf,        // derived init (weight norm): host kernel only
};

}  // namespace shardc::runtime::cuda
