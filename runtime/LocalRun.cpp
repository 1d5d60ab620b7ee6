#include "runtime/LocalRun.h"

#include "runtime/DataParallel.h"
#include "runtime/DeterministicInput.h"
#include "runtime/Executor.h"
#include "runtime/Kernels.h"
#include "runtime/LocalCommunicator.h"
#include "runtime/PlanQueries.h"
#include "runtime/MemoryModel.h"
#include "runtime/PlanCheck.h"
#include "runtime/RankThreads.h"
#include "runtime/RankSubset.h"
#include "runtime/ResidentMemory.h"
#include "runtime/SessionRank.h"
#include "runtime/RuntimeError.h"
#include "runtime/checkpoint/CooperativeWriter.h"

#include <cstring>
#include <ctime>

namespace shardc::runtime {
using namespace shardc::plan;

namespace {

/// What one rank thread produces.
struct RankOutcome {
  RankReport report;
  std::vector<HostTensor> outputs;
  std::vector<HostTensor> params;
  std::vector<HostTensor> shards;  // keepShards: local param storage after init
  std::vector<std::vector<HostTensor>> stepOutputs;  // trainingSteps: each later step's
};

/// A repeated forward must reproduce the first one: the same bytes in
/// every output and the same ledger peak (the plan is the same program).
/// A training step changes the parameters, hence its outputs: only its
/// peak is checked (`training`).
void checkRepeat(int repeat, const std::vector<HostTensor> &outputs,
                 const std::vector<HostTensor> &first, int64_t peakBytes, int64_t firstPeakBytes,
                 bool training) {
  const std::string place =
      training ? "training step " + std::to_string(repeat + 1)
               : "forward repeat " + std::to_string(repeat);
  for (size_t i = 0; i < outputs.size() && i < first.size() && !training; ++i) {
    if (outputs[i].data != first[i].data)
      throw RuntimeError(place + ": output '" + outputs[i].name +
                         "' differs from the first forward's (a kernel that is not "
                         "deterministic, or one reading memory it did not write)");
  }
  if (peakBytes != firstPeakBytes)
    throw RuntimeError(place + ": ledger peak " + std::to_string(peakBytes) +
                       " bytes, the first forward's was " + std::to_string(firstPeakBytes));
}

/// Everything one rank thread of runLocal does on `rank` (its device, its
/// backend, its state). `comm` is the plan's world, `peers` the ranks
/// actually run (the same group unless `subset` names them: a --ranks run),
/// `hostComm` the same ranks over host memory (the cooperative writer's
/// bookkeeping). `forwardName` is this rank's forward function (its own
/// micro-batch's with --data-parallel).
struct RankRun {
  const Plan &plan;
  const std::string &forwardName;
  /// The rank's inputs of each batch (RunOptions::inputs, then
  /// moreStepInputs); step k runs on *batches[(k - 1) % size].
  const std::vector<const std::vector<HostTensor> *> &batches;
  const RunOptions &options;
  const std::vector<int64_t> &subset;
  /// Called on every rank, where the driver's device-wide count is read
  /// (empty where the device has none): between init and forward, while
  /// every rank holds its shards and nothing else; and after the measured
  /// forward, while its outputs (and inputs) are still live.
  const std::function<void(SessionRank &, Communicator &peers, std::optional<int64_t> &into)>
      &readDriver;
  std::optional<int64_t> &driverAfterInit, &driverAfterForward;
};

std::vector<TensorView> runOn(SessionRank &rank, const Plan &plan, const std::string &function,
                              Communicator &comm, const std::vector<HostTensor> &inputs,
                              uint64_t seed) {
  return runFunction(plan, function, rank.backend(), comm, rank.state(), inputs, seed,
                     "executeFunction");
}

void runRank(const RankRun &run, SessionRank &rank, Communicator &comm, Communicator &peers,
             Communicator &hostComm, RankOutcome &outcome) {
  const Plan &plan = run.plan;
  const RunOptions &options = run.options;
  Device &device = rank.device();
  RankState &state = rank.state();
  outcome.report.rank = state.rank();
  device.resetPeak();
  auto initStart = std::chrono::steady_clock::now();
  runOn(rank, plan, "init", comm, {}, run.options.seed);
  outcome.report.init.seconds = secondsSince(initStart);
  measure(device, rank.blockStats(), outcome.report.init);
  state.releaseFunctionBuffers();  // init's leftovers; params persist
  rank.trimReuseCache();
  outcome.report.paramBytes = device.currentBytes(Category::Parameter);
  if (options.keepShards) {
    // Host copies, outside the device's accounting: measurements unchanged.
    for (size_t i = 0; i < plan.params.size(); ++i) {
      const Param &p = plan.params[i];
      const DeviceBuffer *local = state.paramStorage(static_cast<int32_t>(i));
      if (!local) throw RuntimeError("keeping shards: init did not allocate '" + p.name + "'");
      HostTensor shard{p.name, p.dtype, p.localShape(), {}};
      shard.data.resize(static_cast<size_t>(p.localBytes()));
      if (!shard.data.empty()) rank.copyToHost(shard.data.data(), local->data(), shard.data.size());
      outcome.shards.push_back(std::move(shard));
    }
  }
  if (run.readDriver) run.readDriver(rank, peers, run.driverAfterInit);

  if (plan.function("forward")) {
    if (options.profileForward) state.profile = &outcome.report.forwardProfile.emplace();
    device.resetPeak();
    auto forwardStart = std::chrono::steady_clock::now();
    const double forwardCpuStart = threadCpuSeconds();
    auto views = runOn(rank, plan, run.forwardName, comm, *run.batches[0], run.options.seed);
    if (!outcome.report.forward) outcome.report.forward.emplace();
    outcome.report.forward->seconds = secondsSince(forwardStart);
    outcome.report.forward->threadCpuSeconds = threadCpuSeconds() - forwardCpuStart;
    measure(device, rank.blockStats(), *outcome.report.forward);  // since the trim
    for (const TensorView &view : views) outcome.outputs.push_back(rank.toHost(view));
    if (run.readDriver) run.readDriver(rank, peers, run.driverAfterForward);
    state.releaseFunctionBuffers();
    // Repeats keep the reuse cache: the trim comes after the last one.
    for (int repeat = 1; repeat <= options.forwardRepeats; ++repeat) {
      device.resetPeak();
      const HostMemory::Stats blocksBefore = rank.blockStats();
      const auto start = std::chrono::steady_clock::now();
      const double cpuStart = threadCpuSeconds();
      const std::vector<HostTensor> &batch = *run.batches[repeat % run.batches.size()];
      auto again = runOn(rank, plan, run.forwardName, comm, batch, run.options.seed);
      const double seconds = secondsSince(start), cpuSeconds = threadCpuSeconds() - cpuStart;
      const HostMemory::Stats &blocks = rank.blockStats();
      outcome.report.repeats.push_back(
          {seconds, cpuSeconds, static_cast<int64_t>(blocks.freshBlocks - blocksBefore.freshBlocks),
           static_cast<int64_t>(blocks.freshBytes - blocksBefore.freshBytes)});
      std::vector<HostTensor> outputs;
      for (const TensorView &view : again) outputs.push_back(rank.toHost(view));
      checkRepeat(repeat, outputs, outcome.outputs, device.peakBytes(),
                  outcome.report.forward->peakBytes, options.trainingSteps);
      if (options.trainingSteps) outcome.stepOutputs.push_back(std::move(outputs));
      state.releaseFunctionBuffers();
    }
    state.profile = nullptr;
    rank.trimReuseCache();
  }

  // Outside every measurement window (both reports are already taken).
  if (!options.savePath.empty() || !options.saveOptimizerPath.empty()) {
    const auto saveStart = std::chrono::steady_clock::now();
    if (!options.savePath.empty()) rank.saveRows(plan, hostComm, options.savePath, run.subset);
    if (!options.saveOptimizerPath.empty())
      rank.saveRows(optimizerStateView(plan), hostComm, options.saveOptimizerPath, run.subset);
    outcome.report.saveSeconds = secondsSince(saveStart);
  }
  if (options.gatherParams) {
    for (size_t i = 0; i < plan.params.size(); ++i) {
      const Param &p = plan.params[i];
      const DeviceBuffer *local = state.paramStorage(static_cast<int32_t>(i));
      if (!local) throw RuntimeError("gathering params: init did not allocate '" + p.name + "'");
      HostTensor full{p.name, p.dtype, p.shape, {}};
      full.data.resize(static_cast<size_t>(p.fullBytes()));
      // Padding rows are only at the end, so the full tensor is a prefix.
      if (p.sharded()) {
        DeviceBuffer gathered = device.allocate(p.gatheredBytes(plan.worldSize),
                                                Category::Gathered, p.name + ".save");
        rank.backend().beforeCollective(comm);
        comm.allGather(local->data(), static_cast<size_t>(p.localBytes()), gathered.data());
        if (!full.data.empty()) rank.copyToHost(full.data.data(), gathered.data(), full.data.size());
      } else if (!full.data.empty()) {
        rank.copyToHost(full.data.data(), local->data(), full.data.size());
      }
      if (state.rank() == 0) outcome.params.push_back(std::move(full));
    }
  }
}

}  // namespace

std::vector<HostTensor> matchForwardInputs(const Function &forward,
                                           const std::vector<HostTensor> &given,
                                           bool anyBatchRows) {
  std::string expected;
  for (int32_t id : forward.inputs)
    expected += (expected.empty() ? "" : ", ") + forward.buffers[id].name;
  for (const HostTensor &t : given) {
    bool known = false;
    for (int32_t id : forward.inputs) known = known || forward.buffers[id].name == t.name;
    if (!known)
      throw RuntimeError("input '" + t.name + "' is not an input of forward (inputs: " +
                         (expected.empty() ? "none" : expected) + ")");
  }
  std::vector<HostTensor> ordered;
  for (int32_t id : forward.inputs) {
    const Buffer &b = forward.buffers[id];
    const HostTensor *match = nullptr;
    for (const HostTensor &t : given)
      if (t.name == b.name) {
        if (match) throw RuntimeError("input '" + b.name + "' is given twice");
        match = &t;
      }
    if (!match)
      throw RuntimeError("forward input '" + b.name + "' (" + dtypeName(b.dtype) + " " +
                         (anyBatchRows && !b.shape.empty()
                              ? std::string(b.shape.size() > 1 ? "[B, ...]" : "[B]")
                              : shapeToString(b.shape)) +
                         ") was not provided");
    // Data-parallel: dim 0 is the global batch, any size; the rest must match.
    auto rows = [&](const std::vector<int64_t> &shape) {
      return anyBatchRows && !shape.empty()
                 ? std::vector<int64_t>(shape.begin() + 1, shape.end())
                 : shape;
    };
    if (match->dtype != b.dtype || match->shape.size() != b.shape.size() ||
        rows(match->shape) != rows(b.shape))
      throw RuntimeError(
          "input '" + b.name +
          "': " + (anyBatchRows ? "the data-parallel forward expects " : "forward expects ") +
          dtypeName(b.dtype) + " " + shapeToString(b.shape) +
          (anyBatchRows && !b.shape.empty() ? " with any number of rows in dim 0" : "") + ", got " +
          dtypeName(match->dtype) + " " + shapeToString(match->shape));
    if (static_cast<int64_t>(match->data.size()) != match->expectedBytes())
      throw RuntimeError("input '" + b.name + "': has " + std::to_string(match->data.size()) +
                         " bytes of data, its shape needs " +
                         std::to_string(match->expectedBytes()));
    ordered.push_back(*match);
  }
  return ordered;
}


RunResult runLocal(const Plan &fullPlan, const RunOptions &options,
                   const SessionRankFactory &rankFactory) {
  checkPlan(fullPlan);
  // A proper subset of the ranks does the absent owners' work itself.
  std::vector<int64_t> present = options.ranks, subset;
  if (present.empty())
    for (int64_t r = 0; r < fullPlan.worldSize; ++r) present.push_back(r);
  for (size_t i = 0; i < present.size(); ++i)
    if (present[i] < 0 || present[i] >= fullPlan.worldSize || (i && present[i] <= present[i - 1]))
      throw RuntimeError("runLocal: ranks must be sorted, distinct and in [0, " +
                         std::to_string(fullPlan.worldSize) + ")");
  if (static_cast<int64_t>(present.size()) < fullPlan.worldSize) {
    subset = present;
    if (fullPlan.function("forward"))
      throw RuntimeError("runLocal: running ranks " + formatRankList(subset) + " of " +
                         std::to_string(fullPlan.worldSize) +
                         " needs a plan without 'forward' (it gathers every rank's shards)");
    if (options.gatherParams)
      throw RuntimeError("runLocal: gatherParams needs every rank");
  }
  const Plan subsetPlan = subset.empty() ? Plan{} : planForRanks(fullPlan, subset);
  const Plan &plan = subset.empty() ? fullPlan : subsetPlan;
  if (!plan.function("init")) throw RuntimeError("runLocal: plan has no 'init' function");
  const Function *forward = plan.function("forward");
  std::vector<HostTensor> inputs;
  if (forward && options.dataParallel) inputs = matchGlobalInputs(plan, options.inputs);
  else if (forward) inputs = matchForwardInputs(*forward, options.inputs);
  else if (!options.inputs.empty())
    throw RuntimeError("runLocal: inputs were given but the plan has no 'forward' function");

  RunResult result;
  result.unshardedParamBytes = unshardedParamBytes(plan);
  const int64_t n = static_cast<int64_t>(present.size());  // threads
  std::vector<RankOutcome> outcomes(n);
  // Each rank's forward function and inputs: the same for all, or with
  // dataParallel its own micro-batch (runtime/DataParallel.h).
  std::vector<RankForward> rankForwards(n);
  for (int64_t r = 0; r < n && forward; ++r)
    rankForwards[r] = options.dataParallel ? rankForward(plan, inputs, r)
                                           : RankForward{"forward", {}, {}};
  // The batches of the steps (RunOptions::moreStepInputs): shared by every
  // rank, or with dataParallel each rank's rows of each.
  if (!options.moreStepInputs.empty() && !options.trainingSteps)
    throw RuntimeError("runLocal: more step inputs are for training steps");
  std::vector<std::vector<HostTensor>> moreBatches;  // each rank's in turn with dataParallel
  for (size_t k = 0; k < options.moreStepInputs.size() && forward; ++k) {
    const std::vector<HostTensor> &given = options.moreStepInputs[k];
    if (!options.dataParallel) {
      moreBatches.push_back(matchForwardInputs(*forward, given));
      continue;
    }
    const std::vector<HostTensor> global = matchGlobalInputs(plan, given);
    for (int64_t r = 0; r < n; ++r) {
      RankForward mine = rankForward(plan, global, r);
      if (mine.function != rankForwards[r].function)
        throw RuntimeError("data-parallel: step input set " + std::to_string(k + 2) +
                           " holds another global batch than the first");
      moreBatches.push_back(std::move(mine.inputs));
    }
  }
  std::vector<std::vector<const std::vector<HostTensor> *>> rankBatches(n);
  for (int64_t r = 0; r < n; ++r) {
    rankBatches[r].push_back(options.dataParallel ? &rankForwards[r].inputs : &inputs);
    for (size_t k = 0; k < options.moreStepInputs.size() && forward; ++k)
      rankBatches[r].push_back(&moreBatches[options.dataParallel ? k * n + r : k]);
  }
  // Predictions first: an inconsistent plan fails before any thread starts.
  for (int64_t r = 0; r < n; ++r) {
    MemoryPrediction init = predictMemory(plan, "init", present[r]);
    predict(init, outcomes[r].report.init);
    if (forward) {
      outcomes[r].report.forward.emplace();
      predict(predictMemory(plan, rankForwards[r].function, present[r], init.paramsAtEnd),
              *outcomes[r].report.forward);
    }
  }

  const int threads = options.threads > 0 ? options.threads : defaultKernelThreads(n);
  const SessionRankFactory make = rankFactory ? rankFactory : cpuSessionRanks(threads);
  std::vector<std::unique_ptr<SessionRank>> ranks;
  for (int64_t r = 0; r < n; ++r) ranks.push_back(make(present[r]));
  result.device = ranks[0]->deviceName();
  // The driver's count (a GPU's cudaMemGetInfo, all ranks together): once
  // before anything is allocated, then by rank 0 at each reading while the
  // others wait at the barriers (so nobody allocates or frees meanwhile).
  const std::optional<int64_t> driverBefore = ranks[0]->driverUsedBytes();
  std::function<void(SessionRank &, Communicator &, std::optional<int64_t> &)> readDriver;
  if (driverBefore)
    readDriver = [&](SessionRank &rank, Communicator &peers, std::optional<int64_t> &into) {
      peers.barrier();  // every rank is at the same point
      if (peers.rank() == 0) into = *rank.driverUsedBytes() - *driverBefore;
      peers.barrier();
    };

  LocalGroup group(n, options.timeout);
  // The OS's count, beside the devices' ledgers (runtime/ResidentMemory.h).
  ResidentPeakWindow resident;
  if (options.measureResident) {
    result.process.peakSinceStart = !resident.start();
    if (std::optional<ResidentSet> now = readResidentSet()) result.process.residentBefore = now->bytes;
  }
  runRankThreads(
      group, n,
      [&](int64_t r) {
        SessionRank &rank = *ranks[r];
        rank.enterThread();
        try {
          const std::unique_ptr<Communicator> peers = rank.communicator(group, r);
          LocalCommunicator hostPeers(group, r);
          std::optional<SubsetCommunicator> partial;
          // Its bookkeeping (root's pointer) is host values; the rows move
          // with the rank's copier.
          if (!subset.empty()) partial.emplace(hostPeers, subset, plan.worldSize, rank.copier());
          const RankRun run{plan,
                            rankForwards[r].function,
                            rankBatches[r],
                            options,
                            subset,
                            readDriver,
                            result.driverBytesHoldingShards,
                            result.driverBytesAfterForward};
          runRank(run, rank, partial ? static_cast<Communicator &>(*partial) : *peers, *peers,
                  hostPeers, outcomes[r]);
        } catch (...) {
          rank.state().releaseAll();
          rank.trimReuseCache();
          throw;
        }
        rank.state().releaseAll();
        rank.trimReuseCache();
      },
      [&](int64_t r) { return present[r]; });
  if (options.measureResident) {
    if (std::optional<ResidentSet> now = readResidentSet()) result.process.peakResident = now->peakBytes;
    result.residentPeakGrowthBytes = resident.peakGrowthBytes();
  }

  if (options.dataParallel) {
    std::vector<std::vector<HostTensor>> perRank;
    for (RankOutcome &outcome : outcomes) perRank.push_back(std::move(outcome.outputs));
    const std::vector<bool> replicated = replicatedOutputs(*forward);
    outcomes[0].outputs = concatRankOutputs(perRank, replicated);
    // Data-parallel training: each step's rows and loss shares, joined.
    for (size_t step = 0; step < outcomes[0].stepOutputs.size(); ++step) {
      std::vector<std::vector<HostTensor>> stepRanks;
      for (RankOutcome &outcome : outcomes)
        stepRanks.push_back(std::move(outcome.stepOutputs.at(step)));
      outcomes[0].stepOutputs[step] = concatRankOutputs(stepRanks, replicated);
    }
  }
  for (int64_t r = 0; r < n; ++r) {
    const auto &reference = outcomes[0].outputs, &mine = outcomes[r].outputs;
    for (size_t i = 0; i < reference.size() && r > 0 && !options.dataParallel; ++i)
      if (mine[i].data != reference[i].data)
        throw RuntimeError("output '" + reference[i].name + "' differs between rank 0 and rank " +
                           std::to_string(present[r]) + " (ranks must compute identical outputs)");
    result.ranks.push_back(outcomes[r].report);
  }
  for (int64_t r = 1; r < n && options.trainingSteps && !options.dataParallel; ++r)
    for (size_t step = 0; step < outcomes[0].stepOutputs.size(); ++step)
      for (size_t i = 0; i < outcomes[0].stepOutputs[step].size(); ++i)
        if (outcomes[r].stepOutputs[step][i].data != outcomes[0].stepOutputs[step][i].data)
          throw RuntimeError("output '" + outcomes[0].stepOutputs[step][i].name +
                             "' of training step " + std::to_string(step + 2) +
                             " differs between rank 0 and rank " + std::to_string(present[r]) +
                             " (ranks must compute identical outputs)");
  result.stepOutputs = std::move(outcomes[0].stepOutputs);
  result.outputs = std::move(outcomes[0].outputs);
  result.params = std::move(outcomes[0].params);
  if (options.keepShards)
    for (int64_t r = 0; r < n; ++r) result.shards.push_back(std::move(outcomes[r].shards));
  return result;
}

std::vector<HostTensor> makeDeterministicInputs(const Plan &plan, uint64_t seed,
                                                const std::map<std::string, int64_t> &intBounds) {
  std::vector<HostTensor> inputs;
  const Function *forward = plan.function("forward");
  for (const auto &[name, bound] : intBounds) {
    bool known = false;
    if (forward)
      for (int32_t id : forward->inputs)
        known = known || (forward->buffers[id].name == name &&
                          forward->buffers[id].dtype == DType::I64);
    if (!known)
      throw RuntimeError("integer input bound given for '" + name +
                         "', which is not an int64 input of forward");
  }
  if (forward)
    for (int32_t id : forward->inputs) {
      const Buffer &b = forward->buffers[id];
      auto bound = intBounds.find(b.name);
      inputs.push_back(makeDeterministicInput(
          b.name, b.dtype, b.shape, seed,
          bound == intBounds.end() ? std::nullopt : std::optional<int64_t>(bound->second)));
    }
  return inputs;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double threadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

void measure(const CpuDevice &device, PhaseReport &report, const HostMemory::Stats &since) {
  measure(device, device.largeBlockStats(), report, since);
}

void measure(const Device &device, const HostMemory::Stats &blocks, PhaseReport &report,
             const HostMemory::Stats &since) {
  report.peakBytes = device.peakBytes();
  report.liveAtPeak = device.liveAtPeak();
  report.peakByCategory = device.peakByCategory();
  report.endBytes = device.currentBytes();
  report.freshLargeBlocks = static_cast<int64_t>(blocks.freshBlocks - since.freshBlocks);
  report.reusedLargeBlocks = static_cast<int64_t>(blocks.reusedBlocks - since.reusedBlocks);
  report.firstTouchBytes = static_cast<int64_t>(blocks.freshBytes - since.freshBytes);
  report.heldPeakBytes = static_cast<int64_t>(blocks.heldPeakBytes);  // a peak: no `since`
}

void predict(const MemoryPrediction &prediction, PhaseReport &report) {
  report.predictedPeakBytes = prediction.peakBytes;
  report.predictedLiveAtPeak = prediction.liveAtPeak;
  report.predictedEndBytes = prediction.endBytes;
}

}  // namespace shardc::runtime
