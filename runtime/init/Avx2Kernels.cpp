// AVX2+FMA versions of the float32-path block kernel and the float pointwise
// kernel. Compiled for baseline x86-64 with per-function target attributes
// (no -mavx2 on the build), called only when the CPU has AVX2 and FMA.
//
// Each function repeats the scalar operation sequence of InitMath.h /
// Recipes.h lane by lane, with the same explicit fmas and the same select
// semantics (min/max operand order chosen to match the scalar ternaries), so
// the bits are identical; InitKernelsTest checks it. No scalar math is
// called from here: GCC could inline it into these FMA-enabled functions and
// contract its a*b+c, which the scalar build does not do.
#include "runtime/init/BlockKernels.h"
#include "runtime/init/PointwiseKernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#define SHARDC_AVX2 __attribute__((target("avx2,fma")))

namespace shardc::runtime::init {
namespace {

struct Lanes4 { __m256i w[4]; };

/// lo and hi 32 bits of the 32x32 -> 64 products a * m in each of 8 lanes:
/// _mm256_mul_epu32 multiplies the even lanes; the odd ones are shifted down.
SHARDC_AVX2 inline void mulHiLo(__m256i a, __m256i m, __m256i *hi, __m256i *lo) {
  __m256i even = _mm256_mul_epu32(a, m);
  __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

/// Philox4x32-10 of blocks firstBlock .. firstBlock + 8*kSets - 1: set s,
/// lane j = block firstBlock + 8*s + j. Two independent sets interleave so
/// the multiply latency of one hides behind the other (the rounds of one
/// set are a dependency chain).
constexpr int kSets = kAvx2BlocksPerStep / 8;
SHARDC_AVX2 inline void philoxSets(const RngStream &stream, uint64_t firstBlock, Lanes4 *out) {
  __m256i c0[kSets], c1[kSets], c2[kSets], c3[kSets];
  for (int set = 0; set < kSets; ++set) {
    alignas(32) uint32_t lo[8], hi[8];
    for (int j = 0; j < 8; ++j) {
      uint64_t block = firstBlock + static_cast<uint64_t>(8 * set + j);
      lo[j] = static_cast<uint32_t>(block);
      hi[j] = static_cast<uint32_t>(block >> 32);
    }
    c0[set] = _mm256_load_si256(reinterpret_cast<const __m256i *>(lo));
    c1[set] = _mm256_load_si256(reinterpret_cast<const __m256i *>(hi));
    c2[set] = _mm256_set1_epi32(static_cast<int>(stream.streamHash));
    c3[set] = _mm256_set1_epi32(static_cast<int>(stream.position));
  }
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(philox::kM0));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(philox::kM1));
  uint32_t k0 = stream.key0, k1 = stream.key1;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) { k0 += philox::kW0; k1 += philox::kW1; }
    const __m256i key0 = _mm256_set1_epi32(static_cast<int>(k0));
    const __m256i key1 = _mm256_set1_epi32(static_cast<int>(k1));
    for (int set = 0; set < kSets; ++set) {
      __m256i hi0, lo0, hi1, lo1;
      mulHiLo(c0[set], m0, &hi0, &lo0);
      mulHiLo(c2[set], m1, &hi1, &lo1);
      c0[set] = _mm256_xor_si256(_mm256_xor_si256(hi1, c1[set]), key0);
      c2[set] = _mm256_xor_si256(_mm256_xor_si256(hi0, c3[set]), key1);
      c1[set] = lo1;
      c3[set] = lo0;
    }
  }
  for (int set = 0; set < kSets; ++set) out[set] = {{c0[set], c1[set], c2[set], c3[set]}};
}

