//===- CudaRunCommand.cpp - `shardc run --device cuda` --------------------===//
#include "tools/shardc/CudaRunCommand.h"

#include "runtime/RuntimeError.h"

#ifdef SHARDC_HAVE_CUDA
#include "runtime/Safetensors.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/LocalSession.h"
#include "runtime/cuda/CudaSession.h"
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

namespace {
int64_t deviceUsedBytes(int ordinal) {
  runtime::cuda::CudaDevice probe(ordinal);
  probe.synchronize();
  const runtime::cuda::MemInfo info = probe.memInfo();
  return info.totalBytes - info.freeBytes;
}
}  // namespace

int runOnCudaDevice(const plan::Plan &plan, const runtime::RunOptions &options,
                    const std::string &outputsPath) {
  const int ordinal = 0;
  // Throws "no CUDA device visible (...)" before anything is allocated.
  runtime::SessionRankFactory gpuRanks;
  try {
    gpuRanks = runtime::cuda::gpuSessionRanks(ordinal);
  } catch (const runtime::RuntimeError &error) {
    throw runtime::RuntimeError(std::string("--device cuda: ") + error.what());
  }
  const int64_t usedBefore = deviceUsedBytes(ordinal);
  runtime::LocalSession session(plan, options.seed, options.timeout, gpuRanks);
  session.setDataParallel(options.dataParallel);
  const std::vector<runtime::PhaseReport> init = session.init();
  std::vector<runtime::PhaseReport> forward;
  std::vector<runtime::HostTensor> outputs;
  if (plan.function("forward")) outputs = session.forward(options.inputs, forward);
  // Every rank's shards are held here (forward's buffers are released).
  const int64_t usedHolding = deviceUsedBytes(ordinal) - usedBefore;
  if (!options.savePath.empty()) session.save(options.savePath);
  if (!outputsPath.empty() && !outputs.empty()) runtime::writeSafetensors(outputsPath, outputs);

  std::printf("device: %s, %lld rank(s) on it\n", runtime::cuda::describeDevice(ordinal).c_str(),
              static_cast<long long>(plan.worldSize));
  std::printf("%-6s %14s %16s %16s %16s %16s\n", "rank", "params", "init peak",
              "predicted init", "forward peak", "predicted fwd");
  bool equal = true;
  for (size_t r = 0; r < init.size(); ++r) {
    const long long fwdPeak = forward.empty() ? 0 : forward[r].peakBytes;
    const long long fwdPredicted = forward.empty() ? 0 : forward[r].predictedPeakBytes;
    std::printf("%-6zu %14lld %16lld %16lld %16lld %16lld\n", r,
                static_cast<long long>(session.paramBytes(static_cast<int64_t>(r))),
                static_cast<long long>(init[r].peakBytes),
                static_cast<long long>(init[r].predictedPeakBytes), fwdPeak, fwdPredicted);
    equal = equal && init[r].peakBytes == init[r].predictedPeakBytes &&
            (forward.empty() || forward[r].peakBytes == forward[r].predictedPeakBytes);
  }
  std::printf("predicted == measured on every rank: %s\n", equal ? "yes" : "NO");
  std::printf("cudaMemGetInfo (the driver's count, all ranks): %lld bytes used while the "
              "shards are held\n",
              static_cast<long long>(usedHolding));
  if (!options.savePath.empty())
    std::printf("saved: %s (every rank wrote its own rows)\n", options.savePath.c_str());
  return kSuccess;
}
#endif

} // namespace shardc::cli
