#include "runtime/cpu/KernelTeam.h"

#include "runtime/init/RoundTeam.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>

namespace shardc::runtime::cpu {

namespace {

/// A team and the thread count it was asked for (the OS may have refused
/// some of its workers; asking again for that many or fewer reuses it).
struct CallerTeam {
  explicit CallerTeam(int threads) : requested(threads), team(threads) {}
  const int requested;
  init::RoundTeam team;
};

// Destroyed when the calling thread ends: the team's destructor wakes and
// joins its workers.
thread_local std::unique_ptr<CallerTeam> callerTeam;
// True on any thread while it runs a task, so nested calls run serially.
thread_local bool runningTask = false;

}  // namespace

void runOnKernelTeam(int64_t tasks, int threads, TaskRange fn, const void *context) {
  if (tasks <= 0) return;
  if (threads <= 1 || tasks == 1 || runningTask) {
    fn(context, 0, tasks);
    return;
  }
  if (!callerTeam || callerTeam->requested < threads) {
    callerTeam.reset();  // its workers end before the new team's start
    callerTeam = std::make_unique<CallerTeam>(threads);
  }
  init::RoundTeam &team = callerTeam->team;
  // A larger team than asked for: its extra workers wake and find no part.
  const int64_t parts = std::min<int64_t>({team.size(), threads, tasks});
  if (parts == 1) {  // every worker was refused
    fn(context, 0, tasks);
    return;
  }
  // Four chunks per thread: few enough that the shared counter stays cold,
  // enough that a late worker's share is taken by the others.
  const int64_t chunk = std::max<int64_t>(1, tasks / (parts * 4));
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex errorMutex;
  int64_t errorAt = std::numeric_limits<int64_t>::max();
  std::exception_ptr error;
  team.run([&](int part) {
    if (part >= parts) return;
    runningTask = true;
    // Chunks are taken in increasing order, so when one fails every lower
    // chunk has been taken and finishes: the lowest failing chunk is the
    // one a serial loop would have stopped at, whatever the timing.
    while (!failed.load(std::memory_order_relaxed)) {
      const int64_t begin = next.fetch_add(chunk, std::memory_order_relaxed);
      if (begin >= tasks) break;
      try {
        fn(context, begin, std::min(tasks, begin + chunk));
      } catch (...) {
        std::lock_guard lock(errorMutex);
        if (begin < errorAt) {
          errorAt = begin;
          error = std::current_exception();
        }
        failed.store(true, std::memory_order_relaxed);
      }
    }
    runningTask = false;
  });
  if (error) std::rethrow_exception(error);
}

int kernelTeamWorkers() { return callerTeam ? callerTeam->team.size() - 1 : 0; }

}  // namespace shardc::runtime::cpu
