// Single-thread throughput of the init generators (generateRange, float32)
// next to a plain fill of the same bytes, the memory-write limit.
//
// Usage: shardc-init-bench [elements] [repeats]   (defaults 64M, 5)
// Prints one line per op: "op GB/s" (best of the repeats), parsed by
// run_init_bench.sh.
#include "runtime/Philox.h"
#include "runtime/init/CpuDispatch.h"
#include "runtime/init/Generators.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

using namespace shardc::runtime::init;
namespace plan = shardc::plan;

namespace {

double bestSeconds(int repeats, const std::function<void()> &body) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    auto start = std::chrono::steady_clock::now();
    body();
    std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    best = std::min(best, took.count());
  }
  return best;
}

}  // namespace

int main(int argc, char **argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : (int64_t{64} << 20);
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  const double bytes = static_cast<double>(n) * sizeof(float);
  std::unique_ptr<float[]> out(new float[static_cast<size_t>(n)]);
  std::memset(out.get(), 0, static_cast<size_t>(n) * sizeof(float));  // fault the pages in once

  std::printf("# elements %lld float32, best of %d, one thread, kernels: %s\n", static_cast<long long>(n),
              repeats, useAvx512() ? "avx512" : useAvx2() ? "avx2" : "scalar");
  double plainFill = bestSeconds(repeats, [&] { std::fill_n(out.get(), n, 0.5f); });
  std::printf("plain_fill %.3f\n", bytes / plainFill / 1e9);
  double plainMemset = bestSeconds(repeats, [&] { std::memset(out.get(), 0, static_cast<size_t>(n) * 4); });
  std::printf("memset %.3f\n", bytes / plainMemset / 1e9);

  GeneratorSpec spec;
  spec.shape = {n};
  spec.seed = 42;
  spec.streamHash = shardc::runtime::philox::fnv1a32("bench.weight", 12);
  struct Op { const char *name; GeneratorKind kind; };
  for (Op op : {Op{"fill", GeneratorKind::Fill}, Op{"uniform", GeneratorKind::Uniform},
                Op{"normal", GeneratorKind::Normal}, Op{"trunc_normal", GeneratorKind::TruncNormal}}) {
    spec.kind = op.kind;
    spec.value = 0.5;
    spec.mean = 0;
    spec.std = op.kind == GeneratorKind::TruncNormal ? 0.02 : 1;
    spec.low = op.kind == GeneratorKind::TruncNormal ? -0.04 : -1;
    spec.high = op.kind == GeneratorKind::TruncNormal ? 0.04 : 1;
    double seconds = bestSeconds(repeats, [&] { generateRange(spec, plan::DType::F32, 0, n, out.get()); });
    std::printf("%s %.3f\n", op.name, bytes / seconds / 1e9);
  }
  return 0;
}
