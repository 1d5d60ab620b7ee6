// The formulas of VectorMath.h and their run-time dispatch. Compiled with
// -ffp-contract=off (runtime/CMakeLists.txt): a*b+c stays two roundings in
// every instruction set, so the AVX-512, AVX2 and SSE2 loops and their scalar
// tails give the same bits. And with -fno-trapping-math: GCC turns the
// selects below into branches, and only converts them back to vector
// blends (AVX2, SSE2) when it may evaluate both sides; no kernel reads the
// floating-point exception flags.
//
// Each function is written once as a branch-free scalar inline (both sides
// of a select are computed, then one is kept) so that the loops below
// vectorize; the constants are Cephes' (exp, tanh) or fitted here by least
// squares in double against mpmath's erf (erf).
#include "runtime/cpu/VectorMath.h"

#include "runtime/init/CpuDispatch.h"

#include <atomic>
#include <cstring>

namespace shardc::runtime::cpu {
namespace {

inline float asFloat(int32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline float copySign(float magnitude, float sign) {
  int32_t m, s;
  std::memcpy(&m, &magnitude, 4);
  std::memcpy(&s, &sign, 4);
  return asFloat((m & 0x7fffffff) | (s & int32_t(0x80000000u)));
}

inline float absF(float x) { return copySign(x, 0.0f); }

/// Lower and upper bounds that keep NaN (a comparison with NaN is false).
inline float atLeast(float x, float lo) { return x < lo ? lo : x; }
inline float atMost(float x, float hi) { return x > hi ? hi : x; }

/// exp(x): x = n ln2 + r, |r| <= ln2 / 2, Cephes' degree-6 polynomial for
/// e^r, then 2^n applied as two exact powers of two (so results down to the
/// smallest denormal round once).
inline float expF(float x) {
  // NaN computes as 0 (no NaN reaches the int conversion) and is returned as is.
  const float xc = x != x ? 0.0f : atMost(atLeast(x, -104.0f), 89.0f);
  // round(x / ln2) by the 1.5 * 2^23 trick: exact for |v| < 2^22
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;  // ln2 in two parts
  const float z = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * z + r + 1.0f;
  const int32_t k = static_cast<int32_t>(n);
  const int32_t k1 = k >> 1, k2 = k - k1;  // each in [-75, 65]
  const float e = p * asFloat((k1 + 127) << 23) * asFloat((k2 + 127) << 23);
  return x != x ? x : e;
}

/// tanh(x): Cephes' odd polynomial below |x| = 0.625, else
/// 1 - 2 / (e^{2|x|} + 1) with the sign of x (|x| capped at 10: tanh(10)
/// rounds to 1).
inline float tanhF(float x) {
  const float a = absF(x);
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  const float e = expF(2.0f * atMost(a, 10.0f));
  const float large = 1.0f - 2.0f / (e + 1.0f);
  // tanh is odd: the sign of x, -0 included.
  const float r = copySign(a < 0.625f ? small : large, x);
  return x != x ? x : r;
}

/// erf(x): x P(x^2) below |x| = 1; above, 1 - e^{-x^2} Q(1/|x|) with the sign
/// of x (|x| capped at 4: erf(4) rounds to 1). P and Q: least-squares fits
/// in double (degree 6 and 8).
inline float erfF(float x) {
  const float a = absF(x);
  const float z = x * x;
  float p = 8.006874122656882e-05f;
  p = p * z - 0.0008053751080296934f;
  p = p * z + 0.005192957818508148f;
  p = p * z - 0.0268560703843832f;
  p = p * z + 0.11283634603023529f;
  p = p * z - 0.3761262893676758f;
  p = p * z + 1.128379225730896f;
  const float small = x * p;
  const float am = atMost(atLeast(a, 1.0f), 4.0f);
  const float t = 1.0f / am;
  float q = -0.010098984465003014f;
  q = q * t + 0.03119996190071106f;
  q = q * t + 0.019414380192756653f;
  q = q * t - 0.23834717273712158f;
  q = q * t + 0.4955395758152008f;
  q = q * t - 0.4715007543563843f;
  q = q * t + 0.042087357491254807f;
  q = q * t + 0.5590164661407471f;
  q = q * t + 0.0002726722741499543f;
  const float large = copySign(1.0f - expF(-(am * am)) * q, x);
  const float r = a < 1.0f ? small : large;
  return x != x ? x : r;
}

// The activations: the formulas the kernels used with libm (torch's).
inline float sigmoidF(float x) { return 1.0f / (1.0f + expF(-x)); }
inline float siluF(float x) { return x / (1.0f + expF(-x)); }
inline float geluErfF(float x) {
  return x * 0.5f * (1.0f + erfF(x * 0.70710678118654752440f));
}
inline float geluTanhF(float x) {
  const float inner = 0.79788456080286535588f * (x + 0.044715f * x * x * x);  // sqrt(2/pi)
  return 0.5f * x * (1.0f + tanhF(inner));
}

// One loop per function and instruction set: the body is the same text,
// compiled three times with different target attributes. y is x or does
// not overlap it, so no iteration depends on another (GCC's ivdep: no
// run-time overlap check that would send y == x to the scalar loop).
#if defined(__GNUC__) && !defined(__clang__)
#define SHARDC_IVDEP _Pragma("GCC ivdep")
#else
#define SHARDC_IVDEP
#endif
#define SHARDC_VEC_LOOP(EXPR) SHARDC_IVDEP for (int64_t i = 0; i < n; ++i) y[i] = EXPR;
#define SHARDC_VEC_LOOPS(SUFFIX, ATTR)                                                       \
  ATTR void apply##SUFFIX(VecFn fn, const float *x, float *y, int64_t n) {                  \
    switch (fn) {                                                                           \
    case VecFn::Exp: SHARDC_VEC_LOOP(expF(x[i])) return;            \
    case VecFn::Tanh: SHARDC_VEC_LOOP(tanhF(x[i])) return;          \
    case VecFn::Erf: SHARDC_VEC_LOOP(erfF(x[i])) return;            \
    case VecFn::Sigmoid: SHARDC_VEC_LOOP(sigmoidF(x[i])) return;    \
    case VecFn::Silu: SHARDC_VEC_LOOP(siluF(x[i])) return;          \
    case VecFn::GeluErf: SHARDC_VEC_LOOP(geluErfF(x[i])) return;    \
    case VecFn::GeluTanh: SHARDC_VEC_LOOP(geluTanhF(x[i])) return;  \
    }                                                                                       \
  }                                                                                         \
  ATTR void expShifted##SUFFIX(const float *x, float shift, float *y, int64_t n) {          \
    SHARDC_VEC_LOOP(expF(x[i] - shift))                                                     \
  }

SHARDC_VEC_LOOPS(Base, )
#if defined(__x86_64__)
SHARDC_VEC_LOOPS(Avx2, __attribute__((target("avx2"))))
SHARDC_VEC_LOOPS(Avx512, __attribute__((target("avx512f,avx512dq"))))
#endif

std::atomic<int> maxLevel{2};

int level() {
#if defined(__x86_64__)
  const int allowed = maxLevel.load(std::memory_order_relaxed);
  if (allowed >= 2 && init::useAvx512()) return 2;
  if (allowed >= 1 && init::useAvx2()) return 1;
#endif
  return 0;
}

}  // namespace

void vecApply(VecFn fn, const float *x, float *y, int64_t n) {
  switch (level()) {
#if defined(__x86_64__)
  case 2: return applyAvx512(fn, x, y, n);
  case 1: return applyAvx2(fn, x, y, n);
#endif
  default: return applyBase(fn, x, y, n);
  }
}

void vecExpShifted(const float *x, float shift, float *y, int64_t n) {
  switch (level()) {
#if defined(__x86_64__)
  case 2: return expShiftedAvx512(x, shift, y, n);
  case 1: return expShiftedAvx2(x, shift, y, n);
#endif
  default: return expShiftedBase(x, shift, y, n);
  }
}

const char *vecMathIsa() {
  switch (level()) {
  case 2: return "avx512";
  case 1: return "avx2";
  default: return "sse2";
  }
}

void setVecMathLevel(int level) { maxLevel.store(level, std::memory_order_relaxed); }

}  // namespace shardc::runtime::cpu
