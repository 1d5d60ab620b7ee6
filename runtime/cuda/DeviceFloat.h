// float <-> float16 / bfloat16 bit conversions and the double -> 16-bit
// single rounding, as __host__ __device__ code: the same algorithms as
// runtime/HalfFloat.h and runtime/init/DTypeRounding.h (which use std::
// facilities nvcc device code cannot call), so GPU stores round exactly as
// the CPU's. test/gpu checks them against HalfFloat.h on the host over
// millions of inputs (no GPU needed) and on the device.
#pragma once

#include "runtime/init/InitMath.h"  // SHARDC_HOST_DEVICE, bitsOf/floatOf

#include <cstdint>

namespace shardc::runtime::cuda {

SHARDC_HOST_DEVICE inline uint16_t floatToHalfBitsHD(float value) {
  using init::math::bitsOf;
  using init::math::floatOf;
  uint32_t bits = bitsOf(value);
  uint32_t sign = bits & 0x80000000u;
  bits ^= sign;
  uint16_t out;
  if (bits >= (127u + 16u) << 23) {
    out = bits > 0x7f800000u ? 0x7e00 : 0x7c00;
  } else if (bits < (113u << 23)) {
    constexpr uint32_t magicBits = 126u << 23;  // 0.5f
    float shifted = floatOf(bits) + floatOf(magicBits);
    out = static_cast<uint16_t>(bitsOf(shifted) - magicBits);
  } else {
    uint32_t mantissaOdd = (bits >> 13) & 1u;
    bits += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + mantissaOdd;
    out = static_cast<uint16_t>(bits >> 13);
  }
  return static_cast<uint16_t>(out | (sign >> 16));
}

SHARDC_HOST_DEVICE inline float halfBitsToFloatHD(uint16_t half) {
  using init::math::floatOf;
  uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  uint32_t exponent = (half >> 10) & 0x1fu;
  uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0x1f) return floatOf(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  return floatOf(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

SHARDC_HOST_DEVICE inline uint16_t floatToBFloat16BitsHD(float value) {
  uint32_t bits = init::math::bitsOf(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

SHARDC_HOST_DEVICE inline float bfloat16BitsToFloatHD(uint16_t bf16) {
  return init::math::floatOf(static_cast<uint32_t>(bf16) << 16);
}

/// double -> float rounded to odd (DTypeRounding.h's roundToOddFloat).
SHARDC_HOST_DEVICE inline float roundToOddFloatHD(double value) {
  float nearest = static_cast<float>(value);
  if (static_cast<double>(nearest) == value || value != value) return nearest;
  uint32_t bits = init::math::bitsOf(nearest);
  double nearestAbs = nearest < 0 ? -static_cast<double>(nearest) : static_cast<double>(nearest);
  double valueAbs = value < 0 ? -value : value;
  if (nearestAbs > valueAbs) bits -= 1;
  return init::math::floatOf(bits | 1u);
}

SHARDC_HOST_DEVICE inline uint16_t doubleToHalfBitsHD(double value) {
  return floatToHalfBitsHD(roundToOddFloatHD(value));
}
SHARDC_HOST_DEVICE inline uint16_t doubleToBFloat16BitsHD(double value) {
  return floatToBFloat16BitsHD(roundToOddFloatHD(value));
}

/// max(a, b) that propagates NaN: a NaN anywhere in a row makes the row's
/// maximum NaN, so softmax and sdpa rows come out NaN explicitly, as on the
/// CPU (fmaxf would return the other operand and drop it).
SHARDC_HOST_DEVICE inline float maxPropagatingNaN(float a, float b) {
  if (a != a) return a;
  if (b != b) return b;
  return a > b ? a : b;
}

/// Whether (value b, index bi) is a better extreme than (a, ai): a NaN beats
/// a number, then the larger (smaller, `largest` false) value, then the
/// smaller index; index -1 (a thread that saw no element) loses to
/// everything. A strict total order over distinct indices, so any split of
/// the elements over threads and any combining tree picks the CPU's first
/// extreme (CudaReduce.cu's block path; test/gpu checks it on the host).
SHARDC_HOST_DEVICE inline bool betterExtreme(bool largest, double b, int64_t bi, double a,
                                             int64_t ai) {
  if (bi < 0) return false;
  if (ai < 0) return true;
  const bool aNaN = a != a, bNaN = b != b;
  if (aNaN || bNaN) return bNaN && (!aNaN || bi < ai);
  if (b == a) return bi < ai;
  return largest ? b > a : b < a;
}

}  // namespace shardc::runtime::cuda
