// sdpa's shape rules, stated once and read by the graph reader, the tc
// verifier and the kernels' checks (runtime/ForwardChecks.cpp): the operands
// q, k, v, and the optional additive mask (torch's float attn_mask).
#pragma once

#include <cstdint>
#include <span>

namespace shardc::runtime {

/// Whether q [B, H, T, E], k [B, Hkv, S, E] and v [B, Hkv, S, Ev] fit
/// attention: 4 dims each, one batch, k and v the same heads and keys, q and
/// k the same head dim, and H a multiple of Hkv. Hkv < H is grouped-query
/// attention (Llama 3, Mistral, Qwen; Falcon's multi-query at Hkv = 1):
/// query head h reads key / value head h / (H / Hkv), the head torch's
/// enable_gqa and transformers' repeat_kv give it, without the copies.
inline bool attentionShapesFit(std::span<const int64_t> q, std::span<const int64_t> k,
                               std::span<const int64_t> v) {
  if (q.size() != 4 || k.size() != 4 || v.size() != 4) return false;
  const bool heads = k[1] == 0 ? q[1] == 0 : q[1] % k[1] == 0;
  return q[0] == k[0] && k[0] == v[0] && heads && k[1] == v[1] && k[2] == v[2] &&
         q[3] == k[3];
}

/// Whether a mask of shape `mask` broadcasts to the scores [B, H, T, S]:
/// 4 dims, each 1 or the scores'.
inline bool attentionMaskFits(std::span<const int64_t> mask, std::span<const int64_t> scores) {
  if (mask.size() != 4 || scores.size() != 4) return false;
  for (size_t i = 0; i < 4; ++i)
    if (mask[i] != 1 && mask[i] != scores[i]) return false;
  return true;
}

} // namespace shardc::runtime
