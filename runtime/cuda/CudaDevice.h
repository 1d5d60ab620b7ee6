// GPU memory with exact byte accounting, and the streams and cuBLAS handle
// of one CUDA device.
//
// The accounting is the shared Device's MemoryLedger (runtime/Device.h),
// the one CpuDevice and MemoryModel use: exactly the bytes requested, per
// category, current and peak, and what was live when the peak was first
// reached, so MemoryModel's prediction compares with a GPU run exactly as
// with a CPU run (invariant 4). cudaMalloc rounds
// allocations up to its own granularity and the context, cuBLAS workspace
// and kernel scratch take memory too; what the driver really used is
// visible through memInfo() (cudaMemGetInfo), and test/gpu reports both.
//
// One device is used by one thread (one rank); it is not thread-safe. Every
// method makes the device current on the calling thread first.
#pragma once

#include "runtime/Device.h"
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

/// Device memory handles are the shared DeviceBuffer (runtime/Device.h);
/// data() is a device pointer.
using CudaBuffer = DeviceBuffer;

struct MemInfo {
  int64_t freeBytes = 0, totalBytes = 0;
};

class CudaDevice final : public Device {
public:
  /// Selects device `ordinal`, creates its compute stream. Throws
  /// RuntimeError when the ordinal is not visible.
  explicit CudaDevice(int ordinal = 0);
  CudaDevice(const CudaDevice &) = delete;
  CudaDevice &operator=(const CudaDevice &) = delete;
  /// Outstanding buffers must have been released (checked with an assert).
  ~CudaDevice() override;

  int ordinal() const { return ordinal_; }
  /// cudaSetDevice(ordinal) on the calling thread.
  void makeCurrent() const;
  /// The stream every kernel of this device runs on.
  cudaStream_t stream() const { return stream_; }
  /// Created on first use, bound to stream().
  cublasHandle_t blas();
  /// Waits for the stream; throws on an asynchronous kernel error and on a
  /// failed buffer release (releases cannot throw where they happen).
  void synchronize(const std::string &what = "CudaDevice::synchronize") const;

  // allocate() and the accounting are Device's; memory comes from the
  // device's stream-ordered pool (cudaMallocAsync / cudaFreeAsync on
  // stream(): a release does not synchronize the device), 256-byte aligned,
  // uninitialized. The ledger counts the bytes requested, exactly.

  /// cudaMemGetInfo for this device, after waiting for the whole device
  /// and trimming its memory pool (which otherwise keeps freed blocks): the
  /// driver's count of what is live.
  MemInfo memInfo() const;

  /// Kernel scratch (index blocks of `generate` with an index_map, error
  /// flags): at most kMaxScratchBytes, not accounted, like the CPU kernels'
  /// per-thread scratch (docs/plan.md). Valid until the next call.
  static constexpr size_t kMaxScratchBytes = size_t(1) << 20;
  void *scratch(size_t bytes);

  /// Index staging for `generate` through an index_map (the executor core
  /// maps blocks of at most kIndexBlockElements source indices on the host):
  /// copies `count` indices into the next of kIndexSlots device slots through
  /// pinned memory, asynchronously on stream(), and returns the slot. It stays
  /// valid for work enqueued on the stream before kIndexSlots further calls;
  /// the host waits only when the device is that many blocks behind. Not
  /// accounted (kernel scratch, like scratch()).
  static constexpr int64_t kIndexBlockElements = 4096;
  static constexpr int kIndexSlots = 4;
  const int64_t *stageIndices(const int64_t *hostIndices, int64_t count);

protected:
  const char *kindName() const override { return "CudaDevice"; }
  RawBlock allocateRaw(int64_t bytes, const std::string &label) override;
  void releaseRaw(const RawBlock &block) noexcept override;

private:
  void throwReleaseError(const std::string &what) const;

  int ordinal_ = 0;
  std::string releaseError_;  // the first failed cudaFreeAsync
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  void *scratch_ = nullptr;
  size_t scratchBytes_ = 0;
  int64_t *stagedHost_ = nullptr;    // pinned, kIndexSlots blocks
  int64_t *stagedDevice_ = nullptr;  // kIndexSlots blocks
  cudaEvent_t slotFree_[kIndexSlots] = {};
  bool slotUsed_[kIndexSlots] = {};
  int nextSlot_ = 0;
};

/// Host <-> device copies on the device's stream, waited for.
void copyToDevice(CudaDevice &device, void *deviceDst, const void *hostSrc, size_t bytes);
void copyToHost(CudaDevice &device, void *hostDst, const void *deviceSrc, size_t bytes);

}  // namespace shardc::runtime::cuda
