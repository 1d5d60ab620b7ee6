// Section `scale` of shardc-gpu-tests: one rank of a large world on the
// GPU. The plan packed by scripts/gpu-bundle.sh is Llama 3 70B at N = 64
// (float32); rank 0 alone initializes its 4.4 GB of shards through runLocal
// on GPU ranks, exactly what `shardc run --device cuda --init-only --ranks
// 0` runs. Reported: the init's seconds and GB/s beside cudaMemset of the
// same bytes on the same GPU (docs/init-scale.md has the CPU's figures;
// torch_bench.py times torch's own init of the same shard shapes), peak ==
// predicted, and the shards bit for bit against the same rank run on the
// host's cores.
#include "GpuCheck.h"
#include "GpuRuns.h"
#include "Sections.h"

#include "runtime/cuda/CudaCheck.h"

#include <algorithm>
#include <cstdio>
#include <thread>

namespace shardc::gpucheck {
using namespace shardc::runtime;

void scaleChecks(const std::string &planPath) {
  if (planPath.empty()) {
    report("scale", "plan file", false,
           "no --scale-plan FILE given (scripts/gpu-bundle.sh packs scale-llama3-70b-n64.json)");
    return;
  }
  guarded("scale", "llama3-70b N=64, rank 0 alone", [&] {
    plan::Plan plan = readPlanFile(planPath);
    plan.functions.erase(std::remove_if(plan.functions.begin(), plan.functions.end(),
                                        [](const plan::Function &f) { return f.name != "init"; }),
                         plan.functions.end());
    RunOptions options;
    options.ranks = {0};
    options.keepShards = true;
    const RunResult gpu = runLocal(plan, options, cuda::gpuSessionRanks(0));
    const RankReport &rank = gpu.ranks.at(0);
    const int64_t bytes = rank.paramBytes;

    double memsetMs = 0;
    {
      cuda::CudaDevice device(0);
      DeviceBytes buffer(device, static_cast<size_t>(bytes), "scale.memset");
      memsetMs = timeMs(device, [&] {
        cuda::checkCuda(cudaMemsetAsync(buffer.data(), 0, static_cast<size_t>(bytes),
                                        device.stream()),
                        "cudaMemsetAsync");
      }, 3);
    }

    // The same rank on the host, every core: the values must not depend on
    // the device (docs/rng.md).
    options.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const RunResult cpu = runLocal(plan, options);
    int64_t differing = 0;
    for (size_t i = 0; i < plan.params.size(); ++i)
      differing += gpu.shards[0][i].data != cpu.shards[0][i].data;
    const bool peak = rank.init.peakBytes == rank.init.predictedPeakBytes;
    char text[400];
    std::snprintf(text, sizeof text,
                  "%.2f GB of shards in %.3f s on the GPU (%.1f GB/s; cudaMemset of the same bytes "
                  "%.3f s = %.0f%% of it); host, %d threads: %.3f s; %lld of %zu params differ "
                  "from the host's; peak %s predicted",
                  static_cast<double>(bytes) / 1e9, rank.init.seconds,
                  static_cast<double>(bytes) / rank.init.seconds / 1e9, memsetMs / 1e3,
                  100.0 * (memsetMs / 1e3) / rank.init.seconds, options.threads,
                  cpu.ranks.at(0).init.seconds, static_cast<long long>(differing),
                  plan.params.size(), peak ? "==" : "!=");
    report("scale", "llama3-70b N=64, rank 0 alone", differing == 0 && peak, text);
  });
}

}  // namespace shardc::gpucheck
