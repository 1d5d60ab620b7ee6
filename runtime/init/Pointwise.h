// Elementwise ops on init values (torch.nn.init's recipes chain these after
// a generator: trunc_normal is uniform -> erfinv -> mul -> add -> clamp).
#pragma once

#include "runtime/Plan.h"

#include <cstdint>

namespace shardc::runtime::init {

enum class PointwiseKind { Mul, Add, Sub, Div, Clamp, Erfinv, Sqrt, Neg };

const char *pointwiseKindName(PointwiseKind kind);

/// In place over `count` elements of `dtype`: x*a, x+a, x-a, x/a,
/// clamp(x, min=a, max=b) (NaN stays NaN, as in torch), erfinv(x), sqrt(x), -x.
/// f32/f16/bf16 compute in float (halves rounded once to nearest even), f64
/// in double; erfinv is the one of InitMath.h, so CUDA can match it.
void applyPointwise(PointwiseKind kind, double a, double b, plan::DType dtype, void *data,
                    int64_t count, int threads = 1);

}  // namespace shardc::runtime::init
