// Inputs for runs where the user supplies none: reproducible, independent of
// world size and of the other inputs, and identical on every backend.
#pragma once

#include "runtime/HostTensor.h"

#include <string>

namespace shardc::runtime {

/// Element i of tensor `name` is uniformMinusOneToOne(word 0 of
/// philox4x32_10(counter = {i lo, i hi, fnv1a32(name), 0},
///               key = {seed lo, seed hi})), converted to dtype (round to
/// nearest even for float16/bfloat16).
HostTensor makeDeterministicInput(const std::string &name, plan::DType dtype,
                                  const std::vector<int64_t> &shape, uint64_t seed);

}  // namespace shardc::runtime