SHARDC_AVX2 inline __m256 unitF8(__m256i w) {
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(w, 8)), _mm256_set1_ps(0x1p-24f));
}
SHARDC_AVX2 inline __m256 unitOpenZeroF8(__m256i w) {
  __m256i m = _mm256_add_epi32(_mm256_srli_epi32(w, 8), _mm256_set1_epi32(1));
  return _mm256_mul_ps(_mm256_cvtepi32_ps(m), _mm256_set1_ps(0x1p-24f));
}
SHARDC_AVX2 inline __m256 fma8(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
SHARDC_AVX2 inline __m256 neg8(__m256 x) { return _mm256_xor_ps(x, _mm256_set1_ps(-0.0f)); }

SHARDC_AVX2 inline __m256 logF8(__m256 x) {
  const __m256i sqrtHalf = _mm256_set1_epi32(static_cast<int>(math::kSqrtHalfBitsF));
  __m256i shifted = _mm256_sub_epi32(_mm256_castps_si256(x), sqrtHalf);
  __m256i e = _mm256_srai_epi32(shifted, 23);
  __m256 m = _mm256_castsi256_ps(
      _mm256_add_epi32(_mm256_and_si256(shifted, _mm256_set1_epi32(0x007fffff)), sqrtHalf));
  __m256 f = _mm256_sub_ps(m, _mm256_set1_ps(1.0f));
  __m256 s = _mm256_div_ps(f, _mm256_add_ps(_mm256_set1_ps(2.0f), f));
  __m256 z = _mm256_mul_ps(s, s);
  __m256 p = _mm256_set1_ps(2.0f / 11.0f);
  p = fma8(p, z, _mm256_set1_ps(2.0f / 9.0f));
  p = fma8(p, z, _mm256_set1_ps(2.0f / 7.0f));
  p = fma8(p, z, _mm256_set1_ps(2.0f / 5.0f));
  p = fma8(p, z, _mm256_set1_ps(2.0f / 3.0f));
  __m256 tail = _mm256_mul_ps(z, p);
  __m256 log1pf = fma8(s, tail, _mm256_add_ps(s, s));
  __m256 ef = _mm256_cvtepi32_ps(e);
  return fma8(ef, _mm256_set1_ps(math::kLn2HiF), fma8(ef, _mm256_set1_ps(math::kLn2LoF), log1pf));
}

SHARDC_AVX2 inline void sinCosTurnF8(__m256i word, __m256 *sinOut, __m256 *cosOut) {
  __m256i m = _mm256_srli_epi32(word, 8);
  __m256i k = _mm256_srli_epi32(_mm256_add_epi32(m, _mm256_set1_epi32(0x200000)), 22);
  __m256i rest = _mm256_sub_epi32(m, _mm256_slli_epi32(k, 22));
  __m256 x = _mm256_mul_ps(_mm256_cvtepi32_ps(rest), _mm256_set1_ps(0x1.921fb6p-22f));
  __m256 z = _mm256_mul_ps(x, x);
  __m256 ps = _mm256_set1_ps(1.0f / 362880.0f);
  ps = fma8(ps, z, _mm256_set1_ps(-1.0f / 5040.0f));
  ps = fma8(ps, z, _mm256_set1_ps(1.0f / 120.0f));
  ps = fma8(ps, z, _mm256_set1_ps(-1.0f / 6.0f));
  __m256 s = fma8(_mm256_mul_ps(x, z), ps, x);
  __m256 pc = _mm256_set1_ps(-1.0f / 3628800.0f);
  pc = fma8(pc, z, _mm256_set1_ps(1.0f / 40320.0f));
  pc = fma8(pc, z, _mm256_set1_ps(-1.0f / 720.0f));
  pc = fma8(pc, z, _mm256_set1_ps(1.0f / 24.0f));
  pc = fma8(pc, z, _mm256_set1_ps(-0.5f));
  __m256 c = fma8(z, pc, _mm256_set1_ps(1.0f));
  // Quadrant q = k & 3: q odd swaps sin and cos; q in {2,3} negates sin,
  // q in {1,2} negates cos (the scalar switch in InitMath.h).
  __m256i q = _mm256_and_si256(k, _mm256_set1_epi32(3));
  __m256 swap = _mm256_castsi256_ps(
      _mm256_cmpeq_epi32(_mm256_and_si256(q, _mm256_set1_epi32(1)), _mm256_set1_epi32(1)));
  __m256 sinSign = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(q, _mm256_set1_epi32(2)), 30));
  __m256 cosSign = _mm256_castsi256_ps(_mm256_slli_epi32(
      _mm256_and_si256(_mm256_add_epi32(q, _mm256_set1_epi32(1)), _mm256_set1_epi32(2)), 30));
  *sinOut = _mm256_xor_ps(_mm256_blendv_ps(s, c, swap), sinSign);
  *cosOut = _mm256_xor_ps(_mm256_blendv_ps(c, s, swap), cosSign);
}

