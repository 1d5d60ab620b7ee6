#include "runtime/Device.h"

#include "runtime/RuntimeError.h"

#include <cassert>

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

Device::~Device() { assert(ledger_.empty() && "Device destroyed with live buffers"); }

DeviceBuffer Device::allocate(int64_t bytes, Category category, const std::string &label) {
  if (bytes < 0)
    throw RuntimeError(std::string(kindName()) + "::allocate('" + label + "'): negative size " +
                       std::to_string(bytes));
  DeviceBuffer buffer;
  buffer.block_ = allocateRaw(bytes, label);
  buffer.device_ = this;
  buffer.data_ = static_cast<std::byte *>(buffer.block_.data);
  buffer.bytes_ = bytes;
  buffer.category_ = category;
  buffer.serial_ = ledger_.record(LiveAllocation{label, category, bytes});
  return buffer;
}

void Device::releaseBuffer(DeviceBuffer &buffer) {
  ledger_.release(buffer.serial_);
  releaseRaw(buffer.block_);
}

CpuDevice::~CpuDevice() {
  assert(ledger().empty() && "CpuDevice destroyed with live buffers");
}

RawBlock CpuDevice::allocateRaw(int64_t bytes, const std::string &label) {
  // Round the *allocation* up to the alignment (aligned new wants it and it
  // keeps vector loads in bounds); the accounting stays exact.
  size_t rounded = (static_cast<size_t>(bytes) + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  RawBlock block = memory_.allocate(rounded, kAlignment);
  if (!block.data)
    throw RuntimeError("CpuDevice::allocate('" + label + "'): out of memory allocating " +
                       std::to_string(bytes) + " bytes (" + std::to_string(currentBytes()) +
                       " bytes live)");
  return block;
}

}  // namespace shardc::runtime
