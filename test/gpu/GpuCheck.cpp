#include "GpuCheck.h"

#include "runtime/Philox.h"
#include "runtime/cuda/CudaCheck.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>

namespace shardc::gpucheck {
using namespace shardc::runtime;

namespace {
struct Row {
  std::string section, item, detail;
  bool ok;
};
std::vector<Row> rows;
int failed = 0;
}  // namespace

void report(const std::string &section, const std::string &item, bool ok,
            const std::string &detail) {
  std::printf("| %-10s | %-44s | %-4s | %s\n", section.c_str(), item.c_str(), ok ? "ok" : "FAIL",
              detail.c_str());
  std::fflush(stdout);
  rows.push_back({section, item, detail, ok});
  if (!ok) ++failed;
}

void guarded(const std::string &section, const std::string &item,
             const std::function<void()> &body) {
  try {
    body();
  } catch (const std::exception &e) {
    report(section, item, false, std::string("exception: ") + e.what());
  }
}

int failures() { return failed; }

void writeResultsJson(const std::string &path) {
  nlohmann::json all = nlohmann::json::array();
  for (const Row &r : rows)
    all.push_back({{"section", r.section}, {"item", r.item}, {"ok", r.ok}, {"detail", r.detail}});
  std::ofstream out(path);
  out << all.dump(1) << "\n";
  if (!out) std::fprintf(stderr, "shardc-gpu-tests: cannot write %s\n", path.c_str());
}

DeviceBytes::DeviceBytes(cuda::CudaDevice &device, size_t bytes, const std::string &label)
    : buffer(device.allocate(static_cast<int64_t>(bytes), plan::Category::Activation, label)) {}

std::vector<std::byte> download(cuda::CudaDevice &device, const void *src, size_t bytes) {
  std::vector<std::byte> out(bytes);
  cuda::copyToHost(device, out.data(), src, bytes);
  return out;
}

int64_t countMismatches(const std::vector<std::byte> &a, const std::vector<std::byte> &b,
                        int64_t elementSize) {
  if (a.size() != b.size()) return static_cast<int64_t>(std::max(a.size(), b.size()));
  int64_t bad = 0;
  for (size_t i = 0; i < a.size(); i += static_cast<size_t>(elementSize))
    if (std::memcmp(&a[i], &b[i], static_cast<size_t>(elementSize)) != 0) ++bad;
  return bad;
}

init::GeneratorSpec specFor(init::GeneratorKind kind, std::vector<int64_t> shape) {
  init::GeneratorSpec spec;
  spec.kind = kind;
  spec.shape = std::move(shape);
  spec.seed = 0x1234567887654321ull;
  spec.streamHash = philox::fnv1a32("h.0.attn.weight", 15);
  spec.position = 3;
  switch (kind) {
  case init::GeneratorKind::Fill: spec.value = 0.1; break;
  case init::GeneratorKind::Uniform: spec.low = -0.25; spec.high = 0.75; break;
  case init::GeneratorKind::Normal: spec.mean = 0.5; spec.std = 0.02; break;
  case init::GeneratorKind::TruncNormal: spec.mean = 0; spec.std = 1; spec.low = -2; spec.high = 2; break;
  case init::GeneratorKind::Eye: break;
  case init::GeneratorKind::Arange: spec.start = -3.5; spec.step = 0.001; break;
  }
  return spec;
}

double timeMs(cuda::CudaDevice &device, const std::function<void()> &body, int repeats) {
  cudaEvent_t start, stop;
  cuda::checkCuda(cudaEventCreate(&start), "cudaEventCreate");
  cuda::checkCuda(cudaEventCreate(&stop), "cudaEventCreate");
  body();  // warm-up
  cuda::checkCuda(cudaEventRecord(start, device.stream()), "cudaEventRecord");
  for (int i = 0; i < repeats; ++i) body();
  cuda::checkCuda(cudaEventRecord(stop, device.stream()), "cudaEventRecord");
  cuda::checkCuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / repeats;
}

}  // namespace shardc::gpucheck
