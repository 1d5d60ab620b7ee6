// Checks a plan's `load` instructions against their checkpoints before a
// run (bad checkpoints are the user's input: exit 2, not a failed run), and
// sizes the io buffer the loads share.
#pragma once

#include "runtime/Plan.h"

#include <cstdint>

namespace shardc::runtime::checkpoint {

/// Name of the init buffer every `load` converts through (category io).
inline constexpr const char *kIoBufferName = "checkpoint.io";

/// Opens every checkpoint the plan's `load`s name and checks each tensor:
/// present, same shape as its parameter, a floating dtype. Throws
/// CheckpointError "FILE: tensor 'x': reason".
void checkPlanLoads(const plan::Plan &plan);

/// Sets the bytes of init's io buffer to ioBufferBytesFor(largest loaded
/// local shard, cap). No-op without loads. Throws RuntimeError if cap < 8.
void setIoBufferCap(plan::Plan &plan, int64_t cap);

}  // namespace shardc::runtime::checkpoint
