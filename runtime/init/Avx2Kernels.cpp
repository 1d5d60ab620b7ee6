// AVX2+FMA versions of the float32-path block kernel and the float pointwise
// kernel: 8 lanes, 4 interleaved sets of Philox blocks per step. The
// algorithms are VectorKernels.inc; this file supplies the AVX2 operations.
// Compiled for baseline x86-64 with per-function target attributes (no
// -mavx2 on the build), called only when the CPU has AVX2 and FMA.
#include "runtime/init/BlockKernels.h"
#include "runtime/init/PointwiseKernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstring>

#define SHARDC_VECTOR_TARGET __attribute__((target("avx2,fma")))

namespace shardc::runtime::init {
namespace avx2 {
namespace {

using VF = __m256;
using VI = __m256i;
using Mask = __m256;  // all-ones lanes, as the compares return them
constexpr int kLanes = 8;
constexpr int kBlocksPerStep = kAvx2BlocksPerStep;
constexpr int kSets = kBlocksPerStep / kLanes;

SHARDC_VECTOR_TARGET inline VF set1(float v) { return _mm256_set1_ps(v); }
SHARDC_VECTOR_TARGET inline VI set1i(uint32_t v) { return _mm256_set1_epi32(static_cast<int>(v)); }
SHARDC_VECTOR_TARGET inline VF add(VF a, VF b) { return _mm256_add_ps(a, b); }
SHARDC_VECTOR_TARGET inline VF sub(VF a, VF b) { return _mm256_sub_ps(a, b); }
SHARDC_VECTOR_TARGET inline VF mul(VF a, VF b) { return _mm256_mul_ps(a, b); }
SHARDC_VECTOR_TARGET inline VF div(VF a, VF b) { return _mm256_div_ps(a, b); }
SHARDC_VECTOR_TARGET inline VF sqrtv(VF a) { return _mm256_sqrt_ps(a); }
SHARDC_VECTOR_TARGET inline VF fma(VF a, VF b, VF c) { return _mm256_fmadd_ps(a, b, c); }
SHARDC_VECTOR_TARGET inline VF minv(VF a, VF b) { return _mm256_min_ps(a, b); }
SHARDC_VECTOR_TARGET inline VF maxv(VF a, VF b) { return _mm256_max_ps(a, b); }
SHARDC_VECTOR_TARGET inline VF absv(VF a) { return _mm256_andnot_ps(set1(-0.0f), a); }
SHARDC_VECTOR_TARGET inline VF neg(VF a) { return _mm256_xor_ps(a, set1(-0.0f)); }
SHARDC_VECTOR_TARGET inline VF cvt(VI a) { return _mm256_cvtepi32_ps(a); }
template <int N> SHARDC_VECTOR_TARGET inline VI srli(VI a) { return _mm256_srli_epi32(a, N); }
template <int N> SHARDC_VECTOR_TARGET inline VI slli(VI a) { return _mm256_slli_epi32(a, N); }
template <int N> SHARDC_VECTOR_TARGET inline VI srai(VI a) { return _mm256_srai_epi32(a, N); }
SHARDC_VECTOR_TARGET inline VI addi(VI a, VI b) { return _mm256_add_epi32(a, b); }
SHARDC_VECTOR_TARGET inline VI subi(VI a, VI b) { return _mm256_sub_epi32(a, b); }
SHARDC_VECTOR_TARGET inline VI andi(VI a, VI b) { return _mm256_and_si256(a, b); }
SHARDC_VECTOR_TARGET inline VI xori(VI a, VI b) { return _mm256_xor_si256(a, b); }
SHARDC_VECTOR_TARGET inline VI ori(VI a, VI b) { return _mm256_or_si256(a, b); }
SHARDC_VECTOR_TARGET inline VI asInt(VF a) { return _mm256_castps_si256(a); }
SHARDC_VECTOR_TARGET inline VF asFloat(VI a) { return _mm256_castsi256_ps(a); }
SHARDC_VECTOR_TARGET inline Mask lessThan(VF a, VF b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
SHARDC_VECTOR_TARGET inline Mask equal(VF a, VF b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
SHARDC_VECTOR_TARGET inline Mask bitSet(VI a, VI bit) {
  return _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(a, bit), bit));
}
SHARDC_VECTOR_TARGET inline VF select(Mask m, VF ifFalse, VF ifTrue) {
  return _mm256_blendv_ps(ifFalse, ifTrue, m);
}
SHARDC_VECTOR_TARGET inline bool allLanes(Mask m) { return _mm256_movemask_ps(m) == 0xff; }
SHARDC_VECTOR_TARGET inline VF loadu(const float *p) { return _mm256_loadu_ps(p); }
SHARDC_VECTOR_TARGET inline void storeu(float *p, VF v) { _mm256_storeu_ps(p, v); }

/// lo and hi 32 bits of the 32x32 -> 64 products a * m in each of 8 lanes:
/// _mm256_mul_epu32 multiplies the even lanes; the odd ones are moved down
/// first. The moves are dword shuffles, not 64-bit shifts: shifts share
/// ports 0 and 1 with the multiplies, which bound Philox's rounds, while
/// shuffles issue on port 5 (Intel; other ports elsewhere).
SHARDC_VECTOR_TARGET inline void mulHiLo(VI a, VI m, VI *hi, VI *lo) {
  VI even = _mm256_mul_epu32(a, m);
  VI odd = _mm256_mul_epu32(_mm256_shuffle_epi32(a, 0xF5), m);  // words 1,1,3,3
  *lo = _mm256_blend_epi32(even, _mm256_shuffle_epi32(odd, 0xA0), 0xAA);  // 0,0,2,2
  *hi = _mm256_blend_epi32(_mm256_shuffle_epi32(even, 0xF5), odd, 0xAA);
}

struct Lanes4 { VI w[4]; };

/// The Philox counters of blocks firstBlock .. firstBlock + 8*kSets - 1:
/// set s, lane j = block firstBlock + 8*s + j; words 2 and 3 are the
/// stream hash and position (docs/rng.md).
SHARDC_VECTOR_TARGET inline void philoxCounters(const RngStream &stream, uint64_t firstBlock,
                                               Lanes4 *out) {
  // Built in registers: writing the counters to memory word by word and
  // loading them as vectors stalled every step on store forwarding (a
  // quarter of uniform's time).
  const VI laneIndex = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const VI signBit = set1i(0x80000000u);
  for (int set = 0; set < kSets; ++set) {
    // Block numbers are 64-bit: low words per lane, plus the carry into the
    // high word where a low word wrapped (unsigned lo < baseLo, compared
    // as signed after flipping the sign bits: AVX2 has no unsigned compare).
    uint64_t base = firstBlock + static_cast<uint64_t>(8 * set);
    VI baseLo = set1i(static_cast<uint32_t>(base)), baseHi = set1i(static_cast<uint32_t>(base >> 32));
    VI lo = addi(baseLo, laneIndex);
    VI wrapped = _mm256_cmpgt_epi32(xori(baseLo, signBit), xori(lo, signBit));  // -1 or 0
    out[set].w[0] = lo;
    out[set].w[1] = subi(baseHi, wrapped);
    out[set].w[2] = set1i(stream.streamHash);
    out[set].w[3] = set1i(stream.position);
  }
}

/// 4 vectors of 8 lanes (lane j = block j, vector k = word k) -> 32 floats in
/// element order (block 0 words 0..3, block 1 words 0..3, ...).
SHARDC_VECTOR_TARGET inline void storeTransposed(VF v0, VF v1, VF v2, VF v3, float *out) {
  VF t0 = _mm256_unpacklo_ps(v0, v1), t1 = _mm256_unpackhi_ps(v0, v1);
  VF t2 = _mm256_unpacklo_ps(v2, v3), t3 = _mm256_unpackhi_ps(v2, v3);
  VF b04 = _mm256_shuffle_ps(t0, t2, 0x44), b15 = _mm256_shuffle_ps(t0, t2, 0xEE);
  VF b26 = _mm256_shuffle_ps(t1, t3, 0x44), b37 = _mm256_shuffle_ps(t1, t3, 0xEE);
  _mm256_storeu_ps(out + 0, _mm256_permute2f128_ps(b04, b15, 0x20));
  _mm256_storeu_ps(out + 8, _mm256_permute2f128_ps(b26, b37, 0x20));
  _mm256_storeu_ps(out + 16, _mm256_permute2f128_ps(b04, b15, 0x31));
  _mm256_storeu_ps(out + 24, _mm256_permute2f128_ps(b26, b37, 0x31));
}

#include "runtime/init/VectorKernels.inc"

}  // namespace
}  // namespace avx2

SHARDC_VECTOR_TARGET void avx2BlocksF(const PreparedGenerator &g, uint64_t firstBlock,
                                      int64_t blocks, float *out) {
  avx2::blocksF(g, firstBlock, blocks, out);
}

SHARDC_VECTOR_TARGET void avx2PointwiseF(PointwiseKind kind, float a, float b, float *data,
                                         int64_t count) {
  avx2::pointwiseF(kind, a, b, data, count);
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
