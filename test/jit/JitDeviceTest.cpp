// JitOptions::device: "cpu", "cuda" and "cuda:N" (docs/jit.md, "On a GPU").
// Without a usable GPU (CI: the CUDA toolkit, no device) jit() refuses
// "cuda" with the reason before compiling anything; with one, the model
// runs there and agrees with the CPU. Any other string is refused by name.
#include "GptJitOptions.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>

using namespace shardc;

namespace {

std::string jitError(gpt::GPT &model, JitOptions options) {
  try {
    (void)jit(model, options);
  } catch (const Error &error) {
    return error.what();
  }
  return "";
}

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

} // namespace

TEST_CASE("jit: a device that is none of cpu, cuda, cuda:N is refused by name",
          "[jit][device]") {
  gpt::GPT model;
  for (const char *device : {"tpu", "cuda:", "cuda:x", "cuda:-1", "cuda:0:1", "CPU"}) {
    JitOptions options = gptJitOptions(model, 2);
    options.device = device;
    const std::string error = jitError(model, options);
    INFO("device '" << device << "': " << error);
    CHECK(contains(error, std::string("jit: device '") + device +
                              "' is not one of cpu, cuda, cuda:N"));
  }
}

TEST_CASE("jit: device cuda runs on the GPU, or says why it cannot", "[jit][device]") {
  gpt::GPT model;
  JitOptions options = gptJitOptions(model, 2);
  options.device = "cuda";
  const std::string error = jitError(model, options);
  if (!error.empty()) {
    INFO(error);
    std::printf("jit device test: device \"cuda\" refused: %s\n", error.c_str());
    CHECK(contains(error, "jit: device 'cuda': "));
    CHECK((contains(error, "no CUDA device visible") ||
           contains(error, "built without the CUDA runtime")));
    // A missing ordinal is refused as well (whatever the machine has).
    options.device = "cuda:4095";
    CHECK(contains(jitError(model, options), "jit: device 'cuda:4095': "));
    return;
  }
  // A GPU is here: the same model on the CPU and on the GPU.
  CompiledModel gpu = jit(model, options);
  JitOptions cpuOptions = gptJitOptions(model, 2);
  CompiledModel cpu = jit(model, cpuOptions);
  const std::vector<HostTensor> inputs = cpu.example_inputs(5);
  const std::vector<HostTensor> want = cpu.forward(inputs);
  const std::vector<HostTensor> got = gpu.forward(inputs);
  REQUIRE(got.size() == want.size());
  REQUIRE(got[0].data.size() == want[0].data.size());
  double worst = 0;
  for (size_t i = 0; i < got[0].data.size(); i += 4) {
    float a, b;
    std::memcpy(&a, &got[0].data[i], 4);
    std::memcpy(&b, &want[0].data[i], 4);
    worst = std::max(worst, std::fabs(double(a) - b) / std::max(1.0, std::fabs(double(b))));
  }
  CHECK(worst <= 2e-4);
  // Init is bit-identical on the GPU: every shard of every rank.
  for (const ParameterInfo &p : cpu.parameters())
    for (int64_t r = 0; r < 2; ++r) CHECK(gpu.shard(p.name, r).data == cpu.shard(p.name, r).data);
  for (const RankMemory &rank : gpu.memory_report().ranks) {
    CHECK(rank.init_peak == rank.init_predicted_peak);
    CHECK(rank.forward_peak == rank.forward_predicted_peak);
  }
}
