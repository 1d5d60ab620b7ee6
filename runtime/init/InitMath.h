// The transcendental functions that init values depend on: log, sincos of a
// turn fraction, erfinv (float and double), exp/erf/erfc for the double
// erfinv's refinement, and the pointwise init ops exp, log, expm1 and
// softplus's inverse.
//
// Why our own and not libm: docs/design.md invariant 2 promises that CPU and CUDA
// produce identical bits. libm and CUDA's math library round differently, so
// every per-element transcendental is written here once, compiled by both
// the host compiler and nvcc (SHARDC_HOST_DEVICE), using only +, -, *, /,
// sqrt (IEEE-exact everywhere) and explicit fma. Compilers are free to fuse
// a separate `a * b + c` into an fma (GCC does by default in GNU mode, nvcc
// always), which would change bits between builds; so every multiply whose
// result feeds an add is written as an explicit fma, and no other a*b+c
// appears. The AVX2 kernels (Avx2Kernels.cpp) repeat these operation
// sequences lane by lane; the unit tests check they agree bit for bit.
//
// Domains: logF/logD take positive normal numbers (all the generators need);
// erfinv handles everything (NaN outside [-1, 1], +-inf at +-1), as do the
// *Any functions (torch's special values).
#pragma once

#include "runtime/Philox.h"  // SHARDC_HOST_DEVICE

#include <cstdint>

namespace shardc::runtime::init::math {

// ---- primitives ------------------------------------------------------------

SHARDC_HOST_DEVICE inline float fmaF(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return __builtin_fmaf(a, b, c);
#endif
}

SHARDC_HOST_DEVICE inline double fmaD(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
  return __fma_rn(a, b, c);
#else
  return __builtin_fma(a, b, c);
#endif
}

SHARDC_HOST_DEVICE inline float sqrtF(float x) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(x);
#else
  return __builtin_sqrtf(x);
#endif
}

SHARDC_HOST_DEVICE inline double sqrtD(double x) {
#if defined(__CUDA_ARCH__)
  return __dsqrt_rn(x);
#else
  return __builtin_sqrt(x);
#endif
}

SHARDC_HOST_DEVICE inline uint32_t bitsOf(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  return __builtin_bit_cast(uint32_t, x);
#endif
}

SHARDC_HOST_DEVICE inline float floatOf(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  return __builtin_bit_cast(float, bits);
#endif
}

SHARDC_HOST_DEVICE inline uint64_t bitsOf(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(x));
#else
  return __builtin_bit_cast(uint64_t, x);
#endif
}

SHARDC_HOST_DEVICE inline double doubleOf(uint64_t bits) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(bits));
#else
  return __builtin_bit_cast(double, bits);
#endif
}

inline constexpr float kInfF = __builtin_huge_valf();
inline constexpr double kInfD = __builtin_huge_val();
inline constexpr float kNanF = __builtin_nanf("");
inline constexpr double kNanD = __builtin_nan("");

// ---- float32 ---------------------------------------------------------------

// ln 2 split so that e * kLn2HiF is exact for any float exponent e.
inline constexpr float kLn2HiF = 0x1.62ep-1f;
inline constexpr float kLn2LoF = 0x1.0bfbe8p-15f;
inline constexpr uint32_t kSqrtHalfBitsF = 0x3f3504f3u;  // sqrt(0.5)

/// Natural log of a positive normal float, <= 2 ulp (measured in InitMathTest).
/// x = 2^e * m with m in [sqrt(1/2), sqrt(2)); log(m) = 2 atanh(s) with
/// s = (m-1)/(m+1), |s| < 0.172, as the odd series 2s + 2s^3/3 + ... + 2s^11/11.
SHARDC_HOST_DEVICE inline float logF(float x) {
  uint32_t shifted = bitsOf(x) - kSqrtHalfBitsF;
  int32_t e = static_cast<int32_t>(shifted) >> 23;
  float m = floatOf((shifted & 0x007fffffu) + kSqrtHalfBitsF);
  float f = m - 1.0f;  // exact (Sterbenz)
  float s = f / (2.0f + f);
  float z = s * s;
  float p = 2.0f / 11.0f;
  p = fmaF(p, z, 2.0f / 9.0f);
  p = fmaF(p, z, 2.0f / 7.0f);
  p = fmaF(p, z, 2.0f / 5.0f);
  p = fmaF(p, z, 2.0f / 3.0f);
  float tail = z * p;
  float log1pf = fmaF(s, tail, s + s);
  float ef = static_cast<float>(e);
  return fmaF(ef, kLn2HiF, fmaF(ef, kLn2LoF, log1pf));
}

