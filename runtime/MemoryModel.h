// Predicts a rank's memory from the instruction stream alone.
//
// This is the static half of invariant 4: the executor allocates exactly what
// this model adds (same sizes, same categories, same labels, same order), so
// the predicted peak and live-at-peak list equal what CpuDevice measures.
// Rules, mirrored by Executor.cpp:
//   - `carriedIn` (params allocated by an earlier function) is live at entry;
//   - function inputs are allocated, category io, label = buffer name, in
//     Function::inputs order, before the first instruction;
//   - an instruction whose `rank` attribute names another rank is skipped
//     (alloc and free included), so predictions are per rank;
//   - `alloc` of a param buffer adds Param::localBytes (category parameters,
//     label = param name); of any other buffer Buffer::bytes with its
//     category, label = buffer name; `free` subtracts; an alias
//     (Buffer::aliasOf) is never allocated and costs 0 bytes;
//   - an op with a workspace rule in the op table (OpTable.def: `orthogonal`,
//     orthogonalWorkBytes(shape, dtype), label "<buffer>.qr"; `norm_of`,
//     "<buffer>.norm"; `moe_experts`, moeExpertsWorkBytes from its operands'
//     shapes, "<buffer>.experts") allocates it for the instruction's
//     duration, category activations;
//     other ops allocate nothing
//     (forward kernels use bounded per-thread scratch below 1 MiB, which is
//     not accounted; see docs/plan.md);
//   - nothing is released at function end (outputs and leftovers stay live
//     until the caller releases them).
// Every rank stores the same padded bytes; only rank-conditional
// instructions (e.g. the owner rank's full tensor of a non-shardable param)
// make predictions differ between ranks.
#pragma once

#include "runtime/Device.h"
#include "runtime/Plan.h"

#include <string>
#include <vector>

namespace shardc::runtime {

struct MemoryPrediction {
  int64_t peakBytes = 0;
  std::vector<LiveAllocation> liveAtPeak;  // allocation order
  CategoryBytes peakByCategory{};
  int64_t endBytes = 0;
  std::vector<LiveAllocation> liveAtEnd;
  CategoryBytes endByCategory{};
  /// Param storage live at the end (carriedIn plus params this function
  /// allocated): pass it as `carriedIn` when predicting the next function.
  std::vector<LiveAllocation> paramsAtEnd;
};

/// Throws RuntimeError (with the instruction's place) when the stream is
/// inconsistent: alloc of a live buffer, free of a dead or param buffer,
/// unknown function, rank out of range.
MemoryPrediction predictMemory(const plan::Plan &plan, const std::string &function,
                               int64_t rank,
                               const std::vector<LiveAllocation> &carriedIn = {});

/// The bytes a rank holds if nothing were sharded: sum of Param::fullBytes.
int64_t unshardedParamBytes(const plan::Plan &plan);

}  // namespace shardc::runtime
