// Section `session` of shardc-gpu-tests (Sections.h): LocalSession with
// every rank on one GPU (runtime/cuda/CudaSession.h), the piece behind the
// JIT API's device "cuda", and runLocal on the same ranks (`shardc run
// --device cuda`, --ranks included), against the same runs on the CPU: init bit for bit per rank, forward within tolerance
// and repeatable, save byte for byte, measured == predicted memory. The
// plans packed by scripts/gpu-bundle.sh cover transformers (llama-tiny, gpt2-tiny), a
// mixture of experts over tokens (router, topk, gather, moe_experts) and a
// small convnet (conv, norms, pools, reductions, argmax).
#include "GpuCheck.h"
#include "GpuRuns.h"
#include "Sections.h"
#include "TestPlans.h"

#include "runtime/LocalRun.h"
#include "runtime/LocalSession.h"
#include "runtime/PlanJson.h"
#include "runtime/RuntimeError.h"
#include "runtime/Safetensors.h"
#include "runtime/cuda/CudaSession.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace shardc::gpucheck {
using namespace shardc::runtime;

namespace {

std::string peaksDiffer(const std::vector<PhaseReport> &reports, const char *phase) {
  std::string bad;
  for (size_t r = 0; r < reports.size(); ++r)
    if (reports[r].peakBytes != reports[r].predictedPeakBytes ||
        reports[r].liveAtPeak != reports[r].predictedLiveAtPeak)
      bad += std::string(phase) + " rank " + std::to_string(r) + ": peak " +
             std::to_string(reports[r].peakBytes) + " predicted " +
             std::to_string(reports[r].predictedPeakBytes) + "; ";
  return bad;
}

/// Largest |a - b| / max(1, |b|) over float32 outputs; -1 for a shape or
/// dtype mismatch, infinity for a NaN on one side only.
double relativeDiff(const HostTensor &a, const HostTensor &b) {
  if (a.dtype != b.dtype || a.shape != b.shape || a.data.size() != b.data.size()) return -1;
  if (a.dtype != plan::DType::F32) return a.data == b.data ? 0 : INFINITY;
  double worst = 0;
  for (size_t i = 0; i + 4 <= a.data.size(); i += 4) {
    float x, y;
    std::memcpy(&x, &a.data[i], 4);
    std::memcpy(&y, &b.data[i], 4);
    if (std::isnan(x) != std::isnan(y)) return INFINITY;
    if (!std::isnan(x)) worst = std::max(worst, std::fabs(double(x) - y) / std::max(1.0, std::fabs(double(y))));
  }
  return worst;
}

std::vector<char> readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// `plan` in a GPU session and a CPU session with the same seed and inputs.
void compareSessions(const std::string &item, const plan::Plan &plan, const std::string &scratch,
                     int64_t intBound) {
  const uint64_t seed = 7;
  const bool hasForward = plan.function("forward") != nullptr;
  std::map<std::string, int64_t> bounds;
  if (hasForward) {
    const plan::Function &forward = *plan.function("forward");
    for (int32_t id : forward.inputs)
      if (forward.buffers[id].dtype == plan::DType::I64) bounds[forward.buffers[id].name] = intBound;
  }
  const std::vector<HostTensor> inputs =
      hasForward ? makeDeterministicInputs(plan, seed, bounds) : std::vector<HostTensor>{};
  LocalSession cpu(plan, seed, std::chrono::seconds(60));
  LocalSession gpu(plan, seed, std::chrono::seconds(60), cuda::gpuSessionRanks(0));
  std::string bad;
  (void)cpu.init();
  bad += peaksDiffer(gpu.init(), "init");
  int64_t paramsCompared = 0;
  for (int64_t r = 0; r < plan.worldSize; ++r)
    for (size_t i = 0; i < plan.params.size(); ++i) {
      const auto a = gpu.localParam(static_cast<int32_t>(i), r);
      const auto b = cpu.localParam(static_cast<int32_t>(i), r);
      if (!a || !b || a->data != b->data)
        bad += "init: '" + plan.params[i].name + "' on rank " + std::to_string(r) +
               " differs from the CPU; ";
      ++paramsCompared;
    }
  double worst = 0;
  if (hasForward) {
    std::vector<PhaseReport> gpuReports, cpuReports;
    const std::vector<HostTensor> want = cpu.forward(inputs, cpuReports);
    const std::vector<HostTensor> got = gpu.forward(inputs, gpuReports);
    bad += peaksDiffer(gpuReports, "forward");
    for (size_t o = 0; o < want.size() && o < got.size(); ++o) {
      const double d = relativeDiff(got[o], want[o]);
      worst = std::max(worst, d);
      if (d < 0 || d > 2e-4) bad += "forward: output '" + want[o].name + "' differs by " + std::to_string(d) + "; ";
    }
    if (want.size() != got.size()) bad += "forward: output counts differ; ";
    std::vector<PhaseReport> again;
    const std::vector<HostTensor> second = gpu.forward(inputs, again);
    for (size_t o = 0; o < got.size() && o < second.size(); ++o)
      if (second[o].data != got[o].data) bad += "forward: a second forward differs; ";
  }
  const std::string gpuFile = scratch + "/session-gpu.safetensors";
  const std::string cpuFile = scratch + "/session-cpu.safetensors";
  gpu.save(gpuFile);
  cpu.save(cpuFile);
  const std::vector<char> gpuBytes = readAll(gpuFile);
  if (gpuBytes.empty() || gpuBytes != readAll(cpuFile))
    bad += "save: the GPU session's file differs from the CPU session's; ";
  std::filesystem::remove(gpuFile);
  std::filesystem::remove(cpuFile);
  char text[256];
  std::snprintf(text, sizeof text,
                "N=%lld: %lld rank-params bit-identical to the CPU, forward max rel diff %.2e, "
                "repeat identical, saved file == CPU's, peaks == predicted",
                static_cast<long long>(plan.worldSize), static_cast<long long>(paramsCompared),
                worst);
  report("session", item, bad.empty(), bad.empty() ? text : bad);
}

/// `plan` through runLocal (what `shardc run --device cuda` runs) on GPU
/// ranks and on the CPU: every rank's shards bit for bit, forward within
/// tolerance with a repeat identical, the saved file byte for byte, peaks ==
/// predicted, the driver's count reported; then ranks {0, N-1} alone of an
/// init-only plan (`--ranks`), whose shards must equal the full run's.
void compareRunLocal(const std::string &item, const plan::Plan &plan, const std::string &scratch,
                     int64_t intBound) {
  const bool hasForward = plan.function("forward") != nullptr;
  RunOptions options;
  options.seed = 11;
  options.keepShards = true;
  if (hasForward) {
    std::map<std::string, int64_t> bounds;
    const plan::Function &forward = *plan.function("forward");
    for (int32_t id : forward.inputs)
      if (forward.buffers[id].dtype == plan::DType::I64) bounds[forward.buffers[id].name] = intBound;
    options.inputs = makeDeterministicInputs(plan, options.seed, bounds);
    options.forwardRepeats = 1;
  }
  options.savePath = scratch + "/runlocal-cpu.safetensors";
  const RunResult cpu = runLocal(plan, options);
  options.savePath = scratch + "/runlocal-gpu.safetensors";
  const RunResult gpu = runLocal(plan, options, cuda::gpuSessionRanks(0));
  std::string bad;
  for (size_t r = 0; r < gpu.ranks.size(); ++r) {
    const RankReport &g = gpu.ranks[r];
    if (g.init.peakBytes != g.init.predictedPeakBytes ||
        (g.forward && g.forward->peakBytes != g.forward->predictedPeakBytes))
      bad += "rank " + std::to_string(r) + ": peak != predicted; ";
    for (size_t i = 0; i < plan.params.size(); ++i)
      if (gpu.shards[r][i].data != cpu.shards[r][i].data)
        bad += "'" + plan.params[i].name + "' on rank " + std::to_string(r) + " differs; ";
  }
  double worst = 0;
  for (size_t o = 0; o < cpu.outputs.size() && o < gpu.outputs.size(); ++o) {
    const double d = relativeDiff(gpu.outputs[o], cpu.outputs[o]);
    worst = std::max(worst, d);
    if (d < 0 || d > 2e-4) bad += "output '" + cpu.outputs[o].name + "' differs by " + std::to_string(d) + "; ";
  }
  if (gpu.outputs.size() != cpu.outputs.size()) bad += "output counts differ; ";
  const std::vector<char> gpuBytes = readAll(options.savePath);
  if (gpuBytes.empty() || gpuBytes != readAll(scratch + "/runlocal-cpu.safetensors"))
    bad += "the saved file differs from the CPU run's; ";
  if (!gpu.driverBytesHoldingShards) bad += "no cudaMemGetInfo figure; ";
  std::filesystem::remove(options.savePath);
  std::filesystem::remove(scratch + "/runlocal-cpu.safetensors");

  // --ranks: some ranks of the world, init only.
  plan::Plan initOnly = plan;
  initOnly.functions.erase(std::remove_if(initOnly.functions.begin(), initOnly.functions.end(),
                                          [](const plan::Function &f) { return f.name != "init"; }),
                           initOnly.functions.end());
  RunOptions some;
  some.seed = options.seed;
  some.keepShards = true;
  some.ranks = {0};
  if (plan.worldSize > 1) some.ranks.push_back(plan.worldSize - 1);
  const RunResult part = runLocal(initOnly, some, cuda::gpuSessionRanks(0));
  for (size_t k = 0; k < some.ranks.size() && k < part.shards.size(); ++k)
    for (size_t i = 0; i < plan.params.size(); ++i)
      if (part.shards[k][i].data != cpu.shards[some.ranks[k]][i].data)
        bad += "--ranks: '" + plan.params[i].name + "' on rank " +
               std::to_string(some.ranks[k]) + " differs from the full run's; ";
  char text[320];
  std::snprintf(text, sizeof text,
                "N=%lld: shards bit-identical to the CPU run, forward max rel diff %.2e, repeat "
                "identical, saved file == CPU's, peaks == predicted, driver %lld bytes holding "
                "shards; ranks alone (--ranks) == full run",
                static_cast<long long>(plan.worldSize), worst,
                static_cast<long long>(gpu.driverBytesHoldingShards.value_or(-1)));
  report("session", "runLocal " + item, bad.empty(), bad.empty() ? text : bad);
}

}  // namespace

void sessionChecks(const std::vector<std::string> &planPaths, int64_t intBound) {
  const std::string scratch = std::filesystem::temp_directory_path().string();
  for (int64_t n : {1, 2, 3})
    guarded("session", "seed plan N=" + std::to_string(n), [&] {
      compareSessions("seed plan N=" + std::to_string(n), test::seedPlan(n, 257, 33), scratch,
                      intBound);
    });
  if (planPaths.empty())
    report("session", "plan files", false,
           "no --session-plan FILE given (scripts/gpu-bundle.sh packs session-*.json)");
  for (const std::string &planPath : planPaths) {
    const std::string item = std::filesystem::path(planPath).filename().string();
    guarded("session", item, [&] {
      compareSessions(item, readPlanFile(planPath), scratch, intBound);
    });
    guarded("session", "runLocal " + item, [&] {
      compareRunLocal(item, readPlanFile(planPath), scratch, intBound);
    });
  }
}

}  // namespace shardc::gpucheck