/// Reduces a turn fraction given as a 24-bit integer m (angle = 2*pi*m/2^24)
/// to a quadrant q and an angle x in [-pi/4, pi/4): all integer arithmetic,
/// so the reduction is exact.
struct QuarterTurnF { float x; uint32_t quadrant; };
SHARDC_HOST_DEVICE inline QuarterTurnF reduceTurnF(uint32_t m24) {
  uint32_t k = (m24 + 0x200000u) >> 22;  // nearest quarter turn, 0..4
  int32_t rest = static_cast<int32_t>(m24) - static_cast<int32_t>(k << 22);  // [-2^21, 2^21)
  return {static_cast<float>(rest) * 0x1.921fb6p-22f, k & 3u};  // * (pi/2) / 2^22
}

/// sin and cos of x in [-pi/4, pi/4] (Taylor to x^11 / x^10; < 2 ulp).
SHARDC_HOST_DEVICE inline float sinKernelF(float x) {
  float z = x * x;
  float p = 1.0f / 362880.0f;
  p = fmaF(p, z, -1.0f / 5040.0f);
  p = fmaF(p, z, 1.0f / 120.0f);
  p = fmaF(p, z, -1.0f / 6.0f);
  return fmaF(x * z, p, x);
}
SHARDC_HOST_DEVICE inline float cosKernelF(float x) {
  float z = x * x;
  float p = -1.0f / 3628800.0f;
  p = fmaF(p, z, 1.0f / 40320.0f);
  p = fmaF(p, z, -1.0f / 720.0f);
  p = fmaF(p, z, 1.0f / 24.0f);
  p = fmaF(p, z, -0.5f);
  return fmaF(z, p, 1.0f);
}

/// sin and cos of 2*pi*m/2^24.
SHARDC_HOST_DEVICE inline void sinCosTurnF(uint32_t m24, float *sinOut, float *cosOut) {
  QuarterTurnF r = reduceTurnF(m24);
  float s = sinKernelF(r.x), c = cosKernelF(r.x);
  switch (r.quadrant) {
  case 0: *sinOut = s; *cosOut = c; break;
  case 1: *sinOut = c; *cosOut = -s; break;
  case 2: *sinOut = -s; *cosOut = -c; break;
  default: *sinOut = -c; *cosOut = s; break;
  }
}

/// Polynomials of M. Giles, "Approximating the erfinv function" (GPU Computing
/// Gems, 2011), single precision: w = -log((1-x)(1+x)); central (w < 5) and tail.
SHARDC_HOST_DEVICE inline float erfinvCentralF(float w) {
  w = w - 2.5f;
  float p = 2.81022636e-08f;
  p = fmaF(p, w, 3.43273939e-07f);
  p = fmaF(p, w, -3.5233877e-06f);
  p = fmaF(p, w, -4.39150654e-06f);
  p = fmaF(p, w, 0.00021858087f);
  p = fmaF(p, w, -0.00125372503f);
  p = fmaF(p, w, -0.00417768164f);
  p = fmaF(p, w, 0.246640727f);
  p = fmaF(p, w, 1.50140941f);
  return p;
}
SHARDC_HOST_DEVICE inline float erfinvTailF(float w) {
  w = sqrtF(w) - 3.0f;
  float p = -0.000200214257f;
  p = fmaF(p, w, 0.000100950558f);
  p = fmaF(p, w, 0.00134934322f);
  p = fmaF(p, w, -0.00367342844f);
  p = fmaF(p, w, 0.00573950773f);
  p = fmaF(p, w, -0.0076224613f);
  p = fmaF(p, w, 0.00943887047f);
  p = fmaF(p, w, 1.00167406f);
  p = fmaF(p, w, 2.83297682f);
  return p;
}
inline constexpr float kErfinvTailFromW = 5.0f;

