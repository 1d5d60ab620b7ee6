// One arena for a function's large buffers, laid out from a recorded run of
// the function and followed, request by request, when it runs again.
//
// Why: HostMemory serves a request from the smallest kept block that holds
// it. A training step's buffers come in many sizes and lifetimes, so that
// greedy choice leaves some later request without a block: it first-touches
// a fresh one and, under the resident bound, frees another, every step
// (Mixtral at the zoo's size: 93-122 MB a step, a tenth of its time). A plan
// made with the whole run in view has no such misses: every request has an
// offset in one arena whose pages stay resident from one run to the next.
//
// AllocationTrace records a run (sizes, the order of allocations and
// releases); layoutArena() gives every recorded request an offset such that
// requests live at the same time never share a byte (greedy by size); and
// ArenaReplay checks that a later run follows the trace closely enough for
// that guarantee to hold, request by request: the same size at the same
// position, and every buffer the trace had released before it released
// already. A run that departs gets nothing more from the arena.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace shardc::runtime {

class AllocationTrace {
public:
  struct Entry {
    size_t bytes = 0;
    /// Releases recorded before this allocation.
    size_t releasesBefore = 0;
    /// Event times (allocations and releases counted together): the entry
    /// is live in [allocatedAt, releasedAt); releasedAt is kStillLive until
    /// the release is recorded.
    size_t allocatedAt = 0;
    size_t releasedAt = kStillLive;
  };
  static constexpr size_t kStillLive = SIZE_MAX;

  /// Records an allocation of `bytes`; returns its id (0, 1, ... in order).
  int32_t allocate(size_t bytes);
  /// Records the release of entry `id` (once).
  void release(int32_t id);

  const std::vector<Entry> &entries() const { return entries_; }
  /// The ids in the order they were released.
  const std::vector<int32_t> &releaseOrder() const { return releaseOrder_; }
  /// True when every recorded allocation was released: only such a run can
  /// be laid out (a buffer that outlives the run has no end to plan for).
  bool complete() const { return releaseOrder_.size() == entries_.size(); }

private:
  std::vector<Entry> entries_;
  std::vector<int32_t> releaseOrder_;
  size_t clock_ = 0;
};

/// Where each of a trace's entries lives in one arena of `bytes`.
struct ArenaLayout {
  std::vector<size_t> offsets;  // by entry id, multiples of the granule
  size_t bytes = 0;             // the arena's size: the end of the highest entry
};

/// Greedy by size (Pisarchyk and Lee, "Efficient Memory Management for
/// Deep Neural Net Inference", 2020): entries from the largest down, each at
/// the lowest-waste gap among the entries already placed whose lifetimes
/// overlap its own, or above them all; entries of one size in four orders
/// (allocation, longest-lived, latest and earliest release first), the
/// smallest arena kept. Sizes are rounded up to `granule` (a power of two).
/// `trace` must be complete(). Each order costs O(n^2) in the entries
/// (milliseconds for a training step's few hundred).
ArenaLayout layoutArena(const AllocationTrace &trace, size_t granule);

/// A run that follows a trace, request by request.
class ArenaReplay {
public:
  /// `trace` must outlive the replay.
  explicit ArenaReplay(const AllocationTrace &trace);

  /// The entry id the next request of `bytes` may take, or -1 when the run
  /// departs from the trace here (another size, more requests than
  /// recorded, or a buffer that the trace had released by now still live);
  /// after -1 every later request gets -1 too.
  int32_t next(size_t bytes);
  /// The buffer of entry `id` (one next() returned) is released.
  void release(int32_t id);
  bool departed() const { return departed_; }
  /// Entries handed out and not yet released.
  size_t live() const { return live_; }
  /// Whether entry `id` is handed out and not yet released.
  bool isLive(int32_t id) const { return state_[static_cast<size_t>(id)] == State::Live; }

private:
  enum class State : unsigned char { NotYet, Live, Released };
  const AllocationTrace &trace_;
  std::vector<State> state_;
  size_t cursor_ = 0;
  /// How many of trace.releaseOrder()'s first entries this run released.
  size_t releasedPrefix_ = 0;
  size_t live_ = 0;
  bool departed_ = false;
};

}  // namespace shardc::runtime
