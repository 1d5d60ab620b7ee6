// AVX-512 versions of the float32-path block kernel and the float pointwise
// kernel: 16 lanes, 2 interleaved sets of Philox blocks per step. The
// algorithms are VectorKernels.inc; this file supplies the AVX-512
// operations. Compiled for baseline x86-64 with per-function target
// attributes, called only when the CPU has AVX-512F/DQ (useAvx512()).
#include "runtime/init/BlockKernels.h"
#include "runtime/init/PointwiseKernels.h"

#if defined(__x86_64__)

// GCC 12's AVX-512 headers start shifts from _mm512_undefined_*, which its
// -Wmaybe-uninitialized flags once inlined (GCC bug 105593): not our code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <immintrin.h>

#include <cstring>

#define SHARDC_VECTOR_TARGET __attribute__((target("avx512f,avx512dq,fma")))

namespace shardc::runtime::init {
namespace avx512 {
namespace {

using VF = __m512;
using VI = __m512i;
using Mask = __mmask16;
constexpr int kLanes = 16;
constexpr int kBlocksPerStep = kAvx512BlocksPerStep;
constexpr int kSets = kBlocksPerStep / kLanes;

SHARDC_VECTOR_TARGET inline VF set1(float v) { return _mm512_set1_ps(v); }
SHARDC_VECTOR_TARGET inline VI set1i(uint32_t v) { return _mm512_set1_epi32(static_cast<int>(v)); }
SHARDC_VECTOR_TARGET inline VF add(VF a, VF b) { return _mm512_add_ps(a, b); }
SHARDC_VECTOR_TARGET inline VF sub(VF a, VF b) { return _mm512_sub_ps(a, b); }
SHARDC_VECTOR_TARGET inline VF mul(VF a, VF b) { return _mm512_mul_ps(a, b); }
SHARDC_VECTOR_TARGET inline VF div(VF a, VF b) { return _mm512_div_ps(a, b); }
SHARDC_VECTOR_TARGET inline VF sqrtv(VF a) { return _mm512_sqrt_ps(a); }
SHARDC_VECTOR_TARGET inline VF fma(VF a, VF b, VF c) { return _mm512_fmadd_ps(a, b, c); }
SHARDC_VECTOR_TARGET inline VF minv(VF a, VF b) { return _mm512_min_ps(a, b); }
SHARDC_VECTOR_TARGET inline VF maxv(VF a, VF b) { return _mm512_max_ps(a, b); }
SHARDC_VECTOR_TARGET inline VI asInt(VF a) { return _mm512_castps_si512(a); }
SHARDC_VECTOR_TARGET inline VF asFloat(VI a) { return _mm512_castsi512_ps(a); }
SHARDC_VECTOR_TARGET inline VF absv(VF a) {
  return asFloat(_mm512_and_si512(asInt(a), set1i(0x7fffffffu)));
}
SHARDC_VECTOR_TARGET inline VF neg(VF a) {
  return asFloat(_mm512_xor_si512(asInt(a), set1i(0x80000000u)));
}
SHARDC_VECTOR_TARGET inline VF cvt(VI a) { return _mm512_cvtepi32_ps(a); }
template <int N> SHARDC_VECTOR_TARGET inline VI srli(VI a) { return _mm512_srli_epi32(a, N); }
template <int N> SHARDC_VECTOR_TARGET inline VI slli(VI a) { return _mm512_slli_epi32(a, N); }
template <int N> SHARDC_VECTOR_TARGET inline VI srai(VI a) { return _mm512_srai_epi32(a, N); }
SHARDC_VECTOR_TARGET inline VI addi(VI a, VI b) { return _mm512_add_epi32(a, b); }
SHARDC_VECTOR_TARGET inline VI subi(VI a, VI b) { return _mm512_sub_epi32(a, b); }
SHARDC_VECTOR_TARGET inline VI andi(VI a, VI b) { return _mm512_and_si512(a, b); }
SHARDC_VECTOR_TARGET inline VI xori(VI a, VI b) { return _mm512_xor_si512(a, b); }
SHARDC_VECTOR_TARGET inline VI ori(VI a, VI b) { return _mm512_or_si512(a, b); }
SHARDC_VECTOR_TARGET inline Mask lessThan(VF a, VF b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
SHARDC_VECTOR_TARGET inline Mask equal(VF a, VF b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
SHARDC_VECTOR_TARGET inline Mask bitSet(VI a, VI bit) { return _mm512_test_epi32_mask(a, bit); }
SHARDC_VECTOR_TARGET inline VF select(Mask m, VF ifFalse, VF ifTrue) {
  return _mm512_mask_blend_ps(m, ifFalse, ifTrue);
}
SHARDC_VECTOR_TARGET inline bool allLanes(Mask m) { return m == 0xffff; }
SHARDC_VECTOR_TARGET inline VF loadu(const float *p) { return _mm512_loadu_ps(p); }
SHARDC_VECTOR_TARGET inline void storeu(float *p, VF v) { _mm512_storeu_ps(p, v); }

/// lo and hi 32 bits of the 32x32 -> 64 products a * m in each of 16 lanes.
/// As in Avx2Kernels.cpp, the odd words move with dword shuffles (port 5),
/// not 64-bit shifts, which compete with the multiplies for port 0.
SHARDC_VECTOR_TARGET inline void mulHiLo(VI a, VI m, VI *hi, VI *lo) {
  VI even = _mm512_mul_epu32(a, m);
  VI odd = _mm512_mul_epu32(_mm512_shuffle_epi32(a, _MM_PERM_DDBB), m);  // words 1,1,3,3
  *lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_shuffle_epi32(odd, _MM_PERM_CCAA));
  *hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_shuffle_epi32(even, _MM_PERM_DDBB), odd);
}

struct Lanes4 { VI w[4]; };

/// The Philox counters of blocks firstBlock .. firstBlock + 16*kSets - 1:
/// set s, lane j = block firstBlock + 16*s + j; words 2 and 3 are the
/// stream hash and position (docs/rng.md).
SHARDC_VECTOR_TARGET inline void philoxCounters(const RngStream &stream, uint64_t firstBlock,
                                               Lanes4 *out) {
  const VI laneIndex = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  for (int set = 0; set < kSets; ++set) {
    // Block numbers are 64-bit: low words per lane, plus the carry into the
    // high word where a low word wrapped.
    uint64_t base = firstBlock + static_cast<uint64_t>(16 * set);
    VI baseLo = set1i(static_cast<uint32_t>(base)), baseHi = set1i(static_cast<uint32_t>(base >> 32));
    VI lo = addi(baseLo, laneIndex);
    __mmask16 wrapped = _mm512_cmplt_epu32_mask(lo, baseLo);
    out[set].w[0] = lo;
    out[set].w[1] = _mm512_mask_add_epi32(baseHi, wrapped, baseHi, set1i(1));
    out[set].w[2] = set1i(stream.streamHash);
    out[set].w[3] = set1i(stream.position);
  }
}

/// 4 vectors of 16 lanes (lane j = block j, vector k = word k) -> 64 floats
/// in element order (block 0 words 0..3, block 1 words 0..3, ...): a 4x4
/// transpose inside each 128-bit lane, then one of the 128-bit lanes.
SHARDC_VECTOR_TARGET inline void storeTransposed(VF v0, VF v1, VF v2, VF v3, float *out) {
  VF t0 = _mm512_unpacklo_ps(v0, v1), t1 = _mm512_unpackhi_ps(v0, v1);
  VF t2 = _mm512_unpacklo_ps(v2, v3), t3 = _mm512_unpackhi_ps(v2, v3);
  // 128-bit lane L of bK holds block 4L + K.
  VF b0 = _mm512_shuffle_ps(t0, t2, 0x44), b1 = _mm512_shuffle_ps(t0, t2, 0xEE);
  VF b2 = _mm512_shuffle_ps(t1, t3, 0x44), b3 = _mm512_shuffle_ps(t1, t3, 0xEE);
  VF x0 = _mm512_shuffle_f32x4(b0, b1, 0x44), x1 = _mm512_shuffle_f32x4(b2, b3, 0x44);
  VF y0 = _mm512_shuffle_f32x4(b0, b1, 0xEE), y1 = _mm512_shuffle_f32x4(b2, b3, 0xEE);
  _mm512_storeu_ps(out + 0, _mm512_shuffle_f32x4(x0, x1, 0x88));
  _mm512_storeu_ps(out + 16, _mm512_shuffle_f32x4(x0, x1, 0xDD));
  _mm512_storeu_ps(out + 32, _mm512_shuffle_f32x4(y0, y1, 0x88));
  _mm512_storeu_ps(out + 48, _mm512_shuffle_f32x4(y0, y1, 0xDD));
}

#include "runtime/init/VectorKernels.inc"

}  // namespace
}  // namespace avx512

SHARDC_VECTOR_TARGET void avx512BlocksF(const PreparedGenerator &g, uint64_t firstBlock,
                                        int64_t blocks, float *out) {
  avx512::blocksF(g, firstBlock, blocks, out);
}

SHARDC_VECTOR_TARGET void avx512PointwiseF(PointwiseKind kind, float a, float b, float *data,
                                           int64_t count) {
  avx512::pointwiseF(kind, a, b, data, count);
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
