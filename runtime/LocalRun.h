// Runs a Plan on N ranks that are threads of this process (the `local`
// backend), and reports measured beside predicted memory.
#pragma once

#include "runtime/Device.h"
#include "runtime/HostTensor.h"
#include "runtime/OpProfile.h"
#include "runtime/Plan.h"
#include "runtime/SessionRank.h"

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
  /// The same for the optimizer state alone (optim.*: moments, momentum
  /// buffers, the step count; runtime::optimizerStateView), after the last
  /// training step: what --load-optimizer resumes from (docs/training.md).
  std::string saveOptimizerPath;
  /// The run's seed (the Philox key of every generator; docs/rng.md).
  uint64_t seed = 0;
  std::chrono::duration<double> timeout = std::chrono::seconds(60);
  /// Exclusive upper bounds of int64 forward inputs (token ids, targets:
  /// the vocabulary size), by input name, for makeDeterministicInputs; an
  /// int64 input not listed gets kDefaultIntInputBound. runLocal itself does
  /// not read it (it takes `inputs` as given).
  std::map<std::string, int64_t> intInputBounds;
  /// The ranks to run (sorted, distinct; empty = every rank). A proper
  /// subset runs planForRanks(plan, ranks) (runtime/RankSubset.h): the plan
  /// must have no "forward" (it would gather absent ranks' shards) and
  /// gatherParams must be off; `savePath` then gets only these ranks' rows.
  std::vector<int64_t> ranks;
  /// Kernel threads per rank of the default (CPU) ranks; 0 =
  /// defaultKernelThreads(ranks run). Ranks from a factory have their own.
  int threads = 0;
  /// Fill RunResult::process and residentPeakGrowthBytes: restarts the
  /// process's peak RSS (VmHWM, a process-wide side effect, so off by
  /// default) before the ranks start.
  bool measureResident = false;
  /// Data-parallel forward (runtime/DataParallel.h): `inputs` are the
  /// global batch, split along dim 0 over the ranks; each rank runs the
  /// plan's forward for its micro-batch, and RunResult::outputs are every
  /// rank's outputs concatenated in rank order. The plan must come from
  /// compiler::compileDataParallel for that batch.
  bool dataParallel = false;
  /// Runs forward this many more times after the measured one, on the same
  /// inputs, keeping the reuse cache between them (a serving or training
  /// loop's steady state: RankReport::repeats). Every repeat's outputs must
  /// equal the first forward's byte for byte, and its ledger peak the first
  /// forward's (a RuntimeError says which differs). The first forward's
  /// report and the outputs are unchanged by it.
  int forwardRepeats = 0;
  /// The repeats are training steps (a plan whose forward ends in optimizer
  /// steps, docs/training.md): they update the parameters, so their outputs
  /// (the loss) change and are returned in RunResult::stepOutputs; only
  /// their ledger peak must equal the first step's. --save then holds the
  /// trained parameters.
  bool trainingSteps = false;
  /// trainingSteps: more batches, each ordered and shaped like `inputs`
  /// (for dataParallel, the same global batch). Step k (1-based) runs on
  /// `inputs` when (k - 1) mod (1 + size) is 0, else on
  /// moreStepInputs[(k - 1) mod (1 + size) - 1]: a loop over a small
  /// dataset. Empty: every step on `inputs`.
  std::vector<std::vector<HostTensor>> moreStepInputs;
  /// Times every op of the forwards (the measured one and the repeats) on
  /// each rank: RankReport::forwardProfile (OpProfile.h).
  bool profileForward = false;
};

/// What the OS saw of this process while the ranks ran (ResidentMemory.h;
/// -1 unless RunOptions::measureResident).
struct ProcessMemoryReport {
  int64_t residentBefore = -1;  // RSS just before the rank threads started
  int64_t peakResident = -1;    // peak RSS from then until they all ended
  /// The kernel refused to restart the peak: peakResident counts from the
  /// process's start (the compiler included).
  bool peakSinceStart = false;
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
  /// CPU time of the rank's own thread during the function (forward only):
  /// all of the forward's CPU time when its kernels run on that thread
  /// (--threads 1); unlike `seconds`, other processes on the cores do not
  /// inflate it (bench/speed_ratio.py).
  double threadCpuSeconds = 0;
  /// Blocks of HostMemory::kKeptBlock and up of the function served
  /// from fresh memory vs from blocks an earlier request released, and the
  /// bytes first-touched: what the kernel had to fault in and clear.
  int64_t freshLargeBlocks = 0;
  int64_t reusedLargeBlocks = 0;
  int64_t firstTouchBytes = 0;
  /// The host allocator's peak since its last trim (HostMemory's
  /// Stats::heldPeakBytes): the ledger's bytes plus the resident bytes of
  /// freed blocks kept for reuse, at most a sixteenth of the peak more (and
  /// 2 MiB of rounding per block). 0 where device memory is not host memory.
  int64_t heldPeakBytes = 0;
};

