// AVX-512 versions of the float32-path block kernel and the float pointwise
// kernel: Avx2Kernels.cpp with 16 lanes instead of 8. Same rules: compiled
// for baseline x86-64 with per-function target attributes, called only when
// the CPU has AVX-512F/DQ (useAvx512()), and every lane repeats the scalar
// operation sequence of InitMath.h / Recipes.h with the same explicit fmas
// and the same min/max operand order, so the bits are identical to the
// scalar and AVX2 kernels (InitGeneratorsTest, InitRngVectorsTest).
#include "runtime/init/BlockKernels.h"
#include "runtime/init/PointwiseKernels.h"

#if defined(__x86_64__)

// GCC 12's AVX-512 headers start shifts from _mm512_undefined_*, which its
// -Wmaybe-uninitialized flags once inlined (GCC bug 105593): not our code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <cstring>

#define SHARDC_AVX512 __attribute__((target("avx512f,avx512dq,fma")))

namespace shardc::runtime::init {
namespace {

struct Lanes4 { __m512i w[4]; };

SHARDC_AVX512 inline void mulHiLo(__m512i a, __m512i m, __m512i *hi, __m512i *lo) {
  __m512i even = _mm512_mul_epu32(a, m);
  __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  *lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
  *hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
}

/// Philox4x32-10 of blocks firstBlock .. firstBlock + 16*kSets - 1: set s,
/// lane j = block firstBlock + 16*s + j (two sets hide multiply latency).
constexpr int kSets = kAvx512BlocksPerStep / 16;
SHARDC_AVX512 inline void philoxSets(const RngStream &stream, uint64_t firstBlock, Lanes4 *out) {
  __m512i c0[kSets], c1[kSets], c2[kSets], c3[kSets];
  const __m512i laneIndex =
      _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  for (int set = 0; set < kSets; ++set) {
    // Block numbers as 64-bit values split into lo/hi words; the carry of
    // the low word into the high one is handled per lane.
    uint64_t base = firstBlock + static_cast<uint64_t>(16 * set);
    __m512i lo = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(base))),
                                  laneIndex);
    __mmask16 carry = _mm512_cmplt_epu32_mask(lo, _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(base))));
    __m512i hi = _mm512_mask_add_epi32(_mm512_set1_epi32(static_cast<int>(base >> 32)), carry,
                                       _mm512_set1_epi32(static_cast<int>(base >> 32)),
                                       _mm512_set1_epi32(1));
    c0[set] = lo;
    c1[set] = hi;
    c2[set] = _mm512_set1_epi32(static_cast<int>(stream.streamHash));
    c3[set] = _mm512_set1_epi32(static_cast<int>(stream.position));
  }
  const __m512i m0 = _mm512_set1_epi32(static_cast<int>(philox::kM0));
  const __m512i m1 = _mm512_set1_epi32(static_cast<int>(philox::kM1));
  uint32_t k0 = stream.key0, k1 = stream.key1;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) { k0 += philox::kW0; k1 += philox::kW1; }
    const __m512i key0 = _mm512_set1_epi32(static_cast<int>(k0));
    const __m512i key1 = _mm512_set1_epi32(static_cast<int>(k1));
    for (int set = 0; set < kSets; ++set) {
      __m512i hi0, lo0, hi1, lo1;
      mulHiLo(c0[set], m0, &hi0, &lo0);
      mulHiLo(c2[set], m1, &hi1, &lo1);
      c0[set] = _mm512_xor_si512(_mm512_xor_si512(hi1, c1[set]), key0);
      c2[set] = _mm512_xor_si512(_mm512_xor_si512(hi0, c3[set]), key1);
      c1[set] = lo1;
      c3[set] = lo0;
    }
  }
  for (int set = 0; set < kSets; ++set) out[set] = {{c0[set], c1[set], c2[set], c3[set]}};
}

SHARDC_AVX512 inline __m512 set1(float v) { return _mm512_set1_ps(v); }
SHARDC_AVX512 inline __m512 unitF16(__m512i w) {
  return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(w, 8)), set1(0x1p-24f));
}
SHARDC_AVX512 inline __m512 unitOpenZeroF16(__m512i w) {
  __m512i m = _mm512_add_epi32(_mm512_srli_epi32(w, 8), _mm512_set1_epi32(1));
  return _mm512_mul_ps(_mm512_cvtepi32_ps(m), set1(0x1p-24f));
}
SHARDC_AVX512 inline __m512 fma16(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
SHARDC_AVX512 inline __m512 neg16(__m512 x) {
  return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN)));
}

