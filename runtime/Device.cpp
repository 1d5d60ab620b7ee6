#include "runtime/Device.h"

#include "runtime/RuntimeError.h"

#include <cassert>
#include <new>

namespace shardc::runtime {
using plan::Category;

DeviceBuffer::DeviceBuffer(DeviceBuffer &&other) noexcept { *this = std::move(other); }

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&other) noexcept {
  if (this != &other) {
    release();
    device_ = other.device_;
    data_ = other.data_;
    bytes_ = other.bytes_;
    category_ = other.category_;
    serial_ = other.serial_;
    block_ = other.block_;
    other.device_ = nullptr;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::release() {
  if (device_) device_->releaseBuffer(*this);
  device_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

CpuDevice::~CpuDevice() {
  assert(live_.empty() && "CpuDevice destroyed with live buffers");
}

DeviceBuffer CpuDevice::allocate(int64_t bytes, Category category,
                                 const std::string &label) {
  if (bytes < 0)
    throw RuntimeError("CpuDevice::allocate('" + label + "'): negative size " +
                       std::to_string(bytes));
  // Round the *allocation* up to the alignment (aligned new wants it and it
  // keeps vector loads in bounds); the accounting stays exact.
  size_t rounded = (static_cast<size_t>(bytes) + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  HostMemory::Block block = memory_.allocate(rounded, kAlignment);
  void *memory = block.data;
  if (!memory)
    throw RuntimeError("CpuDevice::allocate('" + label + "'): out of memory allocating " +
                       std::to_string(bytes) + " bytes (" + std::to_string(current_) +
                       " bytes live)");
  DeviceBuffer buffer;
  buffer.device_ = this;
  buffer.data_ = static_cast<std::byte *>(memory);
  buffer.bytes_ = bytes;
  buffer.category_ = category;
  buffer.serial_ = nextSerial_++;
  buffer.block_ = block;
  live_[buffer.serial_] = LiveAllocation{label, category, bytes};
  current_ += bytes;
  currentByCategory_[static_cast<size_t>(category)] += bytes;
  // Strictly greater: the snapshot is of the moment the peak was *first* reached.
  if (current_ > peak_) {
    peak_ = current_;
    peakByCategory_ = currentByCategory_;
    liveAtPeak_ = live();
  }
  return buffer;
}

void CpuDevice::releaseBuffer(DeviceBuffer &buffer) {
  live_.erase(buffer.serial_);
  current_ -= buffer.bytes_;
  currentByCategory_[static_cast<size_t>(buffer.category_)] -= buffer.bytes_;
  memory_.release(buffer.block_);
}

int64_t CpuDevice::currentBytes(Category category) const {
  return currentByCategory_[static_cast<size_t>(category)];
}

std::vector<LiveAllocation> CpuDevice::live() const {
  std::vector<LiveAllocation> out;
  out.reserve(live_.size());
  for (const auto &[serial, allocation] : live_) out.push_back(allocation);
  return out;
}

void CpuDevice::resetPeak() {
  peak_ = current_;
  peakByCategory_ = currentByCategory_;
  liveAtPeak_ = live();
}

}  // namespace shardc::runtime
