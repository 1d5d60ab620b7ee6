//===- CudaRunCommand.cpp - `shardc run --device cuda` --------------------===//
#include "tools/shardc/CudaRunCommand.h"

#include "runtime/RuntimeError.h"

#ifdef SHARDC_HAVE_CUDA
#include "runtime/Safetensors.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/OneGpuRun.h"
#include "tools/shardc/CommandLine.h"

#include <cstdio>
#include <iostream>
#endif

namespace shardc::cli {

#ifndef SHARDC_HAVE_CUDA
bool cudaRuntimeBuilt() { return false; }

int runOnCudaDevice(const plan::Plan &, const runtime::RunOptions &, const std::string &) {
  throw runtime::RuntimeError("--device cuda: this shardc was built without the CUDA runtime");
}
#else
bool cudaRuntimeBuilt() { return true; }

int runOnCudaDevice(const plan::Plan &plan, const runtime::RunOptions &options,
                    const std::string &outputsPath) {
  std::string why;
  if (runtime::cuda::visibleDeviceCount(&why) == 0)
    throw runtime::RuntimeError("--device cuda: no CUDA device visible (" + why + ")");
  runtime::cuda::OneGpuRunOptions gpu;
  gpu.ordinal = 0;
  gpu.seed = options.seed;
  gpu.inputs = options.inputs;
  gpu.timeout = options.timeout;
  const runtime::cuda::OneGpuRunResult result = runtime::cuda::runOnOneGpu(plan, gpu);
  if (!outputsPath.empty() && !result.ranks.empty())
    runtime::writeSafetensors(outputsPath, result.ranks[0].outputs);
  std::printf("device: %s, %lld rank(s) on it\n", runtime::cuda::describeDevice(0).c_str(),
              static_cast<long long>(plan.worldSize));
  std::printf("%-6s %16s %16s %16s %16s\n", "rank", "init peak", "forward peak", "after forward",
              "predicted fwd");
  bool equal = true;
  for (size_t r = 0; r < result.ranks.size(); ++r) {
    const runtime::cuda::OneGpuRankReport &rank = result.ranks[r];
    std::printf("%-6zu %16lld %16lld %16lld %16lld\n", r, static_cast<long long>(rank.initPeak),
                static_cast<long long>(rank.forwardPeak), static_cast<long long>(rank.afterForward),
                static_cast<long long>(rank.predictedForward.peakBytes));
    equal = equal && rank.initPeak == rank.predictedInit.peakBytes &&
            rank.forwardPeak == rank.predictedForward.peakBytes;
  }
  std::printf("predicted == measured on every rank: %s\n", equal ? "yes" : "NO");
  std::printf("cudaMemGetInfo (the driver's count, all ranks): %lld bytes used after forward\n",
              static_cast<long long>(result.deviceUsedAfterForward));
  return kSuccess;
}
#endif

} // namespace shardc::cli
