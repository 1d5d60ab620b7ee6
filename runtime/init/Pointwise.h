// Elementwise ops on init values (torch.nn.init's recipes chain these after
// a generator: trunc_normal is uniform -> erfinv -> mul -> add -> clamp).
#pragma once

#include "runtime/Plan.h"

#include <cstdint>

namespace shardc::runtime::init {

enum class PointwiseKind {
  Mul, Add, Sub, Div, Clamp, Erfinv, Sqrt, Neg,
  // Mamba-style init: dt = exp(uniform * span + low), then softplus's inverse.
  Exp, Log, Expm1, InverseSoftplus,
};
inline constexpr PointwiseKind kLastPointwiseKind = PointwiseKind::InverseSoftplus;

/// False for the kinds computed element by element in double (Exp, Log,
/// Expm1, InverseSoftplus: rare, small tensors): the vector kernels skip them.
inline bool hasVectorKernel(PointwiseKind kind) {
  return static_cast<int>(kind) <= static_cast<int>(PointwiseKind::Neg);
}

const char *pointwiseKindName(PointwiseKind kind);

/// In place over `count` elements of `dtype`: x*a, x+a, x-a, x/a,
/// clamp(x, min=a, max=b) (NaN stays NaN, as in torch), erfinv(x), sqrt(x), -x,
/// e^x, log x, e^x - 1, x + log(-expm1(-x)).
/// f32/f16/bf16 compute in float (halves rounded once to nearest even), f64
/// in double; erfinv is the one of InitMath.h, so CUDA can match it, and so
/// are exp, log, expm1 and softplus's inverse (computed in double, then
/// rounded once to float).
void applyPointwise(PointwiseKind kind, double a, double b, plan::DType dtype, void *data,
                    int64_t count, int threads = 1);

}  // namespace shardc::runtime::init