/// erfinv for float; for |x| < 1 the operation sequence is the one the AVX2
/// kernel repeats: w, then the branch chosen by w < 5, then p * x.
SHARDC_HOST_DEVICE inline float erfinvF(float x) {
  float a = floatOf(bitsOf(x) & 0x7fffffffu);
  if (!(a < 1.0f)) return a == 1.0f ? floatOf(bitsOf(kInfF) | (bitsOf(x) & 0x80000000u)) : kNanF;
  float w = -logF((1.0f - x) * (1.0f + x));
  float p = w < kErfinvTailFromW ? erfinvCentralF(w) : erfinvTailF(w);
  return p * x;
}

// ---- float64 ---------------------------------------------------------------

inline constexpr double kLn2HiD = 0x1.62e42feep-1;  // e * hi exact for |e| < 2^20
inline constexpr double kLn2LoD = 0x1.a39ef35793c76p-33;
inline constexpr uint64_t kSqrtHalfBitsD = 0x3fe6a09e667f3bcdull;
inline constexpr double kSqrtPiD = 0x1.c5bf891b4ef6ap+0;
inline constexpr double kSqrtPiOver2D = 0x1.c5bf891b4ef6ap-1;

/// Natural log of a positive normal double (same scheme as logF, series to s^23).
SHARDC_HOST_DEVICE inline double logD(double x) {
  uint64_t shifted = bitsOf(x) - kSqrtHalfBitsD;
  int64_t e = static_cast<int64_t>(shifted) >> 52;
  double m = doubleOf((shifted & 0x000fffffffffffffull) + kSqrtHalfBitsD);
  double f = m - 1.0;
  double s = f / (2.0 + f);
  double z = s * s;
  double p = 2.0 / 23.0;
  for (int k = 10; k >= 1; --k) p = fmaD(p, z, 2.0 / (2 * k + 1));
  double tail = z * p;
  double log1pd = fmaD(s, tail, s + s);
  double ed = static_cast<double>(e);
  return fmaD(ed, kLn2HiD, fmaD(ed, kLn2LoD, log1pd));
}

/// e^x for x in [-745, 709]; 0 below. Taylor of degree 13 on |r| <= ln2/2.
SHARDC_HOST_DEVICE inline double expD(double x) {
  if (x < -745.0) return 0.0;
  constexpr double shifter = 0x1.8p52;
  double kf = fmaD(x, 0x1.71547652b82fep+0, shifter) - shifter;  // round(x / ln2)
  double r = fmaD(-kf, kLn2HiD, x);
  r = fmaD(-kf, kLn2LoD, r);
  double p = 1.0 / 6227020800.0;  // 1/13!
  double factorial = 6227020800.0;
  for (int n = 12; n >= 0; --n) {
    factorial /= (n + 1);  // exact: n! fits in a double for n <= 13
    p = fmaD(p, r, 1.0 / factorial);
  }
  int64_t k = static_cast<int64_t>(kf);
  int64_t k1 = k / 2, k2 = k - k1;  // two steps so 2^k may be subnormal
  double s1 = doubleOf(static_cast<uint64_t>(k1 + 1023) << 52);
  double s2 = doubleOf(static_cast<uint64_t>(k2 + 1023) << 52);
  return p * s1 * s2;
}

/// Turn reduction for a 53-bit numerator: angle = 2*pi*m/2^53.
struct QuarterTurnD { double x; uint32_t quadrant; };
SHARDC_HOST_DEVICE inline QuarterTurnD reduceTurnD(uint64_t m53) {
  uint64_t k = (m53 + (1ull << 50)) >> 51;
  int64_t rest = static_cast<int64_t>(m53) - static_cast<int64_t>(k << 51);
  return {static_cast<double>(rest) * 0x1.921fb54442d18p-51, static_cast<uint32_t>(k & 3u)};
}

SHARDC_HOST_DEVICE inline double sinKernelD(double x) {  // Taylor to x^17
  double z = x * x;
  double p = 1.0 / 355687428096000.0;  // 1/17!
  double factorial = 355687428096000.0;
  for (int n = 15; n >= 3; n -= 2) {
    factorial /= static_cast<double>((n + 1) * (n + 2));
    double c = 1.0 / factorial;
    p = fmaD(p, z, ((n / 2) % 2) ? -c : c);
  }
  return fmaD(x * z, p, x);
}
SHARDC_HOST_DEVICE inline double cosKernelD(double x) {  // Taylor to x^18
  double z = x * x;
  double p = -1.0 / 6402373705728000.0;  // -1/18!
  double factorial = 6402373705728000.0;
  for (int n = 16; n >= 2; n -= 2) {
    factorial /= static_cast<double>((n + 1) * (n + 2));
    double c = 1.0 / factorial;
    p = fmaD(p, z, ((n / 2) % 2) ? -c : c);
  }
  return fmaD(z, p, 1.0);
}

