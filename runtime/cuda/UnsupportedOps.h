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
    plan::OpCode::CrossEntropy,  // no kernel yet
    // The op families (OpTable.def's SHARDC_FAMILY_OP): no CUDA kernels yet.
    plan::OpCode::Conv,
    plan::OpCode::MaxPool,
    plan::OpCode::AvgPool,
    plan::OpCode::AdaptiveAvgPool,
    plan::OpCode::AdaptiveMaxPool,
    plan::OpCode::BatchNorm,
    plan::OpCode::GroupNorm,
    plan::OpCode::Sum,
    plan::OpCode::Mean,
    plan::OpCode::Amax,
    plan::OpCode::Amin,
    plan::OpCode::Var,
    plan::OpCode::Argmax,
    plan::OpCode::Argmin,
    plan::OpCode::Sigmoid,
    plan::OpCode::Tanh,
    plan::OpCode::Exp,
    plan::OpCode::Log,
    plan::OpCode::SqrtOut,
    plan::OpCode::Rsqrt,
    plan::OpCode::NegOut,
    plan::OpCode::Abs,
    plan::OpCode::Erf,
    plan::OpCode::Sin,
    plan::OpCode::Cos,
    plan::OpCode::Reciprocal,
    plan::OpCode::Hardswish,
    plan::OpCode::Hardsigmoid,
    plan::OpCode::Mish,
    plan::OpCode::ClampOut,
    plan::OpCode::LeakyRelu,
    plan::OpCode::Elu,
    plan::OpCode::PowScalar,
    plan::OpCode::Softplus,
};

}  // namespace shardc::runtime::cuda
