// GPU memory with exact byte accounting, and the streams and cuBLAS handle
// of one CUDA device.
//
// The accounting is CpuDevice's (runtime/Device.h), unchanged: exactly the
// bytes requested, per category, current and peak, and what was live when
// the peak was first reached, so MemoryModel's prediction can be compared
// with a GPU run exactly as with a CPU run (invariant 4). cudaMalloc rounds
// allocations up to its own granularity and the context, cuBLAS workspace
// and kernel scratch take memory too; what the driver really used is
// visible through memInfo() (cudaMemGetInfo), and test/gpu reports both.
//
// One device is used by one thread (one rank); it is not thread-safe. Every
// method makes the device current on the calling thread first.
#pragma once

#include "runtime/Device.h"  // LiveAllocation, CategoryBytes
#include "runtime/Plan.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shardc::runtime::cuda {

/// The number of CUDA devices this process sees. 0 when there is none or the
/// driver is missing; `why` (optional) then receives the reason, e.g.
/// "cudaGetDeviceCount: cudaErrorNoDevice (no CUDA-capable device is detected)".
int visibleDeviceCount(std::string *why = nullptr);

/// "NVIDIA H200 (sm_90, 139.8 GiB)" for device `ordinal`.
std::string describeDevice(int ordinal);

class CudaDevice;

/// Owning handle to device memory (cudaMalloc); releases it and its
/// accounting when destroyed or on release(). Move-only; the device must
/// outlive it. data() is a device pointer.
class CudaBuffer {
public:
  CudaBuffer() = default;
  CudaBuffer(CudaBuffer &&other) noexcept;
  CudaBuffer &operator=(CudaBuffer &&other) noexcept;
  CudaBuffer(const CudaBuffer &) = delete;
  CudaBuffer &operator=(const CudaBuffer &) = delete;
  ~CudaBuffer() { release(); }

  void release();
  explicit operator bool() const { return device_ != nullptr; }
  std::byte *data() const { return data_; }
  int64_t bytes() const { return bytes_; }
  plan::Category category() const { return category_; }

private:
  friend class CudaDevice;
  CudaDevice *device_ = nullptr;
  std::byte *data_ = nullptr;
  int64_t bytes_ = 0;
  plan::Category category_ = plan::Category::Activation;
  uint64_t serial_ = 0;
};

struct MemInfo {
  int64_t freeBytes = 0, totalBytes = 0;
};

class CudaDevice {
public:
  /// Selects device `ordinal`, creates its compute stream. Throws
  /// RuntimeError when the ordinal is not visible.
  explicit CudaDevice(int ordinal = 0);
  CudaDevice(const CudaDevice &) = delete;
  CudaDevice &operator=(const CudaDevice &) = delete;
  /// Outstanding buffers must have been released (checked with an assert).
  ~CudaDevice();

  int ordinal() const { return ordinal_; }
  /// cudaSetDevice(ordinal) on the calling thread.
  void makeCurrent() const;
  /// The stream every kernel of this device runs on.
  cudaStream_t stream() const { return stream_; }
  /// Created on first use, bound to stream().
  cublasHandle_t blas();
  /// Waits for the stream; throws on an asynchronous kernel error.
  void synchronize(const std::string &what = "CudaDevice::synchronize") const;

  /// cudaMalloc'd memory (256-byte aligned), uninitialized. `bytes` may be 0
  /// (a valid, non-null pointer is still returned; 0 bytes are accounted).
  /// Throws RuntimeError naming `label` if bytes < 0 or memory runs out.
  CudaBuffer allocate(int64_t bytes, plan::Category category, const std::string &label);

  int64_t currentBytes() const { return current_; }
  int64_t currentBytes(plan::Category category) const;
  CategoryBytes currentByCategory() const { return currentByCategory_; }
  int64_t peakBytes() const { return peak_; }
  const std::vector<LiveAllocation> &liveAtPeak() const { return liveAtPeak_; }
  CategoryBytes peakByCategory() const { return peakByCategory_; }
  std::vector<LiveAllocation> live() const;
  void resetPeak();

  /// cudaMemGetInfo for this device.
  MemInfo memInfo() const;

  /// Kernel scratch (index blocks of `generate` with an index_map, error
  /// flags): at most kMaxScratchBytes, not accounted, like the CPU kernels'
  /// per-thread scratch (docs/plan.md). Valid until the next call.
  static constexpr size_t kMaxScratchBytes = size_t(1) << 20;
  void *scratch(size_t bytes);

private:
  friend class CudaBuffer;
  void releaseBuffer(CudaBuffer &buffer);

  int ordinal_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  void *scratch_ = nullptr;
  size_t scratchBytes_ = 0;

  int64_t current_ = 0;
  int64_t peak_ = 0;
  CategoryBytes currentByCategory_{};
  CategoryBytes peakByCategory_{};
  std::vector<LiveAllocation> liveAtPeak_;
  uint64_t nextSerial_ = 1;
  std::map<uint64_t, LiveAllocation> live_;
};

/// Host <-> device copies on the device's stream, waited for.
void copyToDevice(CudaDevice &device, void *deviceDst, const void *hostSrc, size_t bytes);
void copyToHost(CudaDevice &device, void *hostDst, const void *deviceSrc, size_t bytes);

}  // namespace shardc::runtime::cuda
