// Runs a Plan on N ranks that are threads of this process (the `local`
// backend), and reports measured beside predicted memory.
#pragma once

#include "runtime/Device.h"
#include "runtime/HostTensor.h"
#include "runtime/Plan.h"

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace shardc::runtime {

struct RunOptions {
  /// Inputs of "forward", matched to its input buffers by name; dtype and
  /// shape must match. See makeDeterministicInputs for when the user has none.
  std::vector<HostTensor> inputs;
  /// After forward, all-gather every sharded param and return the full
  /// tensors (for --save-params). This runs after the forward measurement
  /// window closed, so it never changes the reported init/forward peaks.
  bool gatherParams = false;
  /// After init, copy every rank's local param storage (its shards, padding
  /// included) into RunResult::shards (the embedded API's shard access).
  /// Outside every measurement window.
  bool keepShards = false;
  /// When set, after forward (outside the measured windows) every rank
  /// writes its own rows of every parameter into this one safetensors file
  /// (runtime/checkpoint/CooperativeWriter.h): nothing is gathered, and the
  /// file appears only when every rank succeeded (--save, --save-params).
  std::string savePath;
  /// The run's seed (the Philox key of every generator; docs/rng.md).
  uint64_t seed = 0;
  std::chrono::duration<double> timeout = std::chrono::seconds(60);
  /// Exclusive upper bounds of int64 forward inputs (token ids, targets:
  /// the vocabulary size), by input name, for makeDeterministicInputs; an
  /// int64 input not listed gets kDefaultIntInputBound. runLocal itself does
  /// not read it (it takes `inputs` as given).
  std::map<std::string, int64_t> intInputBounds;
};

/// Measured and predicted memory of one function on one rank.
struct PhaseReport {
  int64_t peakBytes = 0;
  std::vector<LiveAllocation> liveAtPeak;
  CategoryBytes peakByCategory{};
  int64_t endBytes = 0;  // live when the function returned
  int64_t predictedPeakBytes = 0;
  std::vector<LiveAllocation> predictedLiveAtPeak;
  int64_t predictedEndBytes = 0;
  /// Wall time of the function on this rank (collectives' waits included).
  double seconds = 0;
};

struct RankReport {
  int64_t rank = 0;
  int64_t paramBytes = 0;  // param storage held after init
  PhaseReport init;
  std::optional<PhaseReport> forward;  // when the plan has "forward"
};

struct RunResult {
  std::vector<HostTensor> outputs;  // forward outputs, from rank 0
  std::vector<HostTensor> params;   // full params, when gatherParams
  /// shards[rank][i]: plan.params[i]'s local storage on `rank` (local
  /// shape), when keepShards.
  std::vector<std::vector<HostTensor>> shards;
  std::vector<RankReport> ranks;
  int64_t unshardedParamBytes = 0;  // sum of Param::fullBytes: the baseline
  /// The OS's figure beside the ledger's (runtime/ResidentMemory.h): how far
  /// this process's resident set rose above its size when the rank threads
  /// started, at its highest, until they all ended. Measured by runLocal;
  /// nullopt where /proc cannot say.
  std::optional<int64_t> residentPeakGrowthBytes;
};

/// Runs "init" then "forward" (when present) on plan.worldSize threads, each
/// rank's kernels with defaultKernelThreads(worldSize) threads. Memory is
/// predicted per rank (rank-conditional instructions differ between ranks).
/// A failure on any rank aborts the others' collectives and is rethrown as
/// RuntimeError("rank R: ..."); the first failure wins. Also fails when
/// ranks produce outputs that are not byte-identical.
RunResult runLocal(const plan::Plan &plan, const RunOptions &options);

/// Orders `given` like forward's inputs, checking each (name known, given
/// once, dtype, shape and byte count as the function expects).
std::vector<HostTensor> matchForwardInputs(const plan::Function &forward,
                                           const std::vector<HostTensor> &given);

/// Deterministic inputs (makeDeterministicInput) for every forward input;
/// int64 inputs named in `intBounds` are drawn from [0, bound). A name in
/// `intBounds` that is not an int64 forward input is an error.
std::vector<HostTensor> makeDeterministicInputs(
    const plan::Plan &plan, uint64_t seed,
    const std::map<std::string, int64_t> &intBounds = {});

struct MemoryPrediction;

/// Copies what `device` measured for one function into `report` (shared by
/// the local and MPI runners).
void measure(const CpuDevice &device, PhaseReport &report);

/// Seconds of wall time since `start` (PhaseReport::seconds).
double secondsSince(std::chrono::steady_clock::time_point start);

/// Copies the memory model's prediction for one function into `report`.
void predict(const MemoryPrediction &prediction, PhaseReport &report);
}  // namespace shardc::runtime