SHARDC_HOST_DEVICE inline void sinCosTurnD(uint64_t m53, double *sinOut, double *cosOut) {
  QuarterTurnD r = reduceTurnD(m53);
  double s = sinKernelD(r.x), c = cosKernelD(r.x);
  switch (r.quadrant) {
  case 0: *sinOut = s; *cosOut = c; break;
  case 1: *sinOut = c; *cosOut = -s; break;
  case 2: *sinOut = -s; *cosOut = -c; break;
  default: *sinOut = -c; *cosOut = s; break;
  }
}

/// erf(y) by its Taylor series (34 terms; used for 0 <= y < 1.2, where the
/// alternating sum cancels little).
SHARDC_HOST_DEVICE inline double erfSeriesD(double y) {
  double z = y * y;
  double sum = 0.0;
  // sum_{n} (-1)^n z^n / (n! (2n+1)), Horner from the top term.
  double inverseFactorial[34];
  inverseFactorial[0] = 1.0;
  for (int n = 1; n < 34; ++n) inverseFactorial[n] = inverseFactorial[n - 1] / n;
  for (int n = 33; n >= 0; --n) {
    double c = inverseFactorial[n] / (2 * n + 1);
    sum = fmaD(sum, -z, c);
  }
  return (y * sum) / kSqrtPiOver2D;
}

/// e^(-y*y) with the rounding error of y*y carried (matters for large y).
SHARDC_HOST_DEVICE inline double expMinusSquareD(double y) {
  double hi = y * y;
  double lo = fmaD(y, y, -hi);
  double e = expD(-hi);
  return fmaD(e, -lo, e);
}

/// erfc(y) for y > 0: 1 - series below 0.8 (erfc > 0.25 there, so no
/// cancellation), then the Laplace continued fraction evaluated bottom-up
/// with a fixed depth that converges to double precision (slowly near 0.8,
/// hence the larger depth there; measured in InitMathTest).
SHARDC_HOST_DEVICE inline double erfcD(double y) {
  if (y < 0.8) return 1.0 - erfSeriesD(y);
  int depth = y < 1.2 ? 400 : (y < 2.0 ? 160 : 120);
  double f = y;
  for (int n = depth; n >= 1; --n) f = y + (0.5 * n) / f;
  return expMinusSquareD(y) / (kSqrtPiD * f);
}

/// erf(y) for any y (host-side constants of trunc_normal use it, so they
/// do not depend on the platform's libm either).
SHARDC_HOST_DEVICE inline double erfD(double y) {
  double a = doubleOf(bitsOf(y) & 0x7fffffffffffffffull);
  if (!(a == a)) return y;
  double r = a < 1.2 ? erfSeriesD(a) : (a > 6.0 ? 1.0 : 1.0 - erfcD(a));
  return y < 0 ? -r : r;
}

/// erfinv in double: Giles' single-precision polynomial as a first guess
/// (asymptotic guess far in the tail), then Halley steps on erf (|t| <= 0.5)
/// or erfc (|t| > 0.5, with 1 - |t| exact). Within a few ulp (InitMathTest).
SHARDC_HOST_DEVICE inline double erfinvD(double t) {
  double a = doubleOf(bitsOf(t) & 0x7fffffffffffffffull);
  uint64_t sign = bitsOf(t) & 0x8000000000000000ull;
  if (!(a < 1.0)) return a == 1.0 ? doubleOf(bitsOf(kInfD) | sign) : kNanD;
  if (a == 0.0) return t;
  double c = 1.0 - a;  // exact for a >= 0.5, where it is used
  double w = -logD(c * (1.0 + a));
  double y;
  int steps = 1;
  if (w < 5.0) {
    y = static_cast<double>(erfinvCentralF(static_cast<float>(w))) * a;
  } else if (w < 16.0) {
    y = static_cast<double>(erfinvTailF(static_cast<float>(w))) * a;
  } else {
    // erfc(y) ~ e^(-y^2) / (y sqrt(pi)): fixed point y = sqrt(-log(c y sqrt(pi))).
    y = sqrtD(w);
    for (int i = 0; i < 3; ++i) y = sqrtD(-logD(c * y * kSqrtPiD));
    steps = 3;
  }
  for (int i = 0; i < steps; ++i) {
    double residual = a <= 0.5 ? a - erfSeriesD(y) : erfcD(y) - c;  // sign: f/f' below
    double d = -residual * kSqrtPiOver2D / expMinusSquareD(y);        // = f / f'
    y = y - d / fmaD(y, d, 1.0);
  }
  return doubleOf(bitsOf(y) | sign);
}

