// float <-> float16 / bfloat16 bit conversions, round-to-nearest-even.
//
// Header-only so kernels, the input generator and checkpoint I/O share one
// definition. NaN stays NaN (quieted); overflow goes to infinity; float16
// subnormals are produced exactly (the default FP rounding mode is assumed:
// the project never builds with -ffast-math).
#pragma once

#include <bit>
#include <cstdint>

namespace shardc::runtime {

inline uint16_t floatToHalfBits(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  uint32_t sign = bits & 0x80000000u;
  bits ^= sign;
  uint16_t out;
  if (bits >= (127u + 16u) << 23) {          // |x| >= 65536: inf or NaN
    out = bits > 0x7f800000u ? 0x7e00 : 0x7c00;
  } else if (bits < (113u << 23)) {          // |x| < 2^-14: subnormal or zero
    // Adding 0.5 puts the float16 subnormal grid at the float's last mantissa
    // bits; the FPU does the round-to-nearest-even.
    constexpr uint32_t magicBits = 126u << 23;  // 0.5f
    float shifted = std::bit_cast<float>(bits) + std::bit_cast<float>(magicBits);
    out = static_cast<uint16_t>(std::bit_cast<uint32_t>(shifted) - magicBits);
  } else {                                   // normal: rebias, round half to even
    uint32_t mantissaOdd = (bits >> 13) & 1u;
    bits += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + mantissaOdd;
    out = static_cast<uint16_t>(bits >> 13);  // a carry into the exponent is right
  }
  return static_cast<uint16_t>(out | (sign >> 16));
}

inline float halfBitsToFloat(uint16_t half) {
  uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  uint32_t exponent = (half >> 10) & 0x1fu;
  uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0x1f)  // inf / NaN
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {   // zero / subnormal: mantissa * 2^-24, exact in float
    float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

inline uint16_t floatToBFloat16Bits(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u)  // NaN: keep sign, force quiet
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float bfloat16BitsToFloat(uint16_t bf16) {
  return std::bit_cast<float>(static_cast<uint32_t>(bf16) << 16);
}

}  // namespace shardc::runtime
