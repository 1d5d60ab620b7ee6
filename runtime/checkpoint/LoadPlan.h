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

/// Sizes each function's io buffer from the checkpoints' headers: the
/// largest local shard a load converts (the file's dtype differs from the
/// parameter's), in the file's dtype, rounded up to 8 bytes, at most `cap`;
/// 0 bytes when every load reads its own dtype (straight into the shard).
/// A load whose file or tensor cannot be read yet counts 8 bytes per
/// element (checkPlanLoads says why). No-op without loads. Throws
/// RuntimeError if cap < 8.
void setIoBufferCap(plan::Plan &plan, int64_t cap);

}  // namespace shardc::runtime::checkpoint
