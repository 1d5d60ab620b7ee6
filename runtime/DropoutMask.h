// Dropout's keep mask (docs/rng.md, "Dropout masks"): whether element i of
// a dropout's input survives is a pure function of (seed, stream, step, i),
// i the element's row-major index in the whole tensor (the global batch in
// a data-parallel run). So the mask does not depend on the world size, the
// rank's rows, the thread count or the device, and backward recomputes it
// instead of saving it. Header-only: the CPU and CUDA kernels share it.
#pragma once

#include "runtime/HostDevice.h"
#include "runtime/Philox.h"

#include <cstdint>

namespace shardc::runtime::dropout {

/// An element is kept when the top 24 bits of its Philox word are at least
/// this: ceil(p * 2^24), so p = 0 keeps all and p = 1 none.
SHARDC_HOST_DEVICE inline uint32_t keepThreshold(double p) {
  if (!(p > 0.0)) return 0;
  if (p >= 1.0) return 1u << 24;
  const double scaled = p * 16777216.0;  // exact: p is a double, 2^24 a power of 2
  uint32_t t = static_cast<uint32_t>(scaled);
  return static_cast<double>(t) < scaled ? t + 1 : t;
}

/// The Philox words of block `block` (elements 4 block .. 4 block + 3).
SHARDC_HOST_DEVICE inline philox::Counter maskWords(uint64_t seed, uint32_t stream, uint32_t step,
                                                    uint64_t block) {
  const philox::Counter counter{
      {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), stream, step}};
  const philox::Key key{{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}};
  return philox::philox4x32_10(counter, key);
}

/// Whether element `i` is kept.
SHARDC_HOST_DEVICE inline bool keeps(uint64_t seed, uint32_t stream, uint32_t step, uint64_t i,
                                     uint32_t threshold) {
  return (maskWords(seed, stream, step, i / 4).v[i % 4] >> 8) >= threshold;
}

}  // namespace shardc::runtime::dropout
