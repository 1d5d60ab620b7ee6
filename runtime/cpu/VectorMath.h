// Vectorizable float32 exp, tanh, erf and the activations built on them
// (sigmoid, silu, both GELUs) for the forward kernels. libm's expf/tanhf/erff
// are scalar calls (20-30 ns per element here): GPT-2's GELU took as long as
// all its matmuls. These are branch-free polynomials that the compiler turns
// into SSE2 / AVX2 / AVX-512 loops (VectorMath.cpp picks the widest the CPU
// has at run time, as runtime/init/CpuDispatch does).
//
// Accuracy, float32 in and out, against double-precision libm rounded to
// float (every 7th float of the range, about 3e8 points, measured on this
// machine; test/unit/VectorMathTest.cpp asserts exp 1, tanh 2, erf 3 ulp on
// a sparser sweep):
//   exp      1 ulp over [-104, 89] (denormal results included), +inf above
//            88.72, 0 below -103.97
//   tanh     1 ulp over [-12, 12]
//   erf      3 ulp over [-6, 6] (the worst next to |x| = 1)
//   sigmoid, silu, gelu: the same float formulas as before with these in
//            place of libm's expf/tanhf/erff: within 2e-6 relative (plus
//            1e-7 absolute where 1 + erf or 1 + tanh cancels) of the double
//            formula
// NaN in gives NaN out; +-inf give the limits. The results do not depend on
// which instruction set ran or where an element sits in the array: the file
// is compiled without floating-point contraction (no fused multiply-add), so
// every lane and the scalar tail round the same operations the same way.
#pragma once

#include <cstdint>

namespace shardc::runtime::cpu {

enum class VecFn { Exp, Tanh, Erf, Sigmoid, Silu, GeluErf, GeluTanh };

/// y[i] = fn(x[i]) for i in [0, n); y may equal x.
void vecApply(VecFn fn, const float *x, float *y, int64_t n);

/// y[i] = exp(x[i] - shift) for i in [0, n) (softmax's numerator); y may equal x.
void vecExpShifted(const float *x, float shift, float *y, int64_t n);

/// The instruction set vecApply uses on this CPU: "avx512", "avx2" or "sse2".
const char *vecMathIsa();

/// Test hook: the widest instruction set vecApply may use (2 AVX-512,
/// 1 AVX2, 0 the baseline); the CPU's own limit still applies.
void setVecMathLevel(int level);

}  // namespace shardc::runtime::cpu
