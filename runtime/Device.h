// CPU memory with exact byte accounting.
//
// The accounting is the runtime's half of invariant 4 ("predicted =
// measured"): it counts exactly the bytes requested (no rounding to the
// alignment), per category, and remembers what was live when the peak was
// first reached, so a report can explain a peak, not just state it.
// A device is used by one rank's thread only; it is not thread-safe.
#pragma once

#include "runtime/HostMemory.h"
#include "runtime/Plan.h"

#include <array>
#include <cstddef>
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

class CpuDevice;

/// Owning handle to device memory; releases it (and its accounting) when
/// destroyed or on release(). Move-only. The device must outlive it.
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer &&other) noexcept;
  DeviceBuffer &operator=(DeviceBuffer &&other) noexcept;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer() { release(); }

  void release();
  explicit operator bool() const { return device_ != nullptr; }
  std::byte *data() const { return data_; }
  int64_t bytes() const { return bytes_; }
  plan::Category category() const { return category_; }

private:
  friend class CpuDevice;
  CpuDevice *device_ = nullptr;
  std::byte *data_ = nullptr;
  int64_t bytes_ = 0;
  plan::Category category_ = plan::Category::Activation;
  uint64_t serial_ = 0;
  HostMemory::Block block_;  // what HostMemory takes back
};

class CpuDevice {
public:
  static constexpr size_t kAlignment = 64;

  CpuDevice() = default;
  CpuDevice(const CpuDevice &) = delete;
  CpuDevice &operator=(const CpuDevice &) = delete;
  /// Outstanding buffers must have been released (checked with an assert).
  ~CpuDevice();

  /// 64-byte aligned, uninitialized memory. `bytes` may be 0 (a valid,
  /// non-null pointer is still returned; 0 bytes are accounted).
  /// Throws RuntimeError naming `label` if bytes < 0 or memory runs out.
  DeviceBuffer allocate(int64_t bytes, plan::Category category, const std::string &label);

  int64_t currentBytes() const { return current_; }
  int64_t currentBytes(plan::Category category) const;
  CategoryBytes currentByCategory() const { return currentByCategory_; }
  int64_t peakBytes() const { return peak_; }
  /// What was live (in allocation order) when the peak was first reached.
  const std::vector<LiveAllocation> &liveAtPeak() const { return liveAtPeak_; }
  /// Bytes per category at that moment.
  CategoryBytes peakByCategory() const { return peakByCategory_; }
  /// Everything live now, in allocation order.
  std::vector<LiveAllocation> live() const;
  /// Starts a new measurement window: peak := current, snapshot := live().
  void resetPeak();
  /// Returns freed large blocks kept for reuse to the system (HostMemory):
  /// afterwards the process holds only the accounted bytes.
  void trimReuseCache() { memory_.trim(); }

private:
  friend class DeviceBuffer;
  void releaseBuffer(DeviceBuffer &buffer);

  int64_t current_ = 0;
  int64_t peak_ = 0;
  CategoryBytes currentByCategory_{};
  CategoryBytes peakByCategory_{};
  std::vector<LiveAllocation> liveAtPeak_;
  uint64_t nextSerial_ = 1;
  std::map<uint64_t, LiveAllocation> live_;  // serial = allocation order
  HostMemory memory_;  // last member: freed after every buffer's accounting
};

}  // namespace shardc::runtime
