// Collectives between the ranks of one plan execution.
//
// Every call is collective (all ranks must make the same calls in the same
// order) and bounded by a timeout: a rank that waits longer throws
// RuntimeError naming the ranks it waited for, instead of hanging forever.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace shardc::runtime {

class Communicator {
public:
  virtual ~Communicator() = default;

  virtual int64_t rank() const = 0;
  virtual int64_t worldSize() const = 0;

  /// Every rank contributes `bytesPerRank` bytes from `send`; `recv` receives
  /// worldSize * bytesPerRank bytes, rank 0's first. `send` and `recv` must
  /// not overlap. All ranks must pass the same bytesPerRank.
  virtual void allGather(const void *send, size_t bytesPerRank, void *recv) = 0;
  /// Rank `root` sends worldSize * bytesPerRank bytes from `send` (rank r's
  /// part first at r * bytesPerRank); every rank, root included, receives its
  /// bytesPerRank bytes into `recv`. `send` is read on root only (other ranks
  /// may pass nullptr); it must not overlap root's `recv`. All ranks must pass
  /// the same root and bytesPerRank. Same timeout and abort behaviour as
  /// allGather.
  virtual void scatter(int64_t root, const void *send, size_t bytesPerRank, void *recv) = 0;
  virtual void barrier() = 0;

  virtual std::chrono::duration<double> timeout() const = 0;
  virtual void setTimeout(std::chrono::duration<double> timeout) = 0;
};

}  // namespace shardc::runtime
