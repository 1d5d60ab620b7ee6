#include "runtime/LocalRun.h"

#include "runtime/DeterministicInput.h"
#include "runtime/Executor.h"
#include "runtime/JoiningThreads.h"
#include "runtime/Kernels.h"
#include "runtime/LocalCommunicator.h"
#include "runtime/MemoryModel.h"
#include "runtime/PlanCheck.h"
#include "runtime/RankError.h"
#include "runtime/ResidentMemory.h"
#include "runtime/RuntimeError.h"
#include "runtime/checkpoint/CooperativeWriter.h"

#include <cstring>
#include <mutex>

namespace shardc::runtime {
using namespace shardc::plan;

namespace {

/// Orders the user's inputs like forward's input list, checking each.
std::vector<HostTensor> matchInputs(const Function &forward,
                                    const std::vector<HostTensor> &given) {
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
                         shapeToString(b.shape) + ") was not provided");
    if (match->dtype != b.dtype || match->shape != b.shape)
      throw RuntimeError("input '" + b.name + "': forward expects " + dtypeName(b.dtype) + " " +
                         shapeToString(b.shape) + ", got " + dtypeName(match->dtype) + " " +
                         shapeToString(match->shape));
    if (static_cast<int64_t>(match->data.size()) != match->expectedBytes())
      throw RuntimeError("input '" + b.name + "': has " + std::to_string(match->data.size()) +
                         " bytes of data, its shape needs " +
                         std::to_string(match->expectedBytes()));
    ordered.push_back(*match);
  }
  return ordered;
}



/// Why a local run stopped at rank `started` of `n`: the OS refused a thread.
std::string threadStartFailure(int64_t started, int64_t n, const std::string &reason) {
  return "could not start local rank " + std::to_string(started) + " (" + reason +
         "): only " + std::to_string(started) + " of " + std::to_string(n) +
         " rank threads started; run fewer local ranks (--world-size), raise the process' "
         "limits (ulimit -v, ulimit -u), or run one rank per process with --backend mpi";
}

/// What one rank thread produces.
struct RankOutcome {
  RankReport report;
  std::vector<HostTensor> outputs;
  std::vector<HostTensor> params;
  std::vector<HostTensor> shards;  // keepShards: local param storage after init
};

void runRank(const Plan &plan, const std::vector<HostTensor> &inputs, bool gatherParams,
             const std::string &savePath, bool keepShards, const ExecutionContext &context,
             LocalGroup &group,
             int64_t rank, RankOutcome &outcome) {
  CpuDevice device;           // declared first: destroyed after everything on it
  RankState state(rank);
  LocalCommunicator comm(group, rank);
  try {
    outcome.report.rank = rank;
    device.resetPeak();
    auto initStart = std::chrono::steady_clock::now();
    executeFunction(plan, "init", device, comm, state, {}, context);
    outcome.report.init.seconds = secondsSince(initStart);
    measure(device, outcome.report.init);
    state.releaseFunctionBuffers();  // init's leftovers; params persist
    device.trimReuseCache();
    outcome.report.paramBytes = device.currentBytes(Category::Parameter);
    if (keepShards) {
      // Host copies, outside the device's accounting: measurements unchanged.
      for (size_t i = 0; i < plan.params.size(); ++i) {
        const Param &p = plan.params[i];
        const DeviceBuffer *local = state.paramStorage(static_cast<int32_t>(i));
        if (!local) throw RuntimeError("keeping shards: init did not allocate '" + p.name + "'");
        HostTensor shard{p.name, p.dtype, p.localShape(), {}};
        shard.data.resize(static_cast<size_t>(p.localBytes()));
        std::memcpy(shard.data.data(), local->data(), shard.data.size());
        outcome.shards.push_back(std::move(shard));
      }
    }

    if (plan.function("forward")) {
      device.resetPeak();
      auto forwardStart = std::chrono::steady_clock::now();
      auto views = executeFunction(plan, "forward", device, comm, state, inputs, context);
      if (!outcome.report.forward) outcome.report.forward.emplace();
      outcome.report.forward->seconds = secondsSince(forwardStart);
      measure(device, *outcome.report.forward);
      for (const TensorView &view : views) outcome.outputs.push_back(view.toHost());
      state.releaseFunctionBuffers();
      device.trimReuseCache();
    }

    // Outside every measurement window (both reports are already taken).
    if (!savePath.empty())
      checkpoint::saveCooperatively(
          plan,
          [&](int32_t i) -> const std::byte * {
            const DeviceBuffer *local = state.paramStorage(i);
            return local ? local->data() : nullptr;
          },
          comm, savePath);
    if (gatherParams) {
      for (size_t i = 0; i < plan.params.size(); ++i) {
        const Param &p = plan.params[i];
        const DeviceBuffer *local = state.paramStorage(static_cast<int32_t>(i));
        if (!local) throw RuntimeError("gathering params: init did not allocate '" + p.name + "'");
        HostTensor full{p.name, p.dtype, p.shape, {}};
        full.data.resize(static_cast<size_t>(p.fullBytes()));
        if (p.sharded()) {
          DeviceBuffer gathered =
              device.allocate(p.gatheredBytes(plan.worldSize), Category::Gathered,
                              p.name + ".save");
          comm.allGather(local->data(), static_cast<size_t>(p.localBytes()), gathered.data());
          // Padding rows are only at the end, so the full tensor is a prefix.
          std::memcpy(full.data.data(), gathered.data(), full.data.size());
        } else {
          std::memcpy(full.data.data(), local->data(), full.data.size());
        }
        if (rank == 0) outcome.params.push_back(std::move(full));
      }
    }
  } catch (...) {
    state.releaseAll();
    throw;
  }
  state.releaseAll();
}

}  // namespace

