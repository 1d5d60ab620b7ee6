// A rank's device memory: allocation through a backend-specific allocator,
// accounting through the one MemoryLedger.
//
// Device is the part every backend shares: allocate() records the exact
// requested bytes in the ledger (the runtime's half of invariant 4,
// "predicted = measured") and hands out an owning DeviceBuffer; a subclass
// only supplies raw memory (CpuDevice: HostMemory; cuda::CudaDevice:
// cudaMalloc). A device is used by one rank's thread only; it is not
// thread-safe.
#pragma once

#include "runtime/HostMemory.h"
#include "runtime/MemoryLedger.h"
#include "runtime/Plan.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace shardc::runtime {

class Device;

/// What a device's allocator hands back and takes back (HostMemory's block;
/// the CUDA device uses only `data`).
using RawBlock = HostMemory::Block;

/// Owning handle to device memory; releases it (and its accounting) when
/// destroyed or on release(). Move-only. The device must outlive it.
/// data() is a pointer in the device's address space.
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
  friend class Device;
  Device *device_ = nullptr;
  std::byte *data_ = nullptr;
  int64_t bytes_ = 0;
  plan::Category category_ = plan::Category::Activation;
  uint64_t serial_ = 0;
  RawBlock block_;  // what the allocator takes back
};

class Device {
public:
  Device() = default;
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;
  /// Outstanding buffers must have been released (checked with an assert).
  virtual ~Device();

  /// Uninitialized memory. `bytes` may be 0 (a valid, non-null pointer is
  /// still returned; 0 bytes are accounted). Throws RuntimeError naming
  /// `label` if bytes < 0 or memory runs out.
  DeviceBuffer allocate(int64_t bytes, plan::Category category, const std::string &label);

  const MemoryLedger &ledger() const { return ledger_; }
  int64_t currentBytes() const { return ledger_.currentBytes(); }
  int64_t currentBytes(plan::Category category) const { return ledger_.currentBytes(category); }
  CategoryBytes currentByCategory() const { return ledger_.currentByCategory(); }
  int64_t peakBytes() const { return ledger_.peakBytes(); }
  const std::vector<LiveAllocation> &liveAtPeak() const { return ledger_.liveAtPeak(); }
  CategoryBytes peakByCategory() const { return ledger_.peakByCategory(); }
  std::vector<LiveAllocation> live() const { return ledger_.live(); }
  void resetPeak() { ledger_.resetPeak(); }
  /// A function (identified by `key`, e.g. its plan::Function) starts on
  /// this device: an allocator that plans a function's buffers from its
  /// earlier runs (HostMemory) hears of it; others ignore it.
  virtual void beginFunction(const void *key) { (void)key; }

protected:
  /// "CpuDevice", "CudaDevice": the prefix of allocation errors.
  virtual const char *kindName() const = 0;
  /// At least `bytes` (>= 0) of raw memory; throws RuntimeError naming
  /// `label` when there is none.
  virtual RawBlock allocateRaw(int64_t bytes, const std::string &label) = 0;
  virtual void releaseRaw(const RawBlock &block) noexcept = 0;

private:
  friend class DeviceBuffer;
  void releaseBuffer(DeviceBuffer &buffer);

  MemoryLedger ledger_;
};

/// Host memory (HostMemory: 64-byte aligned blocks, large ones reused).
class CpuDevice final : public Device {
public:
  static constexpr size_t kAlignment = 64;

  CpuDevice() = default;
  ~CpuDevice() override;

  /// Returns freed large blocks kept for reuse to the system (HostMemory):
  /// afterwards the process holds only the accounted bytes.
  void trimReuseCache() { memory_.trim(); }
  void beginFunction(const void *key) override { memory_.beginFunction(key); }
  /// Large requests served from kept vs fresh memory since the last trim.
  const HostMemory::Stats &largeBlockStats() const { return memory_.stats(); }

protected:
  const char *kindName() const override { return "CpuDevice"; }
  RawBlock allocateRaw(int64_t bytes, const std::string &label) override;
  void releaseRaw(const RawBlock &block) noexcept override { memory_.release(block); }

private:
  HostMemory memory_;
};

}  // namespace shardc::runtime