// ---- exp, log, expm1 and softplus's inverse on every input -----------------
// Pointwise init ops (Mamba's dt bias: exp of a scaled uniform draw, then
// softplus's inverse dt + log(-expm1(-dt)); Qwen3-Next's A_log: log of a
// uniform draw). Computed in double for both float and double values, with
// the special cases torch gives; a float result is the double one rounded
// once to nearest (the same cast on host and device).

inline constexpr double kExpOverflowD = 709.782712893384;  // e^x > DBL_MAX above
inline constexpr double kMinNormalD = 0x1p-1022;

/// Every NaN result as one bit pattern: x86 keeps an operand's NaN payload
/// through arithmetic and casts, CUDA gives its own canonical NaN, and
/// init values must be the same bits on both.
SHARDC_HOST_DEVICE inline double oneNanD(double r) { return r != r ? kNanD : r; }
SHARDC_HOST_DEVICE inline float oneNanF(float r) { return r != r ? kNanF : r; }

/// e^x: NaN stays NaN, +inf above the overflow threshold, 0 far below.
SHARDC_HOST_DEVICE inline double expAnyD(double x) {
  if (x != x) return kNanD;
  if (x > kExpOverflowD) return kInfD;
  return expD(x);
}

/// log x: NaN for x < 0 or NaN, -inf at +-0, +inf at +inf; subnormals scaled.
SHARDC_HOST_DEVICE inline double logAnyD(double x) {
  if (!(x >= 0.0)) return kNanD;
  if (x == 0.0) return -kInfD;
  if (x == kInfD) return kInfD;
  if (x < kMinNormalD) return fmaD(-54.0, kLn2HiD, fmaD(-54.0, kLn2LoD, logD(x * 0x1p54)));
  return logD(x);
}

/// e^x - 1 without the cancellation near 0: Taylor of degree 14 on
/// |x| < 0.35 (x * sum x^n / (n+1)!), exp(x) - 1 elsewhere.
SHARDC_HOST_DEVICE inline double expm1AnyD(double x) {
  if (x != x) return kNanD;
  double a = x < 0.0 ? -x : x;
  if (a >= 0.35) return x > kExpOverflowD ? kInfD : expD(x) - 1.0;
  double factorial = 87178291200.0;  // 14!
  double p = 1.0 / factorial;
  for (int n = 13; n >= 1; --n) {
    factorial /= (n + 1);  // exact: n! fits in a double for n <= 14
    p = fmaD(p, x, 1.0 / factorial);
  }
  return x * p;
}

/// Softplus's inverse as torch writes it: x + log(-expm1(-x)) (NaN for
/// x < 0, -inf at 0, +inf at +inf).
SHARDC_HOST_DEVICE inline double inverseSoftplusD(double x) {
  return oneNanD(x + logAnyD(-expm1AnyD(-x)));
}

SHARDC_HOST_DEVICE inline float expAnyF(float x) {
  return oneNanF(static_cast<float>(expAnyD(static_cast<double>(x))));
}
SHARDC_HOST_DEVICE inline float logAnyF(float x) {
  return oneNanF(static_cast<float>(logAnyD(static_cast<double>(x))));
}
SHARDC_HOST_DEVICE inline float expm1AnyF(float x) {
  return oneNanF(static_cast<float>(expm1AnyD(static_cast<double>(x))));
}
SHARDC_HOST_DEVICE inline float inverseSoftplusF(float x) {
  return oneNanF(static_cast<float>(inverseSoftplusD(static_cast<double>(x))));
}

}  // namespace shardc::runtime::init::math