std::vector<HostTensor> matchForwardInputs(const Function &forward,
                                           const std::vector<HostTensor> &given) {
  return matchInputs(forward, given);
}

RunResult runLocal(const Plan &plan, const RunOptions &options) {
  checkPlan(plan);
  if (!plan.function("init")) throw RuntimeError("runLocal: plan has no 'init' function");
  const Function *forward = plan.function("forward");
  std::vector<HostTensor> inputs;
  if (forward) inputs = matchInputs(*forward, options.inputs);
  else if (!options.inputs.empty())
    throw RuntimeError("runLocal: inputs were given but the plan has no 'forward' function");

  RunResult result;
  result.unshardedParamBytes = unshardedParamBytes(plan);
  const int64_t n = plan.worldSize;
  std::vector<RankOutcome> outcomes(n);
  // Predictions first: an inconsistent plan fails before any thread starts.
  for (int64_t r = 0; r < n; ++r) {
    MemoryPrediction init = predictMemory(plan, "init", r);
    predict(init, outcomes[r].report.init);
    if (forward) {
      outcomes[r].report.forward.emplace();
      predict(predictMemory(plan, "forward", r, init.paramsAtEnd), *outcomes[r].report.forward);
    }
  }

  ExecutionContext context;
  context.seed = options.seed;
  context.threads = defaultKernelThreads(n);
  LocalGroup group(n, options.timeout);
  std::mutex failureMutex;
  std::optional<std::string> firstFailure;
  auto fail = [&](const std::string &message) {
    {
      std::lock_guard lock(failureMutex);
      if (!firstFailure) firstFailure = message;
    }
    group.abort(message);
  };
  ResidentPeakWindow resident;  // the OS's count, beside the devices' ledgers
  resident.start();
  JoiningThreads threads;
  for (int64_t r = 0; r < n; ++r) {
    bool started = threads.start([&, r] {
      try {
        runRank(plan, inputs, options.gatherParams, options.savePath, options.keepShards,
                context, group, r,
                outcomes[r]);
      } catch (const RankError &e) {  // names the rank it happened on
        fail("rank " + std::to_string(e.rank()) + ": " + e.what());
      } catch (const std::exception &e) {
        fail("rank " + std::to_string(r) + ": " + e.what());
      }
    });
    if (!started) {
      // The root cause wins over what the started ranks report (running
      // short of the memory that also refused the thread, or the abort);
      // their collectives must not wait for the missing ranks.
      std::string message = threadStartFailure(r, n, threads.refusal());
      {
        std::lock_guard lock(failureMutex);
        firstFailure = message;
      }
      group.abort(message);
      break;
    }
  }
  threads.joinAll();
  if (firstFailure) throw RuntimeError(*firstFailure);
  result.residentPeakGrowthBytes = resident.peakGrowthBytes();

  for (int64_t r = 0; r < n; ++r) {
    const auto &reference = outcomes[0].outputs, &mine = outcomes[r].outputs;
    for (size_t i = 0; i < reference.size() && r > 0; ++i)
      if (mine[i].data != reference[i].data)
        throw RuntimeError("output '" + reference[i].name + "' differs between rank 0 and rank " +
                           std::to_string(r) + " (ranks must compute identical outputs)");
    result.ranks.push_back(outcomes[r].report);
  }
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

void measure(const CpuDevice &device, PhaseReport &report) {
  report.peakBytes = device.peakBytes();
  report.liveAtPeak = device.liveAtPeak();
  report.peakByCategory = device.peakByCategory();
  report.endBytes = device.currentBytes();
}

void predict(const MemoryPrediction &prediction, PhaseReport &report) {
  report.predictedPeakBytes = prediction.peakBytes;
  report.predictedLiveAtPeak = prediction.liveAtPeak;
  report.predictedEndBytes = prediction.endBytes;
}

}  // namespace shardc::runtime
