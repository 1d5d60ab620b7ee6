// im2col for the CPU's convolution kernels (runtime/cpu/ConvKernels.cpp):
// the convolution's input rearranged so that one sgemm computes it, the
// forward (W x col) and the weight's gradient (grad x col^T) alike.
#pragma once

#include "runtime/ConvGeometry.h"
#include "runtime/Plan.h"

#include <cstdint>

namespace shardc::runtime::cpu {

/// Rows [r0, r1) of the column matrix of the output pixels [p0, p0 + P) of
/// one sample-group, as floats, into col (row r at col + (r - r0) * ld):
/// r = ((ci * kd + kz) * kh + ki) * kw + kj; pixel p = (od * OH + oh) * OW + ow;
/// zero where the window reads padding. `plane0` is the element offset of
/// the group's first input channel in x (of `dtype`).
void im2col(const ConvGeometry &g, plan::DType dtype, const void *x, int64_t plane0, int64_t p0,
            int64_t P, int64_t r0, int64_t r1, float *col, int64_t ld);

}  // namespace shardc::runtime::cpu
