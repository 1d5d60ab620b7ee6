// What a parallel kernel call costs on the kernel team (runtime/cpu/
// KernelTeam.h, behind parallelTasks) next to the two ways it could run
// without one, measured in the same run: a thread started per call (the
// runtime before the team: init::parallelFor), and one thread. The kernel
// is an elementwise y = 2x + 1 in tasks of 16,384 elements, at the sizes a
// small transformer's ops have (a few thousand to a few million elements),
// called back to back as a forward calls its ops. Figures are wall
// microseconds per call, the median of 9 rounds of >= 50 ms.
//
//   build/bin/shardc-kernel-team-bench [--threads T]   (default: all cores)
#include "runtime/cpu/KernelSupport.h"
#include "runtime/init/ParallelFor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

using namespace shardc::runtime;

namespace {

constexpr int64_t kChunk = 16384;

void scaleChunk(const float *x, float *y, int64_t n, int64_t task) {
  const int64_t begin = task * kChunk, end = std::min(n, begin + kChunk);
  for (int64_t i = begin; i < end; ++i) y[i] = 2 * x[i] + 1;
}

template <typename Fn> double medianMicroseconds(const Fn &call) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> rounds;
  for (int round = 0; round < 9; ++round) {
    const Clock::time_point t0 = Clock::now();
    int64_t calls = 0;
    double seconds = 0;
    do {
      call();
      ++calls;
      seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (seconds < 0.05);
    rounds.push_back(1e6 * seconds / static_cast<double>(calls));
  }
  std::sort(rounds.begin(), rounds.end());
  return rounds[rounds.size() / 2];
}

}  // namespace

int main(int argc, char **argv) {
  int threads = static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--threads T]\n", argv[0]);
      return 2;
    }
  }
  if (threads < 2) {
    std::fprintf(stderr, "shardc-kernel-team-bench: --threads must be at least 2\n");
    return 2;
  }
  std::printf("elementwise kernel calls at %d threads, wall us per call (median of 9 rounds)\n\n",
              threads);
  std::printf("| elements | one thread | thread per call | kernel team | team vs per call | "
              "team vs one thread |\n|---|---|---|---|---|---|\n");
  for (int64_t n : {int64_t(1) << 15, int64_t(1) << 17, int64_t(1) << 19, int64_t(1) << 21,
                    int64_t(1) << 23}) {
    std::vector<float> x(static_cast<size_t>(n), 0.5f), y(static_cast<size_t>(n));
    const int64_t tasks = (n + kChunk - 1) / kChunk;
    // The same task body on every side; only how the tasks are run differs.
    auto task = [&](int64_t t) { scaleChunk(x.data(), y.data(), n, t); };
    const double serial = medianMicroseconds([&] { cpu::parallelTasks(tasks, 1, n, task); });
    const double perCall = medianMicroseconds([&] {
      init::parallelFor(tasks, threads, [&](int64_t begin, int64_t count) {
        for (int64_t t = begin; t < begin + count; ++t) task(t);
      });
    });
    const double team = medianMicroseconds([&] { cpu::parallelTasks(tasks, threads, n, task); });
    std::printf("| %lld | %.1f | %.1f | %.1f | %.2fx | %.2fx |\n", static_cast<long long>(n),
                serial, perCall, team, team / perCall, team / serial);
  }
  return 0;
}
