// The one byte ledger behind "predicted == measured" (invariant 4).
//
// Every device (CPU, CUDA) records its allocations here, and MemoryModel
// replays a plan's allocations through the same class, so the prediction and
// the measurement are computed by one piece of code. It counts exactly the
// bytes requested (no rounding to an allocator's granularity), per category,
// current and peak, and remembers what was live when the peak was first
// reached, so a report can explain a peak, not just state it. IREE's
// iree_hal_allocator_statistics, shared by every HAL driver, is the model.
// Not thread-safe: one ledger belongs to one rank.
#pragma once

#include "runtime/Plan.h"

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shardc::runtime {

/// One live allocation as reported in a peak snapshot.
struct LiveAllocation {
  std::string label;
  plan::Category category = plan::Category::Activation;
  int64_t bytes = 0;
  bool operator==(const LiveAllocation &) const = default;
};

/// Bytes per category, indexed by static_cast<size_t>(Category).
using CategoryBytes = std::array<int64_t, 4>;

class MemoryLedger {
public:
  /// Records an allocation; returns its serial (allocation order), which
  /// release() takes back. The peak snapshot is taken when the total first
  /// exceeds the previous peak (strictly), i.e. the moment it is reached.
  uint64_t record(LiveAllocation allocation);
  void release(uint64_t serial);

  bool empty() const { return live_.empty(); }
  int64_t currentBytes() const { return current_; }
  int64_t currentBytes(plan::Category category) const {
    return currentByCategory_[static_cast<size_t>(category)];
  }
  CategoryBytes currentByCategory() const { return currentByCategory_; }
  int64_t peakBytes() const { return peak_; }
  /// What was live (in allocation order) when the peak was first reached.
  const std::vector<LiveAllocation> &liveAtPeak() const;
  /// Bytes per category at that moment.
  CategoryBytes peakByCategory() const { return peakByCategory_; }
  /// Everything live now, in allocation order.
  std::vector<LiveAllocation> live() const;
  /// Starts a new measurement window: peak := current, snapshot := live().
  void resetPeak();

private:
  int64_t current_ = 0;
  int64_t peak_ = 0;
  CategoryBytes currentByCategory_{};
  CategoryBytes peakByCategory_{};
  uint64_t nextSerial_ = 1;
  std::map<uint64_t, LiveAllocation> live_;  // serial = allocation order
  // The peak snapshot, kept without copying the live set at every new peak
  // (a forward reaches a new peak at most of its allocations, and copying
  // every parameter's label each time cost 40 us per allocation on GPT-2):
  // the allocations live at the peak are those of live_ with a serial up to
  // peakSerial_ plus the ones released since, which release() moves here.
  uint64_t peakSerial_ = 0;
  std::map<uint64_t, LiveAllocation> releasedSincePeak_;
  mutable std::vector<LiveAllocation> liveAtPeak_;  // built on request
};

}  // namespace shardc::runtime