SHARDC_AVX512 inline __m512 logF16(__m512 x) {
  const __m512i sqrtHalf = _mm512_set1_epi32(static_cast<int>(math::kSqrtHalfBitsF));
  __m512i shifted = _mm512_sub_epi32(_mm512_castps_si512(x), sqrtHalf);
  __m512i e = _mm512_srai_epi32(shifted, 23);
  __m512 m = _mm512_castsi512_ps(
      _mm512_add_epi32(_mm512_and_si512(shifted, _mm512_set1_epi32(0x007fffff)), sqrtHalf));
  __m512 f = _mm512_sub_ps(m, set1(1.0f));
  __m512 s = _mm512_div_ps(f, _mm512_add_ps(set1(2.0f), f));
  __m512 z = _mm512_mul_ps(s, s);
  __m512 p = set1(2.0f / 11.0f);
  p = fma16(p, z, set1(2.0f / 9.0f));
  p = fma16(p, z, set1(2.0f / 7.0f));
  p = fma16(p, z, set1(2.0f / 5.0f));
  p = fma16(p, z, set1(2.0f / 3.0f));
  __m512 tail = _mm512_mul_ps(z, p);
  __m512 log1pf = fma16(s, tail, _mm512_add_ps(s, s));
  __m512 ef = _mm512_cvtepi32_ps(e);
  return fma16(ef, set1(math::kLn2HiF), fma16(ef, set1(math::kLn2LoF), log1pf));
}

SHARDC_AVX512 inline void sinCosTurnF16(__m512i word, __m512 *sinOut, __m512 *cosOut) {
  __m512i m = _mm512_srli_epi32(word, 8);
  __m512i k = _mm512_srli_epi32(_mm512_add_epi32(m, _mm512_set1_epi32(0x200000)), 22);
  __m512i rest = _mm512_sub_epi32(m, _mm512_slli_epi32(k, 22));
  __m512 x = _mm512_mul_ps(_mm512_cvtepi32_ps(rest), set1(0x1.921fb6p-22f));
  __m512 z = _mm512_mul_ps(x, x);
  __m512 ps = set1(1.0f / 362880.0f);
  ps = fma16(ps, z, set1(-1.0f / 5040.0f));
  ps = fma16(ps, z, set1(1.0f / 120.0f));
  ps = fma16(ps, z, set1(-1.0f / 6.0f));
  __m512 s = fma16(_mm512_mul_ps(x, z), ps, x);
  __m512 pc = set1(-1.0f / 3628800.0f);
  pc = fma16(pc, z, set1(1.0f / 40320.0f));
  pc = fma16(pc, z, set1(-1.0f / 720.0f));
  pc = fma16(pc, z, set1(1.0f / 24.0f));
  pc = fma16(pc, z, set1(-0.5f));
  __m512 c = fma16(z, pc, set1(1.0f));
  // Quadrant q = k & 3: q odd swaps sin and cos; q in {2,3} negates sin,
  // q in {1,2} negates cos (the scalar switch in InitMath.h).
  __m512i q = _mm512_and_si512(k, _mm512_set1_epi32(3));
  __mmask16 swap = _mm512_test_epi32_mask(q, _mm512_set1_epi32(1));
  __m512i sinSign = _mm512_slli_epi32(_mm512_and_si512(q, _mm512_set1_epi32(2)), 30);
  __m512i cosSign = _mm512_slli_epi32(
      _mm512_and_si512(_mm512_add_epi32(q, _mm512_set1_epi32(1)), _mm512_set1_epi32(2)), 30);
  *sinOut = _mm512_castsi512_ps(
      _mm512_xor_si512(_mm512_castps_si512(_mm512_mask_blend_ps(swap, s, c)), sinSign));
  *cosOut = _mm512_castsi512_ps(
      _mm512_xor_si512(_mm512_castps_si512(_mm512_mask_blend_ps(swap, c, s)), cosSign));
}

SHARDC_AVX512 inline __m512 erfinvCentralF16(__m512 w) {
  w = _mm512_sub_ps(w, set1(2.5f));
  __m512 p = set1(2.81022636e-08f);
  p = fma16(p, w, set1(3.43273939e-07f));
  p = fma16(p, w, set1(-3.5233877e-06f));
  p = fma16(p, w, set1(-4.39150654e-06f));
  p = fma16(p, w, set1(0.00021858087f));
  p = fma16(p, w, set1(-0.00125372503f));
  p = fma16(p, w, set1(-0.00417768164f));
  p = fma16(p, w, set1(0.246640727f));
  p = fma16(p, w, set1(1.50140941f));
  return p;
}
SHARDC_AVX512 inline __m512 erfinvTailF16(__m512 w) {
  w = _mm512_sub_ps(_mm512_sqrt_ps(w), set1(3.0f));
  __m512 p = set1(-0.000200214257f);
  p = fma16(p, w, set1(0.000100950558f));
  p = fma16(p, w, set1(0.00134934322f));
  p = fma16(p, w, set1(-0.00367342844f));
  p = fma16(p, w, set1(0.00573950773f));
  p = fma16(p, w, set1(-0.0076224613f));
  p = fma16(p, w, set1(0.00943887047f));
  p = fma16(p, w, set1(1.00167406f));
  p = fma16(p, w, set1(2.83297682f));
  return p;
}

