// Starting threads without aborting the process.
//
// std::thread's constructor throws std::system_error when the OS refuses a
// thread (address space for its stack under `ulimit -v`, `ulimit -u`, a
// cgroup's pid limit), and destroying a joinable std::thread calls
// std::terminate. JoiningThreads turns a refusal into a return value and
// joins every thread it started, also when its owner unwinds.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace shardc::runtime {

namespace detail {
/// Tests only: how many more thread starts succeed before every further one
/// is refused (-1: no limit). The OS's refusal needs a tight ulimit, which
/// a unit test cannot set for its own process alone.
inline std::atomic<int64_t> threadStartsAllowedForTesting{-1};
}  // namespace detail

/// Refuses every thread start after the next `allowed` ones (tests only);
/// -1 lifts the limit.
inline void limitThreadStartsForTesting(int64_t allowed) {
  detail::threadStartsAllowedForTesting = allowed;
}

class JoiningThreads {
public:
  JoiningThreads() = default;
  JoiningThreads(const JoiningThreads &) = delete;
  JoiningThreads &operator=(const JoiningThreads &) = delete;
  ~JoiningThreads() { joinAll(); }

  /// Runs `body` on a new thread. False when the thread could not be
  /// started; refusal() then says why, and nothing ran.
  template <typename Body> bool start(Body &&body) {
    int64_t allowed = detail::threadStartsAllowedForTesting.load();
    while (allowed > 0 &&
           !detail::threadStartsAllowedForTesting.compare_exchange_weak(allowed, allowed - 1)) {
    }
    if (allowed == 0) {
      refusal_ = "thread start refused by the test limit";
      return false;
    }
    try {
      threads_.emplace_back(std::forward<Body>(body));
      return true;
    } catch (const std::exception &e) {  // std::system_error, or bad_alloc growing threads_
      refusal_ = e.what();
      return false;
    }
  }

  /// Joins every started thread (idempotent).
  void joinAll() {
    for (std::thread &t : threads_)
      if (t.joinable()) t.join();
  }

  /// Threads started so far.
  int64_t started() const { return static_cast<int64_t>(threads_.size()); }
  /// Why the last refused start was refused ("" if none was).
  const std::string &refusal() const { return refusal_; }

private:
  std::vector<std::thread> threads_;
  std::string refusal_;
};

}  // namespace shardc::runtime
