#include "runtime/RankThreads.h"

#include "runtime/JoiningThreads.h"
#include "runtime/RankError.h"
#include "runtime/RuntimeError.h"

#include <mutex>
#include <optional>
#include <string>

namespace shardc::runtime {

std::string threadStartFailure(int64_t started, int64_t n, const std::string &reason) {
  return "could not start local rank " + std::to_string(started) + " (" + reason +
         "): only " + std::to_string(started) + " of " + std::to_string(n) +
         " rank threads started; run fewer local ranks (--world-size), raise the process' "
         "limits (ulimit -v, ulimit -u), or run one rank per process with --backend mpi";
}

void runRankThreads(LocalGroup &group, int64_t n, const std::function<void(int64_t)> &body,
                    const std::function<int64_t(int64_t)> &rankName) {
  std::mutex failureMutex;
  std::optional<std::string> firstFailure;
  auto fail = [&](const std::string &message) {
    {
      std::lock_guard lock(failureMutex);
      if (!firstFailure) firstFailure = message;
    }
    group.abort(message);
  };
  JoiningThreads threads;
  for (int64_t r = 0; r < n; ++r) {
    const bool started = threads.start([&, r] {
      try {
        body(r);
      } catch (const RankError &e) {  // names the rank it happened on
        fail("rank " + std::to_string(e.rank()) + ": " + e.what());
      } catch (const std::exception &e) {
        fail("rank " + std::to_string(rankName ? rankName(r) : r) + ": " + e.what());
      }
    });
    if (!started) {
      const std::string message = threadStartFailure(r, n, threads.refusal());
      {
        std::lock_guard lock(failureMutex);
        firstFailure = message;
      }
      group.abort(message);
      break;
    }
  }
  threads.joinAll();
  if (firstFailure) throw RuntimeError(*firstFailure);
}

}  // namespace shardc::runtime