SHARDC_AVX512 inline __m512 erfinvF16(__m512 x) {
  const __m512 one = set1(1.0f);
  __m512 a = _mm512_abs_ps(x);
  __m512 w = neg16(logF16(_mm512_mul_ps(_mm512_sub_ps(one, x), _mm512_add_ps(one, x))));
  __mmask16 central = _mm512_cmp_ps_mask(w, set1(math::kErfinvTailFromW), _CMP_LT_OQ);
  __m512 p = erfinvCentralF16(w);
  if (central != 0xffff)  // the tail is rare: skip it when no lane needs it
    p = _mm512_mask_blend_ps(central, erfinvTailF16(w), p);
  __m512 r = _mm512_mul_ps(p, x);
  // |x| == 1 -> +-inf, |x| > 1 or NaN -> NaN, as the scalar early return.
  __mmask16 inside = _mm512_cmp_ps_mask(a, one, _CMP_LT_OQ);
  __mmask16 edge = _mm512_cmp_ps_mask(a, one, _CMP_EQ_OQ);
  __m512i signBit = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN));
  __m512 signedInf = _mm512_castsi512_ps(
      _mm512_or_si512(_mm512_castps_si512(set1(math::kInfF)), signBit));
  __m512 special = _mm512_mask_blend_ps(
      edge, _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000)), signedInf);
  return _mm512_mask_blend_ps(inside, special, r);
}

/// 4 vectors of 16 lanes (lane j = block j, vector k = word k) -> 64 floats
/// in element order (block 0 words 0..3, block 1 words 0..3, ...): a 4x4
/// transpose inside each 128-bit lane, then one of the 128-bit lanes.
SHARDC_AVX512 inline void storeTransposed(__m512 v0, __m512 v1, __m512 v2, __m512 v3, float *out) {
  __m512 t0 = _mm512_unpacklo_ps(v0, v1), t1 = _mm512_unpackhi_ps(v0, v1);
  __m512 t2 = _mm512_unpacklo_ps(v2, v3), t3 = _mm512_unpackhi_ps(v2, v3);
  // Lane L of bK holds block 4L + K.
  __m512 b0 = _mm512_shuffle_ps(t0, t2, 0x44), b1 = _mm512_shuffle_ps(t0, t2, 0xEE);
  __m512 b2 = _mm512_shuffle_ps(t1, t3, 0x44), b3 = _mm512_shuffle_ps(t1, t3, 0xEE);
  __m512 x0 = _mm512_shuffle_f32x4(b0, b1, 0x44), x1 = _mm512_shuffle_f32x4(b2, b3, 0x44);
  __m512 y0 = _mm512_shuffle_f32x4(b0, b1, 0xEE), y1 = _mm512_shuffle_f32x4(b2, b3, 0xEE);
  _mm512_storeu_ps(out + 0, _mm512_shuffle_f32x4(x0, x1, 0x88));
  _mm512_storeu_ps(out + 16, _mm512_shuffle_f32x4(x0, x1, 0xDD));
  _mm512_storeu_ps(out + 32, _mm512_shuffle_f32x4(y0, y1, 0x88));
  _mm512_storeu_ps(out + 48, _mm512_shuffle_f32x4(y0, y1, 0xDD));
}

SHARDC_AVX512 void uniformSteps(const PreparedGenerator &g, uint64_t firstBlock, int64_t steps,
                                float *out) {
  const __m512 span = set1(g.uniformF.span), low = set1(g.uniformF.low);
  const __m512 cap = set1(g.uniformF.cap);
  for (int64_t step = 0; step < steps; ++step, firstBlock += kAvx512BlocksPerStep) {
    Lanes4 sets[kSets];
    philoxSets(g.stream, firstBlock, sets);
    for (int set = 0; set < kSets; ++set, out += 64) {
      const Lanes4 &w = sets[set];
      __m512 v[4];
      for (int k = 0; k < 4; ++k) v[k] = _mm512_min_ps(fma16(span, unitF16(w.w[k]), low), cap);
      storeTransposed(v[0], v[1], v[2], v[3], out);
    }
  }
}

