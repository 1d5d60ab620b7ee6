// rope's inverse frequencies, computed once on the host for every backend:
// torch's inv_freq = 1.0 / (theta ** (arange(0, D, 2).float() / D)) in
// float32 with std::pow. The CUDA kernel receives this table instead of
// calling device powf, whose last bit can differ from the host's and whose
// error grows with the position it multiplies (issue 17).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace shardc::runtime {

/// D / 2 entries: invFreq[j] = 1 / theta^(2j / D), all in float32.
inline std::vector<float> ropeInverseFrequencies(double theta, int64_t headDim) {
  const int64_t half = headDim / 2;
  std::vector<float> invFreq(static_cast<size_t>(half > 0 ? half : 0));
  const float base = static_cast<float>(theta);
  for (int64_t j = 0; j < half; ++j)
    invFreq[static_cast<size_t>(j)] =
        1.0f / std::pow(base, static_cast<float>(2 * j) / static_cast<float>(headDim));
  return invFreq;
}

}  // namespace shardc::runtime
