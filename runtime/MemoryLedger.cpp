#include "runtime/MemoryLedger.h"

namespace shardc::runtime {

uint64_t MemoryLedger::record(LiveAllocation allocation) {
  const uint64_t serial = nextSerial_++;
  current_ += allocation.bytes;
  currentByCategory_[static_cast<size_t>(allocation.category)] += allocation.bytes;
  live_.emplace(serial, std::move(allocation));
  // Strictly greater: the snapshot is of the moment the peak was *first* reached.
  if (current_ > peak_) {
    peak_ = current_;
    peakByCategory_ = currentByCategory_;
    peakSerial_ = serial;
    releasedSincePeak_.clear();
  }
  return serial;
}

void MemoryLedger::release(uint64_t serial) {
  auto it = live_.find(serial);
  if (it == live_.end()) return;
  current_ -= it->second.bytes;
  currentByCategory_[static_cast<size_t>(it->second.category)] -= it->second.bytes;
  if (serial <= peakSerial_) releasedSincePeak_.insert(live_.extract(it));
  else live_.erase(it);
}

const std::vector<LiveAllocation> &MemoryLedger::liveAtPeak() const {
  // Both maps are in serial order and disjoint: merge them.
  liveAtPeak_.clear();
  auto live = live_.begin();
  auto released = releasedSincePeak_.begin();
  while (true) {
    const bool liveLeft = live != live_.end() && live->first <= peakSerial_;
    const bool releasedLeft = released != releasedSincePeak_.end();
    if (!liveLeft && !releasedLeft) break;
    if (!releasedLeft || (liveLeft && live->first < released->first))
      liveAtPeak_.push_back((live++)->second);
    else
      liveAtPeak_.push_back((released++)->second);
  }
  return liveAtPeak_;
}

std::vector<LiveAllocation> MemoryLedger::live() const {
  std::vector<LiveAllocation> out;
  out.reserve(live_.size());
  for (const auto &[serial, allocation] : live_) out.push_back(allocation);
  return out;
}

void MemoryLedger::resetPeak() {
  peak_ = current_;
  peakByCategory_ = currentByCategory_;
  peakSerial_ = nextSerial_ - 1;
  releasedSincePeak_.clear();
}

}  // namespace shardc::runtime