SHARDC_AVX2 inline __m256 erfinvCentralF8(__m256 w) {
  w = _mm256_sub_ps(w, _mm256_set1_ps(2.5f));
  __m256 p = _mm256_set1_ps(2.81022636e-08f);
  p = fma8(p, w, _mm256_set1_ps(3.43273939e-07f));
  p = fma8(p, w, _mm256_set1_ps(-3.5233877e-06f));
  p = fma8(p, w, _mm256_set1_ps(-4.39150654e-06f));
  p = fma8(p, w, _mm256_set1_ps(0.00021858087f));
  p = fma8(p, w, _mm256_set1_ps(-0.00125372503f));
  p = fma8(p, w, _mm256_set1_ps(-0.00417768164f));
  p = fma8(p, w, _mm256_set1_ps(0.246640727f));
  p = fma8(p, w, _mm256_set1_ps(1.50140941f));
  return p;
}
SHARDC_AVX2 inline __m256 erfinvTailF8(__m256 w) {
  w = _mm256_sub_ps(_mm256_sqrt_ps(w), _mm256_set1_ps(3.0f));
  __m256 p = _mm256_set1_ps(-0.000200214257f);
  p = fma8(p, w, _mm256_set1_ps(0.000100950558f));
  p = fma8(p, w, _mm256_set1_ps(0.00134934322f));
  p = fma8(p, w, _mm256_set1_ps(-0.00367342844f));
  p = fma8(p, w, _mm256_set1_ps(0.00573950773f));
  p = fma8(p, w, _mm256_set1_ps(-0.0076224613f));
  p = fma8(p, w, _mm256_set1_ps(0.00943887047f));
  p = fma8(p, w, _mm256_set1_ps(1.00167406f));
  p = fma8(p, w, _mm256_set1_ps(2.83297682f));
  return p;
}

SHARDC_AVX2 inline __m256 erfinvF8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
  __m256 w = neg8(logF8(_mm256_mul_ps(_mm256_sub_ps(one, x), _mm256_add_ps(one, x))));
  __m256 central = _mm256_cmp_ps(w, _mm256_set1_ps(math::kErfinvTailFromW), _CMP_LT_OQ);
  __m256 p = erfinvCentralF8(w);
  if (_mm256_movemask_ps(central) != 0xff)  // the tail is rare: skip it when no lane needs it
    p = _mm256_blendv_ps(erfinvTailF8(w), p, central);
  __m256 r = _mm256_mul_ps(p, x);
  // |x| == 1 -> +-inf, |x| > 1 or NaN -> NaN, as the scalar early return.
  __m256 inside = _mm256_cmp_ps(a, one, _CMP_LT_OQ);
  __m256 edge = _mm256_cmp_ps(a, one, _CMP_EQ_OQ);
  __m256 signedInf = _mm256_or_ps(_mm256_set1_ps(math::kInfF), _mm256_and_ps(x, _mm256_set1_ps(-0.0f)));
  __m256 special = _mm256_blendv_ps(_mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)), signedInf, edge);
  return _mm256_blendv_ps(special, r, inside);
}

