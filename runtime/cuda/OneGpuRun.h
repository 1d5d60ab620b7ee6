// Runs a plan's init (and forward, when it has one) at its world size N with
// every rank a thread of this process on ONE GPU: each rank its own
// CudaDevice (stream, exact ledger) on the same ordinal, collectives through
// DeviceLocalCommunicator (NCCL refuses two ranks on one device). Reports
// each rank's measured bytes beside MemoryModel's prediction and the
// device-wide cudaMemGetInfo figure (the driver's, shared by all ranks).
#pragma once

#include "runtime/Device.h"
#include "runtime/HostTensor.h"
#include "runtime/MemoryModel.h"
#include "runtime/Plan.h"

#include <chrono>
#include <cstddef>
#include <vector>

namespace shardc::runtime::cuda {

struct OneGpuRunOptions {
  int ordinal = 0;
  uint64_t seed = 0;
  /// Inputs of "forward" (by position, host tensors); forward runs when the
  /// plan has one.
  std::vector<HostTensor> inputs;
  /// Copy every rank's local param storage (padding included) to the host
  /// after init (OneGpuRankReport::shards).
  bool keepShards = false;
  std::chrono::duration<double> timeout = std::chrono::seconds(60);
};

struct OneGpuRankReport {
  int64_t initPeak = 0, forwardPeak = 0, afterForward = 0;  // the ledger's
  std::vector<LiveAllocation> initLiveAtPeak, forwardLiveAtPeak;
  MemoryPrediction predictedInit, predictedForward;
  std::vector<std::vector<std::byte>> shards;  // keepShards
  std::vector<HostTensor> outputs;             // forward's, copied to the host
};

struct OneGpuRunResult {
  std::vector<OneGpuRankReport> ranks;
  /// cudaMemGetInfo's used bytes when every rank had finished forward (its
  /// buffers still live) minus before the ranks started: all ranks together.
  int64_t deviceUsedAfterForward = 0;
};

/// Throws RuntimeError naming the first failing rank (the others are
/// released by the group's abort, never left waiting).
OneGpuRunResult runOnOneGpu(const plan::Plan &plan, const OneGpuRunOptions &options);

}  // namespace shardc::runtime::cuda
