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
    liveAtPeak_ = live();
  }
  return serial;
}

void MemoryLedger::release(uint64_t serial) {
  auto it = live_.find(serial);
  if (it == live_.end()) return;
  current_ -= it->second.bytes;
  currentByCategory_[static_cast<size_t>(it->second.category)] -= it->second.bytes;
  live_.erase(it);
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
  liveAtPeak_ = live();
}

}  // namespace shardc::runtime
