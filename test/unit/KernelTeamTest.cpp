// The kernel team behind parallelTasks (runtime/cpu/KernelTeam.h): every
// task runs once, the team outlives the call, nested calls run serially,
// a task's exception reaches the caller as a serial loop would report it,
// and refused threads shrink the team without changing what runs.
#include "runtime/JoiningThreads.h"
#include "runtime/cpu/KernelSupport.h"
#include "runtime/cpu/KernelTeam.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace shardc::runtime;

namespace {

/// Runs `body` on a thread of its own, so it starts without a kernel team
/// (the team is the calling thread's) and its team ends with it.
template <typename Body> void onFreshThread(const Body &body) {
  std::exception_ptr error;
  std::thread t([&] {
    try {
      body();
    } catch (...) {
      error = std::current_exception();
    }
  });
  t.join();
  if (error) std::rethrow_exception(error);
}

/// Counts how often each of `tasks` tasks ran.
std::vector<int> runCounted(int64_t tasks, int threads) {
  std::vector<std::atomic<int>> seen(static_cast<size_t>(tasks));
  cpu::parallelTasks(tasks, threads, int64_t(1) << 20,
                     [&](int64_t t) { seen[static_cast<size_t>(t)].fetch_add(1); });
  return std::vector<int>(seen.begin(), seen.end());
}

}  // namespace

TEST_CASE("the kernel team runs every task once and is kept for the next call",
          "[kernel-team]") {
  onFreshThread([] {
    CHECK(cpu::kernelTeamWorkers() == 0);
    for (int threads : {2, 3, 8}) {
      for (int64_t tasks : {1, 2, 3, 7, 64, 1000, 4099}) {
        INFO(threads << " threads, " << tasks << " tasks");
        for (int times : runCounted(tasks, threads)) REQUIRE(times == 1);
      }
      // Started once for the thread count and kept (tasks = 1 runs inline).
      CHECK(cpu::kernelTeamWorkers() == threads - 1);
    }
    // One thread, or a small job, never needs the team: it stays as it was.
    for (int times : runCounted(100, 1)) REQUIRE(times == 1);
    CHECK(cpu::kernelTeamWorkers() == 7);
    // Fewer threads than the team has: the same team, at most that many
    // threads at once.
    std::atomic<int> running{0}, most{0};
    cpu::parallelTasks(64, 2, int64_t(1) << 20, [&](int64_t) {
      const int now = running.fetch_add(1) + 1;
      for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      running.fetch_sub(1);
    });
    CHECK(most.load() <= 2);
    CHECK(cpu::kernelTeamWorkers() == 7);
  });
}

TEST_CASE("the kernel team's workers run tasks alongside the caller", "[kernel-team]") {
  onFreshThread([] {
    // Tasks that wait for each other can only finish if two threads run them
    // at once: a team that ran everything on the caller would never finish
    // task 0, so each gives up after a while and the check below fails.
    std::atomic<int> arrived{0};
    std::atomic<bool> together{true};
    cpu::parallelTasks(2, 2, int64_t(1) << 20, [&](int64_t) {
      arrived.fetch_add(1);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (arrived.load() < 2)
        if (std::chrono::steady_clock::now() > deadline) {
          together = false;
          return;
        }
    });
    CHECK(together);
  });
}

TEST_CASE("a kernel called from a kernel's task runs serially on that thread", "[kernel-team]") {
  onFreshThread([] {
    std::vector<std::atomic<int>> seen(64 * 50);
    std::atomic<bool> innerOnOneThread{true};
    cpu::parallelTasks(64, 4, int64_t(1) << 20, [&](int64_t outer) {
      const std::thread::id self = std::this_thread::get_id();
      cpu::parallelTasks(50, 4, int64_t(1) << 20, [&](int64_t inner) {
        if (std::this_thread::get_id() != self) innerOnOneThread = false;
        seen[static_cast<size_t>(outer * 50 + inner)].fetch_add(1);
      });
    });
    CHECK(innerOnOneThread);
    for (const std::atomic<int> &times : seen) REQUIRE(times == 1);
    CHECK(cpu::kernelTeamWorkers() == 3);  // no team was started for the inner calls
  });
}

TEST_CASE("a task's exception reaches the caller as a serial loop would report it",
          "[kernel-team]") {
  onFreshThread([] {
    // Tasks from 301 on that are multiples of 7 fail; a serial loop stops
    // at 301. Whatever the timing, the team reports 301.
    for (int round = 0; round < 20; ++round) {
      try {
        cpu::parallelTasks(1000, 4, int64_t(1) << 20, [](int64_t t) {
          if (t > 300 && t % 7 == 0) throw std::runtime_error("task " + std::to_string(t));
        });
        FAIL("no exception reached the caller");
      } catch (const std::runtime_error &e) {
        REQUIRE(std::string(e.what()) == "task 301");
      }
    }
    // The team is still usable after a failed call.
    for (int times : runCounted(500, 4)) REQUIRE(times == 1);
  });
}

TEST_CASE("threads the OS refuses shrink the kernel team, the same tasks run", "[kernel-team]") {
  for (int64_t allowed : {0, 1}) {
    INFO(allowed << " thread start(s) allowed");
    onFreshThread([allowed] {
      limitThreadStartsForTesting(allowed);
      std::vector<int> counts;
      try {
        counts = runCounted(1000, 4);
      } catch (...) {
        limitThreadStartsForTesting(-1);
        throw;
      }
      limitThreadStartsForTesting(-1);
      CHECK(cpu::kernelTeamWorkers() == allowed);
      for (int times : counts) REQUIRE(times == 1);
    });
  }
}

TEST_CASE("each calling thread has its own kernel team", "[kernel-team]") {
  // Two ranks' threads calling kernels at once (the local backend's case).
  std::atomic<int> wrong{0};
  JoiningThreads ranks;
  for (int r = 0; r < 2; ++r)
    REQUIRE(ranks.start([&] {
      for (int call = 0; call < 200; ++call)
        for (int times : runCounted(257, 3))
          if (times != 1) ++wrong;
      if (cpu::kernelTeamWorkers() != 2) ++wrong;
    }));
  ranks.joinAll();
  CHECK(wrong == 0);
}
