// Philox4x32-10, the counter-based RNG of Salmon et al., "Parallel Random
// Numbers: As Easy as 1, 2, 3" (SC11). Every output is a pure function of
// (counter, key), which is what makes sharded init world-size invariant:
// an element's random bits depend on its index, not on who computes it.
//
// Header-only and constexpr so the same code runs on the host, in CUDA
// kernels, and in static_asserts; no std:: containers for that reason.
#pragma once

#include "runtime/HostDevice.h"

#include <cstdint>

namespace shardc::runtime::philox {

struct Counter { uint32_t v[4]; };
struct Key { uint32_t v[2]; };

inline constexpr uint32_t kM0 = 0xD2511F53u;
inline constexpr uint32_t kM1 = 0xCD9E8D57u;
inline constexpr uint32_t kW0 = 0x9E3779B9u;  // golden ratio
inline constexpr uint32_t kW1 = 0xBB67AE85u;  // sqrt(3) - 1

SHARDC_HOST_DEVICE constexpr Counter round(Counter c, Key k) {
  uint64_t p0 = static_cast<uint64_t>(kM0) * c.v[0];
  uint64_t p1 = static_cast<uint64_t>(kM1) * c.v[2];
  uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
  uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
  return Counter{{hi1 ^ c.v[1] ^ k.v[0], lo1, hi0 ^ c.v[3] ^ k.v[1], lo0}};
}

/// Philox4x32 with 10 rounds (the Random123 default).
SHARDC_HOST_DEVICE constexpr Counter philox4x32_10(Counter counter, Key key) {
  for (int i = 0; i < 10; ++i) {
    if (i > 0) key = Key{{key.v[0] + kW0, key.v[1] + kW1}};
    counter = round(counter, key);
  }
  return counter;
}

/// FNV-1a 32-bit of a byte string: folds a tensor's name into the counter,
/// so values do not depend on what other tensors exist.
SHARDC_HOST_DEVICE constexpr uint32_t fnv1a32(const char *data, uint64_t length) {
  uint32_t hash = 2166136261u;
  for (uint64_t i = 0; i < length; ++i) {
    hash ^= static_cast<uint8_t>(data[i]);
    hash *= 16777619u;
  }
  return hash;
}

/// Uniform in [-1, 1) from the top 24 bits of a word; exact in float and double.
SHARDC_HOST_DEVICE constexpr float uniformMinusOneToOne(uint32_t word) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
}

}  // namespace shardc::runtime::philox
