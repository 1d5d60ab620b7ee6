// Float kernels of the pointwise ops: the scalar reference and the AVX2 one
// (same bits). Half types are staged through float by Pointwise.cpp.
#pragma once

#include "runtime/init/Pointwise.h"

#include <cstdint>

namespace shardc::runtime::init {

/// x <- op(x) for count floats; a, b as in applyPointwise, already in float.
void scalarPointwiseF(PointwiseKind kind, float a, float b, float *data, int64_t count);
/// The same with AVX2+FMA; any count. Call only when useAvx2().
void avx2PointwiseF(PointwiseKind kind, float a, float b, float *data, int64_t count);
/// The same with AVX-512; any count. Call only when useAvx512().
void avx512PointwiseF(PointwiseKind kind, float a, float b, float *data, int64_t count);

/// The one-element definition both kernels follow.
float pointwiseValueF(PointwiseKind kind, float a, float b, float x);
double pointwiseValueD(PointwiseKind kind, double a, double b, double x);

}  // namespace shardc::runtime::init
