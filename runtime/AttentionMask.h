// sdpa's optional additive mask (torch's float attn_mask): the one statement
// of its shape rule, read by the graph reader, the tc verifier and the
// kernels' checks (runtime/ForwardChecks.cpp).
#pragma once

#include <cstdint>
#include <span>

namespace shardc::runtime {

/// Whether a mask of shape `mask` broadcasts to the scores [B, H, T, S]:
/// 4 dims, each 1 or the scores'.
inline bool attentionMaskFits(std::span<const int64_t> mask, std::span<const int64_t> scores) {
  if (mask.size() != 4 || scores.size() != 4) return false;
  for (size_t i = 0; i < 4; ++i)
    if (mask[i] != 1 && mask[i] != scores[i]) return false;
  return true;
}

} // namespace shardc::runtime
