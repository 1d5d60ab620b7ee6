// Section `session` of shardc-gpu-tests (Sections.h): LocalSession with
// every rank on one GPU (runtime/cuda/CudaSession.h), the piece behind the
// JIT API's device "cuda" and `shardc run --device cuda`, against the same
// session on the CPU: init bit for bit per rank, forward within tolerance
// and repeatable, save byte for byte, measured == predicted memory. The
// plans packed by scripts/gpu-bundle.sh cover transformers (llama-tiny, gpt2-tiny), a
// mixture of experts over tokens (router, topk, gather, moe_experts) and a
// small convnet (conv, norms, pools, reductions, argmax).
#include "GpuCheck.h"
#include "Sections.h"
#include "TestPlans.h"

#include "runtime/LocalRun.h"
#include "runtime/LocalSession.h"
#include "runtime/PlanJson.h"
#include "runtime/RuntimeError.h"
#include "runtime/Safetensors.h"
#include "runtime/cuda/CudaSession.h"

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
      std::ifstream in(planPath);
      if (!in) throw RuntimeError("cannot read " + planPath);
      std::stringstream text;
      text << in.rdbuf();
      compareSessions(item, planFromJson(text.str(), planPath), scratch, intBound);
    });
  }
}

}  // namespace shardc::gpucheck
