// Sections `index64` and `sharded` of shardc-gpu-tests (Sections.h).
#include "ExecTestUtil.h"
#include "GpuCheck.h"
#include "GpuRuns.h"
#include "Sections.h"

#include "runtime/MemoryModel.h"
#include "runtime/Philox.h"
#include "runtime/cuda/CudaInit.h"
#include "runtime/init/Generators.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace shardc::gpucheck {
using namespace shardc::runtime;
using namespace shardc::test::exec;

namespace {

const int kHostThreads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

std::map<std::string, AttrValue> generatorAttrs(const std::string &kind) {
  std::map<std::string, AttrValue> a{{"kind", kind}, {"stream", std::string("h.0.mlp.w")},
                                     {"position", int64_t(1)}};
  if (kind == "fill") a["value"] = 0.1;
  if (kind == "uniform") a.insert({{"low", -0.25}, {"high", 0.75}});
  if (kind == "normal") a.insert({{"mean", 0.5}, {"std", 0.02}});
  if (kind == "trunc_normal") a.insert({{"mean", 0.0}, {"std", 1.0}, {"low", -2.0}, {"high", 2.0}});
  if (kind == "arange") a.insert({{"start", -3.5}, {"step", 0.001}});
  return a;
}

Plan generatePlan(int64_t n, const std::vector<int64_t> &shape, const std::string &kind, DType dtype) {
  Plan plan = emptyPlan(n);
  const int32_t p = addParam(plan, "w", shape, dtype);
  emit(plan, OpCode::Alloc, {}, {p});
  emit(plan, OpCode::Generate, {}, {p}, generatorAttrs(kind));
  return plan;
}

init::GeneratorSpec bigSpec(init::GeneratorKind kind, int64_t elements) {
  init::GeneratorSpec spec;
  spec.kind = kind;
  spec.shape = {elements};
  spec.seed = 0x1234567887654321ull;
  spec.streamHash = philox::fnv1a32("wte", 3);
  spec.position = 0;
  spec.low = -0.25, spec.high = 0.75, spec.mean = 0.5, spec.std = 0.02;
  if (kind == init::GeneratorKind::TruncNormal) spec.mean = 0, spec.std = 1, spec.low = -2, spec.high = 2;
  spec.start = -3.5, spec.step = 0.001;
  return spec;
}

/// GPU elements [begin, begin + count) vs the CPU's: the number that differ.
int64_t compareWindow(cuda::CudaDevice &device, const init::GeneratorSpec &spec, DType dtype,
                      int64_t begin, int64_t count) {
  const int64_t size = plan::dtypeSize(dtype);
  std::vector<std::byte> cpu(static_cast<size_t>(count * size));
  init::generateRange(spec, dtype, begin, count, cpu.data(), kHostThreads);
  DeviceBytes out(device, cpu.size(), "window");
  cuda::generateRange(device, spec, dtype, begin, count, out.data());
  return countMismatches(cpu, download(device, out.data(), cpu.size()), size);
}

}  // namespace

void index64Checks(cuda::CudaDevice &device) {
  using K = init::GeneratorKind;
  struct Case {
    DType dtype;
    int64_t total, begin;
    const char *what;
  };
  const int64_t w = 1 << 20;
  // The f32/f16/bf16 path draws 4 values per Philox block, f64 2: element
  // 2^34 (2^33 for f64) is block 2^32, where the counter's high word turns 1.
  const Case cases[] = {
      {DType::F32, int64_t(1) << 35, (int64_t(1) << 31) - 5, "f32 from 2^31-5"},
      {DType::F32, int64_t(1) << 35, (int64_t(1) << 34) - 4093, "f32 across block 2^32"},
      {DType::BF16, int64_t(1) << 35, (int64_t(1) << 34) - 4093, "bf16 across block 2^32"},
      {DType::F16, int64_t(1) << 35, (int64_t(1) << 34) - 4093, "f16 across block 2^32"},
      {DType::F64, int64_t(1) << 34, (int64_t(1) << 33) - 2047, "f64 across block 2^32"},
  };
  for (K kind : {K::Uniform, K::Normal, K::TruncNormal, K::Arange})
    for (const Case &c : cases) {
      const std::string item = std::string(init::generatorKindName(kind)) + " " + c.what;
      guarded("index64", item, [&] {
        const int64_t bad = compareWindow(device, bigSpec(kind, c.total), c.dtype, c.begin, w);
        report("index64", item, bad == 0, std::to_string(bad) + " of " + std::to_string(w) + " differ");
      });
    }
  // One launch over more than 2^31 elements (grid-stride loops, 64-bit k).
  for (DType dtype : {DType::BF16, DType::F32}) {
    const std::string item = std::string("normal ") + plan::dtypeName(dtype) + ", 2^31+4099 in one range";
    guarded("index64", item, [&] {
      const int64_t total = (int64_t(1) << 31) + 4099, size = plan::dtypeSize(dtype);
      const init::GeneratorSpec spec = bigSpec(K::Normal, total);
      DeviceBytes all(device, static_cast<size_t>(total * size), "big");
      cuda::generateRange(device, spec, dtype, 0, total, all.data());
      device.synchronize("big range");
      int64_t bad = 0;
      for (int64_t begin : {int64_t(0), (int64_t(1) << 31) - w / 2, total - w}) {
        std::vector<std::byte> cpu(static_cast<size_t>(w * size));
        init::generateRange(spec, dtype, begin, w, cpu.data(), kHostThreads);
        bad += countMismatches(cpu, download(device, all.data() + begin * size, cpu.size()), size);
      }
      report("index64", item, bad == 0, std::to_string(bad) + " of 3 x 2^20 sampled elements differ");
    });
  }
}

void shardedInitChecks() {
  const uint64_t seed = 0x5eed;
  const std::vector<int64_t> shape = {1031, 1027};
  for (const char *kind : {"fill", "uniform", "normal", "trunc_normal", "arange", "eye"})
    for (DType dtype : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
      const std::string item = std::string(kind) + " " + plan::dtypeName(dtype);
      guarded("sharded", item, [&] {
        const std::vector<std::byte> reference =
            runInit(generatePlan(1, shape, kind, dtype), seed, kHostThreads)[0].params[0];
        std::string bad;
        for (int64_t n : {1, 2, 3, 8}) {
          const Plan plan = generatePlan(n, shape, kind, dtype);
          const RunResult run = runOnGpuRanks(plan, seed);
          for (const RankReport &rank : run.ranks)
            if (rank.init.peakBytes != rank.init.predictedPeakBytes ||
                rank.init.liveAtPeak != rank.init.predictedLiveAtPeak)
              bad += "N=" + std::to_string(n) + " rank " + std::to_string(rank.rank) + " peak " +
                     std::to_string(rank.init.peakBytes) + " != predicted " +
                     std::to_string(rank.init.predictedPeakBytes) + "; ";
          const std::vector<RankInit> ranks = rankInits(run);
          if (concatenated(plan, ranks, 0) != reference) bad += "N=" + std::to_string(n) + " values differ; ";
          if (!paddingIsZero(plan, ranks, 0)) bad += "N=" + std::to_string(n) + " padding not zero; ";
        }
        report("sharded", item, bad.empty(),
               bad.empty() ? "N=1,2,3,8 on one GPU == CPU N=1, peaks == predicted" : bad);
      });
    }
}

}  // namespace shardc::gpucheck
