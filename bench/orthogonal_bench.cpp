// orthogonal init on the host (orthogonalOnHost: the normal draw, then the
// Householder QR whose column updates split over threads) at 1 and at T
// threads, on the shapes given. The CPU backend runs it for an orthogonal
// parameter's owner rank; a GPU rank runs it on the host and copies the
// result over.
//
// Usage: shardc-orthogonal-bench THREADS ROWSxCOLS...
// Prints "ROWSxCOLS threads seconds" lines (best of 2), parsed by
// orthogonal_bench.sh, and checks that every thread count gives the same
// bytes (exit 1 otherwise).
#include "runtime/InitOps.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace shardc::runtime;
using shardc::plan::DType;

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s THREADS ROWSxCOLS...\n", argv[0]);
    return 2;
  }
  const int most = std::max(1, std::atoi(argv[1]));
  for (int a = 2; a < argc; ++a) {
    long long rows = 0, cols = 0;
    if (std::sscanf(argv[a], "%lldx%lld", &rows, &cols) != 2 || rows < 1 || cols < 1) {
      std::fprintf(stderr, "bad shape '%s' (ROWSxCOLS)\n", argv[a]);
      return 2;
    }
    init::GeneratorSpec normal;
    normal.kind = init::GeneratorKind::Normal;
    normal.shape = {rows, cols};
    normal.seed = 1;
    std::vector<float> first(static_cast<size_t>(rows * cols)), out(first.size());
    std::vector<std::byte> work(
        static_cast<size_t>(orthogonalWorkBytes({rows, cols}, DType::F32)));
    for (int threads : {1, most}) {
      double best = 1e30;
      for (int repeat = 0; repeat < 2; ++repeat) {
        const auto start = std::chrono::steady_clock::now();
        orthogonalOnHost(normal, 1.0, DType::F32, rows, cols, out.data(), work.data(), threads);
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                            start).count());
      }
      std::printf("%lldx%lld %d %.4f\n", rows, cols, threads, best);
      std::fflush(stdout);
      if (threads == 1) first = out;
      else if (std::memcmp(first.data(), out.data(), first.size() * sizeof(float)) != 0) {
        std::fprintf(stderr, "%lldx%lld: %d threads differ from one thread\n", rows, cols,
                     threads);
        return 1;
      }
      if (most == 1) break;
    }
  }
  return 0;
}