/// 4 vectors of 8 lanes (lane j = block j, vector k = word k) -> 32 floats in
/// element order (block 0 words 0..3, block 1 words 0..3, ...).
SHARDC_AVX2 inline void storeTransposed(__m256 v0, __m256 v1, __m256 v2, __m256 v3, float *out) {
  __m256 t0 = _mm256_unpacklo_ps(v0, v1), t1 = _mm256_unpackhi_ps(v0, v1);
  __m256 t2 = _mm256_unpacklo_ps(v2, v3), t3 = _mm256_unpackhi_ps(v2, v3);
  __m256 b04 = _mm256_shuffle_ps(t0, t2, 0x44), b15 = _mm256_shuffle_ps(t0, t2, 0xEE);
  __m256 b26 = _mm256_shuffle_ps(t1, t3, 0x44), b37 = _mm256_shuffle_ps(t1, t3, 0xEE);
  _mm256_storeu_ps(out + 0, _mm256_permute2f128_ps(b04, b15, 0x20));
  _mm256_storeu_ps(out + 8, _mm256_permute2f128_ps(b26, b37, 0x20));
  _mm256_storeu_ps(out + 16, _mm256_permute2f128_ps(b04, b15, 0x31));
  _mm256_storeu_ps(out + 24, _mm256_permute2f128_ps(b26, b37, 0x31));
}

SHARDC_AVX2 void uniformSteps(const PreparedGenerator &g, uint64_t firstBlock, int64_t steps, float *out) {
  const __m256 span = _mm256_set1_ps(g.uniformF.span), low = _mm256_set1_ps(g.uniformF.low);
  const __m256 cap = _mm256_set1_ps(g.uniformF.cap);
  for (int64_t step = 0; step < steps; ++step, firstBlock += kAvx2BlocksPerStep) {
    Lanes4 sets[kSets];
    philoxSets(g.stream, firstBlock, sets);
    for (int set = 0; set < kSets; ++set, out += 32) {
      const Lanes4 &w = sets[set];
      __m256 v[4];
      for (int k = 0; k < 4; ++k) v[k] = _mm256_min_ps(fma8(span, unitF8(w.w[k]), low), cap);
      storeTransposed(v[0], v[1], v[2], v[3], out);
    }
  }
}

SHARDC_AVX2 void normalSteps(const PreparedGenerator &g, uint64_t firstBlock, int64_t steps, float *out) {
  const __m256 stdv = _mm256_set1_ps(g.normalF.std), mean = _mm256_set1_ps(g.normalF.mean);
  for (int64_t step = 0; step < steps; ++step, firstBlock += kAvx2BlocksPerStep) {
    Lanes4 sets[kSets];
    philoxSets(g.stream, firstBlock, sets);
    for (int set = 0; set < kSets; ++set, out += 32) {
      const Lanes4 &w = sets[set];
      __m256 v[4];
      for (int pair = 0; pair < 2; ++pair) {
        __m256 u1 = unitOpenZeroF8(w.w[2 * pair]);
        __m256 r = _mm256_sqrt_ps(_mm256_mul_ps(_mm256_set1_ps(-2.0f), logF8(u1)));
        __m256 s, c;
        sinCosTurnF8(w.w[2 * pair + 1], &s, &c);
        v[2 * pair] = fma8(stdv, _mm256_mul_ps(r, c), mean);
        v[2 * pair + 1] = fma8(stdv, _mm256_mul_ps(r, s), mean);
    }
    storeTransposed(v[0], v[1], v[2], v[3], out);
    }
  }
}