SHARDC_AVX512 void normalSteps(const PreparedGenerator &g, uint64_t firstBlock, int64_t steps,
                               float *out) {
  const __m512 stdv = set1(g.normalF.std), mean = set1(g.normalF.mean);
  for (int64_t step = 0; step < steps; ++step, firstBlock += kAvx512BlocksPerStep) {
    Lanes4 sets[kSets];
    philoxSets(g.stream, firstBlock, sets);
    for (int set = 0; set < kSets; ++set, out += 64) {
      const Lanes4 &w = sets[set];
      __m512 v[4];
      for (int pair = 0; pair < 2; ++pair) {
        __m512 u1 = unitOpenZeroF16(w.w[2 * pair]);
        __m512 r = _mm512_sqrt_ps(_mm512_mul_ps(set1(-2.0f), logF16(u1)));
        __m512 s, c;
        sinCosTurnF16(w.w[2 * pair + 1], &s, &c);
        v[2 * pair] = fma16(stdv, _mm512_mul_ps(r, c), mean);
        v[2 * pair + 1] = fma16(stdv, _mm512_mul_ps(r, s), mean);
      }
      storeTransposed(v[0], v[1], v[2], v[3], out);
    }
  }
}

SHARDC_AVX512 void truncNormalSteps(const PreparedGenerator &g, uint64_t firstBlock,
                                    int64_t steps, float *out) {
  const TruncNormalConstants<float> &c = g.truncF;
  const __m512 spanT = set1(c.spanT), lowT = set1(c.lowT);
  const __m512 scale = set1(c.scale), mean = set1(c.mean);
  const __m512 a = set1(c.a), b = set1(c.b);
  const __m512 one = set1(1.0f), minusOne = set1(-1.0f);
  for (int64_t step = 0; step < steps; ++step, firstBlock += kAvx512BlocksPerStep) {
    Lanes4 sets[kSets];
    philoxSets(g.stream, firstBlock, sets);
    for (int set = 0; set < kSets; ++set, out += 64) {
      const Lanes4 &w = sets[set];
      __m512 v[4];
      for (int k = 0; k < 4; ++k) {
        __m512 t = fma16(spanT, unitF16(w.w[k]), lowT);
        t = _mm512_max_ps(minusOne, _mm512_min_ps(one, t));
        __m512 x = fma16(erfinvF16(t), scale, mean);
        v[k] = _mm512_min_ps(b, _mm512_max_ps(a, x));
      }
      storeTransposed(v[0], v[1], v[2], v[3], out);
    }
  }
}

SHARDC_AVX512 inline __m512 pointwise16(PointwiseKind kind, __m512 av, __m512 bv, __m512 x) {
  switch (kind) {
  case PointwiseKind::Mul: return _mm512_mul_ps(x, av);
  case PointwiseKind::Add: return _mm512_add_ps(x, av);
  case PointwiseKind::Sub: return _mm512_sub_ps(x, av);
  case PointwiseKind::Div: return _mm512_div_ps(x, av);
  case PointwiseKind::Clamp: return _mm512_min_ps(bv, _mm512_max_ps(av, x));  // NaN x stays x
  case PointwiseKind::Erfinv: return erfinvF16(x);
  case PointwiseKind::Sqrt: return _mm512_sqrt_ps(x);
  case PointwiseKind::Neg: return neg16(x);
  }
  return x;
}

}  // namespace

SHARDC_AVX512 void avx512BlocksF(const PreparedGenerator &g, uint64_t firstBlock, int64_t blocks,
                                 float *out) {
  int64_t steps = blocks / kAvx512BlocksPerStep;
  switch (g.kind) {
  case GeneratorKind::Uniform: uniformSteps(g, firstBlock, steps, out); break;
  case GeneratorKind::Normal: normalSteps(g, firstBlock, steps, out); break;
  case GeneratorKind::TruncNormal: truncNormalSteps(g, firstBlock, steps, out); break;
  default: break;
  }
}

SHARDC_AVX512 void avx512PointwiseF(PointwiseKind kind, float a, float b, float *data,
                                    int64_t count) {
  const __m512 av = set1(a), bv = set1(b);
  int64_t k = 0;
  for (; k + 16 <= count; k += 16)
    _mm512_storeu_ps(data + k, pointwise16(kind, av, bv, _mm512_loadu_ps(data + k)));
  if (k < count) {  // the tail under a mask, still on the vector path
    __mmask16 tail = static_cast<__mmask16>((1u << (count - k)) - 1);
    __m512 x = _mm512_maskz_loadu_ps(tail, data + k);
    _mm512_mask_storeu_ps(data + k, tail, pointwise16(kind, av, bv, x));
  }
}

}  // namespace shardc::runtime::init

#else  // not x86-64: useAvx512() is always false, these are never called

namespace shardc::runtime::init {
void avx512BlocksF(const PreparedGenerator &g, uint64_t firstBlock, int64_t blocks, float *out) {
  scalarBlocksF(g, firstBlock, blocks, out);
}
void avx512PointwiseF(PointwiseKind kind, float a, float b, float *data, int64_t count) {
  scalarPointwiseF(kind, a, b, data, count);
}
}  // namespace shardc::runtime::init

#endif
