// The per-element recipes of docs/rng.md: Philox counter layout and the
// uniform / normal / trunc_normal formulas for the float32 path (f32, f16,
// bf16) and the float64 path. Header-only, SHARDC_HOST_DEVICE, so a CUDA
// kernel can call exactly these; the constants are prepared once on the host
// (PreparedGenerator.cpp) and passed by value.
//
// Layout: key = (seed low 32, seed high 32); counter = (block low 32, block
// high 32, streamHash, position). float32 path: block = i / 4, element i
// uses word i % 4. float64 path: block = i / 2, element i uses words
// 2*(i%2) (high half) and 2*(i%2)+1 (low half). Normal pairs words (0,1)
// and (2,3) of a block by Box-Muller, so every element needs its block only.
#pragma once

#include "runtime/Philox.h"
#include "runtime/init/InitMath.h"

#include <cstdint>

namespace shardc::runtime::init {

struct RngStream {
  uint32_t key0 = 0, key1 = 0;  // seed low, seed high
  uint32_t streamHash = 0, position = 0;
};

SHARDC_HOST_DEVICE inline philox::Counter blockWords(const RngStream &stream, uint64_t block) {
  return philox::philox4x32_10(
      {{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), stream.streamHash,
        stream.position}},
      {{stream.key0, stream.key1}});
}

inline constexpr int kElementsPerBlockF = 4;
inline constexpr int kElementsPerBlockD = 2;

/// [0, 1) from the top 24 bits: exact.
SHARDC_HOST_DEVICE inline float unitF(uint32_t word) {
  return static_cast<float>(word >> 8) * 0x1p-24f;
}
/// (0, 1]: never 0, so log never sees 0.
SHARDC_HOST_DEVICE inline float unitOpenZeroF(uint32_t word) {
  return static_cast<float>((word >> 8) + 1u) * 0x1p-24f;
}
/// The top 53 bits of (high, low).
SHARDC_HOST_DEVICE inline uint64_t bits53(uint32_t high, uint32_t low) {
  return ((static_cast<uint64_t>(high) << 32) | low) >> 11;
}
SHARDC_HOST_DEVICE inline double unitD(uint32_t high, uint32_t low) {
  return static_cast<double>(bits53(high, low)) * 0x1p-53;
}
SHARDC_HOST_DEVICE inline double unitOpenZeroD(uint32_t high, uint32_t low) {
  return static_cast<double>(bits53(high, low) + 1u) * 0x1p-53;
}

// ---- constants prepared on the host ----------------------------------------

template <typename T> struct UniformConstants {
  T low, span, cap;  // value = min(fma(span, u, low), cap); cap = largest T below high
};
template <typename T> struct NormalConstants {
  T mean, std;
};
template <typename T> struct TruncNormalConstants {
  T lowT, spanT;  // t = fma(spanT, u, lowT) with lowT = erf(alpha/sqrt2), spanT = erf(beta/sqrt2) - lowT
  T scale, mean;  // value = fma(erfinv(t), scale, mean), scale = sqrt(2) * std
  T a, b;         // then clamped to [a, b]
};

// ---- float32 path ------------------------------------------------------------

SHARDC_HOST_DEVICE inline float uniformValueF(const UniformConstants<float> &c, uint32_t word) {
  float v = math::fmaF(c.span, unitF(word), c.low);
  return v < c.cap ? v : c.cap;
}

/// Box-Muller on one word pair: first = r cos, second = r sin.
SHARDC_HOST_DEVICE inline void normalPairF(const NormalConstants<float> &c, uint32_t radiusWord,
                                           uint32_t angleWord, float *first, float *second) {
  float r = math::sqrtF(-2.0f * math::logF(unitOpenZeroF(radiusWord)));
  float s, co;
  math::sinCosTurnF(angleWord >> 8, &s, &co);
  *first = math::fmaF(c.std, r * co, c.mean);
  *second = math::fmaF(c.std, r * s, c.mean);
}

SHARDC_HOST_DEVICE inline float truncNormalValueF(const TruncNormalConstants<float> &c,
                                                  uint32_t word) {
  float t = math::fmaF(c.spanT, unitF(word), c.lowT);
  t = t > 1.0f ? 1.0f : t;
  t = t < -1.0f ? -1.0f : t;
  float v = math::fmaF(math::erfinvF(t), c.scale, c.mean);
  v = v < c.a ? c.a : v;
  return v > c.b ? c.b : v;
}

// ---- float64 path ------------------------------------------------------------

SHARDC_HOST_DEVICE inline double uniformValueD(const UniformConstants<double> &c, uint32_t high,
                                               uint32_t low) {
  double v = math::fmaD(c.span, unitD(high, low), c.low);
  return v < c.cap ? v : c.cap;
}

SHARDC_HOST_DEVICE inline void normalPairD(const NormalConstants<double> &c,
                                           const philox::Counter &w, double *first,
                                           double *second) {
  double r = math::sqrtD(-2.0 * math::logD(unitOpenZeroD(w.v[0], w.v[1])));
  double s, co;
  math::sinCosTurnD(bits53(w.v[2], w.v[3]), &s, &co);
  *first = math::fmaD(c.std, r * co, c.mean);
  *second = math::fmaD(c.std, r * s, c.mean);
}

SHARDC_HOST_DEVICE inline double truncNormalValueD(const TruncNormalConstants<double> &c,
                                                   uint32_t high, uint32_t low) {
  double t = math::fmaD(c.spanT, unitD(high, low), c.lowT);
  t = t > 1.0 ? 1.0 : t;
  t = t < -1.0 ? -1.0 : t;
  double v = math::fmaD(math::erfinvD(t), c.scale, c.mean);
  v = v < c.a ? c.a : v;
  return v > c.b ? c.b : v;
}

}  // namespace shardc::runtime::init
