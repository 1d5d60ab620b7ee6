// Inputs for runs where the user supplies none: reproducible, independent of
// world size and of the other inputs, and identical on every backend.
#pragma once

#include "runtime/HostTensor.h"

#include <cstdint>
#include <optional>
#include <string>

namespace shardc::runtime {

/// The exclusive upper bound of int64 inputs when none is given.
inline constexpr int64_t kDefaultIntInputBound = int64_t(1) << 31;

/// Element i of tensor `name` comes from
///   w = philox4x32_10(counter = {i lo, i hi, fnv1a32(name), 0},
///                     key = {seed lo, seed hi}).
/// Floating dtypes: uniformMinusOneToOne(w[0]), converted to dtype (round to
/// nearest even for float16/bfloat16).
/// int64 (token ids, targets): an integer in [0, bound), bound =
/// `intUpperBound` (exclusive; e.g. the vocabulary size) or
/// kDefaultIntInputBound: with r = w[0] | w[1] << 32 (64 random bits), the
/// value is floor(r * bound / 2^64) (128-bit product; no modulo).
/// Throws RuntimeError when the bound is given for a floating dtype or is < 1.
HostTensor makeDeterministicInput(const std::string &name, plan::DType dtype,
                                  const std::vector<int64_t> &shape, uint64_t seed,
                                  std::optional<int64_t> intUpperBound = std::nullopt);

}  // namespace shardc::runtime
