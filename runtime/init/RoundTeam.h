// A fixed team of threads for many short rounds of parallel work, such as
// the Householder QR's 2n column updates behind `orthogonal`. Starting
// threads for every round (parallelFor) costs tens of microseconds each,
// more than a mid-sized round's work. This team's threads spin briefly
// for the next round, then sleep in atomic waits (futexes): a busy team
// wakes in about a microsecond, and an idle or oversubscribed one gives its
// cores away instead of spinning on them. The team lives as long as the
// loop that uses it.
#pragma once

#include "runtime/JoiningThreads.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>

namespace shardc::runtime::init {

class RoundTeam {
public:
  /// The caller and up to threads - 1 workers (fewer when the OS refuses
  /// one: the rounds then split over fewer parts, same results).
  explicit RoundTeam(int threads) {
    for (int w = 1; w < threads; ++w) {
      if (!workers_.start([this, w] { work(w); })) break;
      ++size_;
    }
  }
  ~RoundTeam() {
    stop_.store(true, std::memory_order_release);
    round_.fetch_add(1, std::memory_order_release);  // wakes the sleepers to see stop_
    round_.notify_all();
    workers_.joinAll();
  }
  RoundTeam(const RoundTeam &) = delete;
  RoundTeam &operator=(const RoundTeam &) = delete;

  /// Threads in a round, the caller included.
  int size() const { return size_; }

  /// Runs body(part) for every part in [0, size()): part 0 on the caller,
  /// the others on the workers; returns when all are done. `body` must not
  /// throw.
  void run(const std::function<void(int)> &body) {
    if (size_ == 1) {
      body(0);
      return;
    }
    body_ = &body;
    pending_.store(static_cast<uint32_t>(size_ - 1), std::memory_order_relaxed);
    round_.fetch_add(1, std::memory_order_release);
    round_.notify_all();
    body(0);
    for (uint32_t left; (left = pending_.load(std::memory_order_acquire)) != 0;)
      waitWhile(pending_, left);
  }

private:
  /// Spins a little while `value` still holds `old`, then sleeps until it
  /// is notified of a change.
  static void waitWhile(const std::atomic<uint32_t> &value, uint32_t old) {
    for (int spins = 0; spins < kSpins; ++spins) {
      if (value.load(std::memory_order_acquire) != old) return;
      __builtin_ia32_pause();
    }
    value.wait(old, std::memory_order_acquire);
  }
  static constexpr int kSpins = 2000;  // a few microseconds

  void work(int part) {
    uint32_t seen = 0;
    for (;;) {
      uint32_t round;
      while ((round = round_.load(std::memory_order_acquire)) == seen) waitWhile(round_, seen);
      if (stop_.load(std::memory_order_acquire)) return;
      seen = round;
      (*body_)(part);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
    }
  }

  int size_ = 1;
  const std::function<void(int)> *body_ = nullptr;
  std::atomic<uint32_t> round_{0};  // wraps; only its changes count
  std::atomic<uint32_t> pending_{0};
  std::atomic<bool> stop_{false};
  JoiningThreads workers_;  // last: joined (by the destructor) before the rest goes
};

}  // namespace shardc::runtime::init
