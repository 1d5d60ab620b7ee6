// Section `gpt2` of shardc-gpu-tests (Sections.h): GPT-2 124M, compiled
// here by `shardc compile --emit plan` (the bundle carries the plan JSON;
// the compiler itself needs MLIR and stays here), run on one GPU by the
// runtime alone: init, then timed forwards. The weights, the input ids and
// the logits are written as one safetensors file for torch_bench.py, which
// runs nanoGPT eagerly in torch on the same GPU with the same weights and
// compares logits and time.
#include "GpuCheck.h"
#include "Sections.h"

#include "runtime/Backend.h"
#include "runtime/DeterministicInput.h"
#include "runtime/Executor.h"
#include "runtime/MemoryModel.h"
#include "runtime/PlanJson.h"
#include "runtime/Safetensors.h"
#include "runtime/cuda/CudaExecutor.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace shardc::gpucheck {
using namespace shardc::runtime;

namespace {
const plan::Function &functionNamed(const plan::Plan &plan, const std::string &name) {
  for (const plan::Function &f : plan.functions)
    if (f.name == name) return f;
  throw RuntimeError("gpt2: the plan has no function '" + name + "'");
}
}  // namespace

void gpt2Bench(cuda::CudaDevice &device, const std::string &planPath, const std::string &exportDir) {
  if (planPath.empty()) {
    report("gpt2", "plan", false, "no --plan FILE given (scripts/gpu-bundle.sh packs gpt2-plan.json)");
    return;
  }
  std::ifstream in(planPath);
  if (!in) {
    report("gpt2", "plan", false, "cannot read " + planPath);
    return;
  }
  std::stringstream text;
  text << in.rdbuf();
  const plan::Plan plan = planFromJson(text.str(), planPath);
  if (plan.worldSize != 1) throw RuntimeError("gpt2: the plan is for world size " + std::to_string(plan.worldSize) + ", expected 1");
  const uint64_t seed = 1234;
  cuda::SingleGpuCommunicator comm(device);
  cuda::CudaBackend backend(device);
  RankState state(0);
  try {
    device.synchronize();
    device.resetPeak();
    auto t0 = std::chrono::steady_clock::now();
    runFunction(plan, "init", backend, comm, state, {}, seed, "gpt2");
    device.synchronize("gpt2 init");
    const double initMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const MemoryPrediction predictedInit = predictMemory(plan, "init", 0);
    report("gpt2", "init on the GPU", device.peakBytes() == predictedInit.peakBytes,
           std::to_string(initMs) + " ms; peak " + std::to_string(device.peakBytes()) + " B, predicted " +
               std::to_string(predictedInit.peakBytes));
    state.releaseFunctionBuffers();

    // The forward's inputs: deterministic ids below the vocabulary size.
    const plan::Function &forward = functionNamed(plan, "forward");
    int64_t vocab = 50257;
    for (const plan::Param &p : plan.params)
      if (p.name.find("wte") != std::string::npos && !p.shape.empty()) vocab = p.shape[0];
    std::vector<HostTensor> inputs;
    for (int32_t id : forward.inputs) {
      const plan::Buffer &b = forward.buffers.at(static_cast<size_t>(id));
      inputs.push_back(makeDeterministicInput(b.name, b.dtype, b.shape, seed,
                                              b.dtype == plan::DType::I64 ? std::optional<int64_t>(vocab)
                                                                          : std::nullopt));
    }
    const MemoryPrediction predictedForward = predictMemory(plan, "forward", 0);
    std::vector<double> ms;
    HostTensor logits;
    int64_t forwardPeak = 0;
    for (int run = 0; run < 6; ++run) {
      device.synchronize();
      device.resetPeak();
      t0 = std::chrono::steady_clock::now();
      std::vector<TensorView> out = runFunction(plan, "forward", backend, comm, state, inputs, seed, "gpt2");
      device.synchronize("gpt2 forward");
      if (run > 0) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      forwardPeak = device.peakBytes();
      if (run == 0 && !out.empty()) {
        logits = HostTensor{out.back().name, out.back().dtype, out.back().shape, {}};
        logits.data.resize(static_cast<size_t>(logits.expectedBytes()));
        cuda::copyToHost(device, logits.data.data(), out.back().data, logits.data.size());
      }
      state.releaseFunctionBuffers();
    }
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2];
    char detail[256];
    std::snprintf(detail, sizeof detail, "median %.2f ms of %zu (min %.2f), tokens %lld; peak %lld B, predicted %lld",
                  median, ms.size(), ms.front(), static_cast<long long>(inputs.empty() ? 0 : inputs[0].numElements()),
                  static_cast<long long>(forwardPeak), static_cast<long long>(predictedForward.peakBytes));
    report("gpt2", "forward on the GPU (shardc)", forwardPeak == predictedForward.peakBytes, detail);

    if (!exportDir.empty()) {
      std::vector<HostTensor> tensors;
      for (size_t i = 0; i < plan.params.size(); ++i) {
        const plan::Param &p = plan.params[i];
        const DeviceBuffer *b = state.paramStorage(static_cast<int32_t>(i));
        if (!b) throw RuntimeError("gpt2: param " + p.name + " has no storage after init");
        HostTensor t{p.name, p.dtype, p.shape, std::vector<std::byte>(static_cast<size_t>(plan::numElements(p.shape) * plan::dtypeSize(p.dtype)))};
        cuda::copyToHost(device, t.data.data(), b->data(), t.data.size());
        tensors.push_back(std::move(t));
      }
      for (HostTensor &t : inputs) tensors.push_back(t);
      logits.name = "shardc.logits";
      tensors.push_back(std::move(logits));
      const std::string path = exportDir + "/gpt2-shardc.safetensors";
      char ms_text[64];
      std::snprintf(ms_text, sizeof ms_text, "%.4f", median);
      writeSafetensors(path, tensors, {{"shardc_forward_ms", ms_text}, {"input", inputs.empty() ? "" : inputs[0].name}});
      report("gpt2", "weights, ids and logits for torch", true, path);
    }
  } catch (...) {
    state.releaseAll();
    throw;
  }
  state.releaseAll();
}

}  // namespace shardc::gpucheck
