#include "runtime/cuda/OneGpuRun.h"

#include "runtime/RankThreads.h"
#include "runtime/RuntimeError.h"
#include "runtime/cuda/CudaExecutor.h"
#include "runtime/cuda/DeviceLocalCommunicator.h"

#include <vector>

namespace shardc::runtime::cuda {

namespace {
bool hasFunction(const plan::Plan &plan, const std::string &name) {
  for (const plan::Function &f : plan.functions)
    if (f.name == name) return true;
  return false;
}
}  // namespace

OneGpuRunResult runOnOneGpu(const plan::Plan &plan, const OneGpuRunOptions &options) {
  const int64_t n = plan.worldSize;
  OneGpuRunResult result;
  result.ranks.resize(static_cast<size_t>(n));
  const bool forward = hasFunction(plan, "forward");
  LocalGroup group(n, options.timeout);
  int64_t usedBefore = 0;
  {
    CudaDevice probe(options.ordinal);
    probe.synchronize();
    const MemInfo info = probe.memInfo();
    usedBefore = info.totalBytes - info.freeBytes;
  }
  auto rankBody = [&](int64_t r) {
    OneGpuRankReport &out = result.ranks[static_cast<size_t>(r)];
    CudaDevice device(options.ordinal);
    RankState state(r);
    try {
      DeviceLocalCommunicator comm(group, r, device);
      ExecutionContext context{options.seed, 1};
      out.predictedInit = predictMemory(plan, "init", r);
      executeFunctionCuda(plan, "init", device, comm, state, {}, context);
      out.initPeak = device.peakBytes();
      out.initLiveAtPeak = device.liveAtPeak();
      if (options.keepShards)
        for (const auto &[index, buffer] : state.params()) {
          (void)index;
          std::vector<std::byte> bytes(static_cast<size_t>(buffer.bytes()));
          copyToHost(device, bytes.data(), buffer.data(), bytes.size());
          out.shards.push_back(std::move(bytes));
        }
      state.releaseFunctionBuffers();
      if (forward) {
        out.predictedForward = predictMemory(plan, "forward", r);
        device.resetPeak();
        out.outputs =
            executeFunctionCuda(plan, "forward", device, comm, state, options.inputs, context);
        out.forwardPeak = device.peakBytes();
        out.forwardLiveAtPeak = device.liveAtPeak();
        out.afterForward = device.currentBytes();
      }
      // Every rank's buffers are live here: one device-wide reading.
      comm.barrier();
      if (r == 0) {
        device.synchronize();
        const MemInfo info = device.memInfo();
        result.deviceUsedAfterForward = info.totalBytes - info.freeBytes - usedBefore;
      }
      comm.barrier();
    } catch (...) {
      state.releaseAll();
      throw;
    }
    state.releaseAll();
    device.synchronize("after the run");
  };
  try {
    runRankThreads(group, n, rankBody);
  } catch (const RuntimeError &error) {
    throw RuntimeError(std::string("runOnOneGpu: ") + error.what());
  }
  return result;
}

}  // namespace shardc::runtime::cuda