SHARDC_AVX2 void truncNormalSteps(const PreparedGenerator &g, uint64_t firstBlock, int64_t steps,
                                  float *out) {
  const TruncNormalConstants<float> &c = g.truncF;
  const __m256 spanT = _mm256_set1_ps(c.spanT), lowT = _mm256_set1_ps(c.lowT);
  const __m256 scale = _mm256_set1_ps(c.scale), mean = _mm256_set1_ps(c.mean);
  const __m256 a = _mm256_set1_ps(c.a), b = _mm256_set1_ps(c.b);
  const __m256 one = _mm256_set1_ps(1.0f), minusOne = _mm256_set1_ps(-1.0f);
  for (int64_t step = 0; step < steps; ++step, firstBlock += kAvx2BlocksPerStep) {
    Lanes4 sets[kSets];
    philoxSets(g.stream, firstBlock, sets);
    for (int set = 0; set < kSets; ++set, out += 32) {
      const Lanes4 &w = sets[set];
      __m256 v[4];
      for (int k = 0; k < 4; ++k) {
        __m256 t = fma8(spanT, unitF8(w.w[k]), lowT);
        t = _mm256_max_ps(minusOne, _mm256_min_ps(one, t));
        __m256 x = fma8(erfinvF8(t), scale, mean);
        v[k] = _mm256_min_ps(b, _mm256_max_ps(a, x));
    }
    storeTransposed(v[0], v[1], v[2], v[3], out);
    }
  }
}

SHARDC_AVX2 inline __m256 pointwise8(PointwiseKind kind, __m256 av, __m256 bv, __m256 x) {
  switch (kind) {
  case PointwiseKind::Mul: return _mm256_mul_ps(x, av);
  case PointwiseKind::Add: return _mm256_add_ps(x, av);
  case PointwiseKind::Sub: return _mm256_sub_ps(x, av);
  case PointwiseKind::Div: return _mm256_div_ps(x, av);
  case PointwiseKind::Clamp: return _mm256_min_ps(bv, _mm256_max_ps(av, x));  // NaN x stays x
  case PointwiseKind::Erfinv: return erfinvF8(x);
  case PointwiseKind::Sqrt: return _mm256_sqrt_ps(x);
  case PointwiseKind::Neg: return neg8(x);
  }
  return x;
}

}  // namespace

SHARDC_AVX2 void avx2BlocksF(const PreparedGenerator &g, uint64_t firstBlock, int64_t blocks, float *out) {
  int64_t steps = blocks / kAvx2BlocksPerStep;
  switch (g.kind) {
  case GeneratorKind::Uniform: uniformSteps(g, firstBlock, steps, out); break;
  case GeneratorKind::Normal: normalSteps(g, firstBlock, steps, out); break;
  case GeneratorKind::TruncNormal: truncNormalSteps(g, firstBlock, steps, out); break;
  default: break;
  }
}

SHARDC_AVX2 void avx2PointwiseF(PointwiseKind kind, float a, float b, float *data, int64_t count) {
  const __m256 av = _mm256_set1_ps(a), bv = _mm256_set1_ps(b);
  int64_t k = 0;
  for (; k + 8 <= count; k += 8)
    _mm256_storeu_ps(data + k, pointwise8(kind, av, bv, _mm256_loadu_ps(data + k)));
  if (k < count) {  // the tail through an 8-lane stage, still on the vector path
    alignas(32) float stage[8] = {};
    std::memcpy(stage, data + k, static_cast<size_t>(count - k) * sizeof(float));
    _mm256_store_ps(stage, pointwise8(kind, av, bv, _mm256_load_ps(stage)));
    std::memcpy(data + k, stage, static_cast<size_t>(count - k) * sizeof(float));
  }
}

}  // namespace shardc::runtime::init

#else  // not x86: useAvx2() is always false, these are never called

namespace shardc::runtime::init {
void avx2BlocksF(const PreparedGenerator &g, uint64_t firstBlock, int64_t blocks, float *out) {
  scalarBlocksF(g, firstBlock, blocks, out);
}
void avx2PointwiseF(PointwiseKind kind, float a, float b, float *data, int64_t count) {
  scalarPointwiseF(kind, a, b, data, count);
}
}  // namespace shardc::runtime::init

#endif
