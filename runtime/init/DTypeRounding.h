// Rounding computed values into the stored dtype, each exactly once.
#pragma once

#include "runtime/HalfFloat.h"

#include <bit>
#include <cmath>
#include <cstdint>

namespace shardc::runtime::init {

/// double -> float rounded to odd: the sticky form that makes a second
/// rounding (float -> half, 13+ bits shorter) equal to one direct
/// double -> half rounding to nearest even.
inline float roundToOddFloat(double value) {
  float nearest = static_cast<float>(value);
  if (static_cast<double>(nearest) == value || value != value) return nearest;
  uint32_t bits = std::bit_cast<uint32_t>(nearest);
  // Truncate toward zero first: step the magnitude back if rounding went up.
  if (std::abs(static_cast<double>(nearest)) > std::abs(value)) bits -= 1;
  return std::bit_cast<float>(bits | 1u);
}

/// double -> float16 / bfloat16 bits with one rounding to nearest even.
inline uint16_t doubleToHalfBits(double value) { return floatToHalfBits(roundToOddFloat(value)); }
inline uint16_t doubleToBFloat16Bits(double value) {
  return floatToBFloat16Bits(roundToOddFloat(value));
}

}  // namespace shardc::runtime::init