struct RankReport {
  int64_t rank = 0;
  int64_t paramBytes = 0;  // param storage held after init
  PhaseReport init;
  std::optional<PhaseReport> forward;  // when the plan has "forward"
  /// Wall time of writing this rank's rows with RunOptions::savePath (0
  /// without), the collectives' waits included; outside every peak window.
  double saveSeconds = 0;
  /// One entry per RunOptions::forwardRepeats: wall and thread CPU seconds
  /// of each repeated forward (warm: blocks and caches the first one left).
  struct Repeat {
    double seconds = 0;
    double threadCpuSeconds = 0;
    /// As PhaseReport's: blocks served from fresh memory, bytes first-touched.
    int64_t freshLargeBlocks = 0;
    int64_t firstTouchBytes = 0;
  };
  std::vector<Repeat> repeats;
  /// RunOptions::profileForward: op times summed over the forwards run.
  std::optional<OpProfile> forwardProfile;
};

struct RunResult {
  /// Forward outputs: rank 0's (all ranks' are identical), or with
  /// dataParallel every rank's rows concatenated in rank order.
  std::vector<HostTensor> outputs;
  std::vector<HostTensor> params;   // full params, when gatherParams
  /// trainingSteps: rank 0's outputs of steps 2, 3, ... (`outputs` are
  /// step 1's).
  std::vector<std::vector<HostTensor>> stepOutputs;
  /// shards[rank][i]: plan.params[i]'s local storage on `rank` (local
  /// shape), when keepShards.
  std::vector<std::vector<HostTensor>> shards;
  std::vector<RankReport> ranks;
  int64_t unshardedParamBytes = 0;  // sum of Param::fullBytes: the baseline
  ProcessMemoryReport process;
  /// The OS's figure beside the ledger's (runtime/ResidentMemory.h): how far
  /// this process's resident set rose above its size when the rank threads
  /// started, at its highest, until they all ended. Measured by runLocal
  /// with RunOptions::measureResident; nullopt without, or where /proc
  /// cannot say.
  std::optional<int64_t> residentPeakGrowthBytes;
  /// Where the ranks ran (SessionRank::deviceName: "cpu", "cuda:0 (...)").
  std::string device = "cpu";
  /// The device driver's count (SessionRank::driverUsedBytes: a GPU's
  /// cudaMemGetInfo, every rank together) while every rank held its shards
  /// after init, minus before init; nullopt on the CPU.
  std::optional<int64_t> driverBytesHoldingShards;
  /// The same count after the measured forward, its outputs still live on
  /// every rank (the figure FSDP tools report per rank "after forward").
  std::optional<int64_t> driverBytesAfterForward;
};

/// Runs "init" then "forward" (when present) on plan.worldSize threads (or
/// options.ranks). Each rank's device, backend and copies come from
/// `ranks` (runtime/SessionRank.h), called with each global rank run; empty:
/// the CPU, each rank's kernels with options.threads threads. Memory is
/// predicted per rank (rank-conditional instructions differ between ranks).
/// A failure on any rank aborts the others' collectives and is rethrown as
/// RuntimeError("rank R: ..."); the first failure wins. Also fails when
/// ranks produce outputs that are not byte-identical.
RunResult runLocal(const plan::Plan &plan, const RunOptions &options,
                   const SessionRankFactory &ranks = {});

/// Orders `given` like forward's inputs, checking each (name known, given
/// once, dtype, shape and byte count as the function expects). With
/// `anyBatchRows` dim 0 may have any size: the global batch of a
/// data-parallel run (runtime/DataParallel.h).
std::vector<HostTensor> matchForwardInputs(const plan::Function &forward,
                                           const std::vector<HostTensor> &given,
                                           bool anyBatchRows = false);

/// Deterministic inputs (makeDeterministicInput) for every forward input;
/// int64 inputs named in `intBounds` are drawn from [0, bound). A name in
/// `intBounds` that is not an int64 forward input is an error.
std::vector<HostTensor> makeDeterministicInputs(
    const plan::Plan &plan, uint64_t seed,
    const std::map<std::string, int64_t> &intBounds = {});

struct MemoryPrediction;

/// Copies what `device` measured for one function into `report` (shared by
/// the local and MPI runners).
/// The device's peak and live figures into `report`, and its block
/// statistics since `since` (the device's trim when defaulted).
void measure(const CpuDevice &device, PhaseReport &report, const HostMemory::Stats &since = {});
/// The same for any device: its ledger's figures, and `blocks` (the
/// device's block statistics now; zeros where it keeps none) minus `since`.
void measure(const Device &device, const HostMemory::Stats &blocks, PhaseReport &report,
             const HostMemory::Stats &since = {});

/// Seconds of wall time since `start` (PhaseReport::seconds).
double secondsSince(std::chrono::steady_clock::time_point start);

/// CPU seconds the calling thread has used (PhaseReport::threadCpuSeconds).
double threadCpuSeconds();

/// Copies the memory model's prediction for one function into `report`.
void predict(const MemoryPrediction &prediction, PhaseReport &report);
}  // namespace shardc::runtime
