// shardc's own GEMM (runtime/cpu/Gemm.h) next to one OpenBLAS sgemm call
// on linear shapes (A [M, K] x W^T, W [N, K], plus bias), one thread.
// Times are the thread's CPU seconds (best of 5 rounds of >= 0.1 s), the
// figure other jobs on a shared machine inflate least. sgemm here is one
// call on all M rows: the fastest OpenBLAS can do, not what shardc could
// use (its rounding of a row depends on M; Gemm.h).
//
//   build/bin/shardc-gemm-bench
#include "runtime/cpu/Gemm.h"

#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <vector>

using namespace shardc::runtime::cpu;
using shardc::plan::DType;

namespace {

double threadSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

template <typename Fn> double bestSeconds(const Fn &fn) {
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    const double t0 = threadSeconds();
    int calls = 0;
    do {
      fn();
      ++calls;
    } while (threadSeconds() - t0 < 0.1);
    best = std::min(best, (threadSeconds() - t0) / calls);
  }
  return best;
}

const char *isaName(GemmIsa isa) {
  return isa == GemmIsa::Avx512 ? "avx512" : isa == GemmIsa::Avx2 ? "avx2" : "portable";
}

}  // namespace

int main() {
  openblas_set_num_threads(1);
  const int64_t shapes[][3] = {{1, 768, 768},     {1, 4096, 9216},  {16, 768, 768},
                               {16, 2304, 768},   {64, 768, 768},   {128, 3072, 768},
                               {256, 768, 768},   {512, 768, 3072}, {1024, 1024, 1024}};
  std::printf("| M | N | K | own (%s) GFLOPS | own (avx2) GFLOPS | OpenBLAS sgemm GFLOPS |\n",
              isaName(bestGemmIsa()));
  std::printf("|---|---|---|---|---|---|\n");
  for (const auto &s : shapes) {
    const int64_t M = s[0], N = s[1], K = s[2];
    std::vector<float> A(static_cast<size_t>(M * K)), W(static_cast<size_t>(N * K)),
        C(static_cast<size_t>(M * N)), bias(static_cast<size_t>(N), 0.5f);
    for (size_t i = 0; i < A.size(); ++i) A[i] = static_cast<float>(i % 7) * 0.25f - 0.5f;
    for (size_t i = 0; i < W.size(); ++i) W[i] = static_cast<float>(i % 5) * 0.125f - 0.25f;
    const double flops = 2.0 * static_cast<double>(M * N * K);
    auto own = [&](GemmIsa isa) {
      const GemmArgs g{M, N, K, {DType::F32, A.data(), 0, K}, {DType::F32, W.data(), 0, K},
                       true, bias.data(), DType::F32, 0, C.data(), DType::F32, 0, N};
      return flops / bestSeconds([&] { gemmWithIsa(g, 1, isa); }) / 1e9;
    };
    const double best = own(bestGemmIsa());
    const double avx2 = gemmIsaSupported(GemmIsa::Avx2) ? own(GemmIsa::Avx2) : 0.0;
    const double blas = flops / bestSeconds([&] {
      for (int64_t i = 0; i < M; ++i) std::copy(bias.begin(), bias.end(), C.begin() + i * N);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(M),
                  static_cast<int>(N), static_cast<int>(K), 1.0f, A.data(),
                  static_cast<int>(K), W.data(), static_cast<int>(K), 1.0f, C.data(),
                  static_cast<int>(N));
    }) / 1e9;
    std::printf("| %ld | %ld | %ld | %.1f | %.1f | %.1f |\n", static_cast<long>(M),
                static_cast<long>(N), static_cast<long>(K), best, avx2, blas);
  }
}
