#include "runtime/cuda/OneGpuRun.h"

#include "runtime/RuntimeError.h"
#include "runtime/cuda/CudaExecutor.h"
#include "runtime/cuda/DeviceLocalCommunicator.h"

#include <mutex>
#include <optional>
#include <thread>

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
  std::mutex mutex;
  std::optional<std::string> failure;
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      OneGpuRankReport &out = result.ranks[static_cast<size_t>(r)];
      try {
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
      } catch (const std::exception &e) {
        {
          std::lock_guard lock(mutex);
          if (!failure) failure = "rank " + std::to_string(r) + ": " + e.what();
        }
        group.abort(std::string("rank ") + std::to_string(r) + " failed: " + e.what());
      }
    });
  for (std::thread &t : threads) t.join();
  if (failure) throw RuntimeError("runOnOneGpu: " + *failure);
  return result;
}

}  // namespace shardc::runtime::cuda
