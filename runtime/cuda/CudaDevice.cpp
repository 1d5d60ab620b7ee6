#include "runtime/cuda/CudaDevice.h"

#include "runtime/cuda/CudaCheck.h"

#include <algorithm>
#include <cassert>
#include <cstdio>

namespace shardc::runtime::cuda {
using plan::Category;

int visibleDeviceCount(std::string *why) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    if (why)
      *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(status) + " (" +
             cudaGetErrorString(status) + ")";
    return 0;
  }
  if (count == 0 && why) *why = "cudaGetDeviceCount: 0 devices";
  return count;
}

std::string describeDevice(int ordinal) {
  cudaDeviceProp prop{};
  checkCuda(cudaGetDeviceProperties(&prop, ordinal),
            "cudaGetDeviceProperties(" + std::to_string(ordinal) + ")");
  char text[512];
  std::snprintf(text, sizeof text, "%s (sm_%d%d, %.1f GiB)", prop.name, prop.major, prop.minor,
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

CudaDevice::CudaDevice(int ordinal) : ordinal_(ordinal) {
  std::string why;
  int count = visibleDeviceCount(&why);
  if (ordinal < 0 || ordinal >= count)
    throw RuntimeError("CudaDevice(" + std::to_string(ordinal) + "): " +
                       (count == 0 ? why : "only " + std::to_string(count) + " devices visible"));
  makeCurrent();
  checkCuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
            "CudaDevice(" + std::to_string(ordinal) + "): cudaStreamCreate");
  // The pool keeps what is freed (as torch's caching allocator does). Its
  // default threshold, 0, hands every free block back to the driver at
  // each synchronize, and the next cudaMallocAsync maps it again: a cost
  // on every forward that syncs. memInfo() trims it before reading.
  cudaMemPool_t pool = nullptr;
  checkCuda(cudaDeviceGetDefaultMemPool(&pool, ordinal),
            "CudaDevice(" + std::to_string(ordinal) + "): cudaDeviceGetDefaultMemPool");
  uint64_t keep = UINT64_MAX;
  checkCuda(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
            "CudaDevice(" + std::to_string(ordinal) + "): cudaMemPoolSetAttribute");
}

CudaDevice::~CudaDevice() {
  assert(ledger().empty() && "CudaDevice destroyed with live buffers");
  cudaSetDevice(ordinal_);
  if (stream_) cudaStreamSynchronize(stream_);
  if (blas_) cublasDestroy(blas_);
  if (scratch_) cudaFree(scratch_);
  if (stagedDevice_) cudaFree(stagedDevice_);
  if (stagedHost_) cudaFreeHost(stagedHost_);
  for (cudaEvent_t event : slotFree_)
    if (event) cudaEventDestroy(event);
  if (stream_) cudaStreamDestroy(stream_);
}

void CudaDevice::makeCurrent() const {
  checkCuda(cudaSetDevice(ordinal_), "cudaSetDevice(" + std::to_string(ordinal_) + ")");
}

cublasHandle_t CudaDevice::blas() {
  if (!blas_) {
    makeCurrent();
    checkCublas(cublasCreate(&blas_), "cublasCreate");
    checkCublas(cublasSetStream(blas_, stream_), "cublasSetStream");
  }
  return blas_;
}

void CudaDevice::synchronize(const std::string &what) const {
  checkCuda(cudaStreamSynchronize(stream_), what);
  throwReleaseError(what);
}

RawBlock CudaDevice::allocateRaw(int64_t bytes, const std::string &label) {
  throwReleaseError("CudaDevice::allocate('" + label + "')");
  makeCurrent();
  void *memory = nullptr;
  // Stream-ordered (the device's memory pool): usable by work enqueued on
  // the stream from now on, no device-wide synchronization.
  const size_t request = bytes == 0 ? 1 : static_cast<size_t>(bytes);
  cudaError_t status = cudaMallocAsync(&memory, request, stream_);
  if (status == cudaErrorMemoryAllocation) {
    // Blocks the pool keeps (freed on other streams, or not reusable here)
    // may be what is missing: wait for the device, give them back, retry.
    cudaGetLastError();
    cudaMemPool_t pool = nullptr;
    if (cudaDeviceSynchronize() == cudaSuccess &&
        cudaDeviceGetDefaultMemPool(&pool, ordinal_) == cudaSuccess &&
        cudaMemPoolTrimTo(pool, 0) == cudaSuccess)
      status = cudaMallocAsync(&memory, request, stream_);
  }
  if (status != cudaSuccess) {
    cudaGetLastError();
    size_t freeBytes = 0, totalBytes = 0;
    if (cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess) freeBytes = 0;
    throw RuntimeError("CudaDevice::allocate('" + label + "') on cuda:" +
                       std::to_string(ordinal_) + ": " + cudaGetErrorName(status) +
                       " allocating " + std::to_string(bytes) + " bytes (" +
                       std::to_string(currentBytes()) + " bytes live, " +
                       std::to_string(freeBytes) + " free on the device)");
  }
  RawBlock block;
  block.data = memory;
  block.capacity = block.used = static_cast<size_t>(bytes);
  return block;
}

void CudaDevice::releaseRaw(const RawBlock &block) noexcept {
  // Stream-ordered: the memory returns to the pool once the work enqueued on
  // the stream before this point (which may still read it) has finished;
  // the host does not wait (cudaFree would synchronize the whole device).
  // Work on other streams (NCCL's, peers' copies) has been waited for by
  // the collective that enqueued it. Errors cannot be thrown from here
  // (noexcept, the ledger's release path): the first one is kept and
  // thrown by the next synchronize() or allocate().
  cudaError_t status = cudaSetDevice(ordinal_);
  if (status == cudaSuccess) status = cudaFreeAsync(block.data, stream_);
  if (status != cudaSuccess && releaseError_.empty())
    releaseError_ = std::string("cudaFreeAsync: CUDA error ") + cudaGetErrorName(status) + " (" +
                    cudaGetErrorString(status) + ")";
}

void CudaDevice::throwReleaseError(const std::string &what) const {
  if (!releaseError_.empty())
    throw RuntimeError(what + " on cuda:" + std::to_string(ordinal_) +
                       ": an earlier buffer release failed: " + releaseError_);
}

MemInfo CudaDevice::memInfo() const {
  makeCurrent();
  // The driver's count of live memory: every stream's frees done (all ranks
  // on this device share the pool) and the pool's kept blocks returned.
  checkCuda(cudaDeviceSynchronize(), "CudaDevice::memInfo: cudaDeviceSynchronize");
  cudaMemPool_t pool = nullptr;
  checkCuda(cudaDeviceGetDefaultMemPool(&pool, ordinal_), "CudaDevice::memInfo: default pool");
  checkCuda(cudaMemPoolTrimTo(pool, 0), "CudaDevice::memInfo: cudaMemPoolTrimTo");
  size_t freeBytes = 0, totalBytes = 0;
  checkCuda(cudaMemGetInfo(&freeBytes, &totalBytes), "cudaMemGetInfo");
  return {static_cast<int64_t>(freeBytes), static_cast<int64_t>(totalBytes)};
}

void *CudaDevice::scratch(size_t bytes) {
  if (bytes > kMaxScratchBytes)
    throw RuntimeError("CudaDevice::scratch: " + std::to_string(bytes) + " bytes requested, at most " +
                       std::to_string(kMaxScratchBytes));
  if (bytes > scratchBytes_) {
    makeCurrent();
    synchronize("CudaDevice::scratch");
    if (scratch_) cudaFree(scratch_);
    scratch_ = nullptr;
    scratchBytes_ = 0;
    checkCuda(cudaMalloc(&scratch_, kMaxScratchBytes), "CudaDevice::scratch: cudaMalloc");
    scratchBytes_ = kMaxScratchBytes;
  }
  return scratch_;
}

const int64_t *CudaDevice::stageIndices(const int64_t *hostIndices, int64_t count) {
  if (count < 0 || count > kIndexBlockElements)
    throw RuntimeError("CudaDevice::stageIndices: " + std::to_string(count) +
                       " indices, at most " + std::to_string(kIndexBlockElements) + " per block");
  makeCurrent();
  const size_t slotBytes = kIndexBlockElements * sizeof(int64_t);
  if (!stagedHost_) {
    checkCuda(cudaMallocHost(&stagedHost_, slotBytes * kIndexSlots), "stageIndices: cudaMallocHost");
    checkCuda(cudaMalloc(&stagedDevice_, slotBytes * kIndexSlots), "stageIndices: cudaMalloc");
    for (cudaEvent_t &event : slotFree_)
      checkCuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "stageIndices: cudaEventCreate");
  }
  // The previous slot's kernel has been enqueued by now: mark where it ends.
  const int previous = (nextSlot_ + kIndexSlots - 1) % kIndexSlots;
  if (slotUsed_[previous])
    checkCuda(cudaEventRecord(slotFree_[previous], stream_), "stageIndices: cudaEventRecord");
  const int slot = nextSlot_;
  nextSlot_ = (nextSlot_ + 1) % kIndexSlots;
  // This slot's last copy and kernel (kIndexSlots blocks ago) must be done
  // before its pinned and device memory are overwritten.
  if (slotUsed_[slot])
    checkCuda(cudaEventSynchronize(slotFree_[slot]), "stageIndices: cudaEventSynchronize");
  slotUsed_[slot] = true;
  int64_t *host = stagedHost_ + slot * kIndexBlockElements;
  int64_t *device = stagedDevice_ + slot * kIndexBlockElements;
  std::copy(hostIndices, hostIndices + count, host);
  if (count > 0)
    checkCuda(cudaMemcpyAsync(device, host, static_cast<size_t>(count) * sizeof(int64_t),
                              cudaMemcpyHostToDevice, stream_),
              "stageIndices: cudaMemcpyAsync");
  return device;
}

void copyToDevice(CudaDevice &device, void *deviceDst, const void *hostSrc, size_t bytes) {
  if (bytes == 0) return;
  device.makeCurrent();
  checkCuda(cudaMemcpyAsync(deviceDst, hostSrc, bytes, cudaMemcpyHostToDevice, device.stream()),
            "cudaMemcpy host to device");
  device.synchronize("cudaMemcpy host to device");
}

void copyToHost(CudaDevice &device, void *hostDst, const void *deviceSrc, size_t bytes) {
  if (bytes == 0) return;
  device.makeCurrent();
  checkCuda(cudaMemcpyAsync(hostDst, deviceSrc, bytes, cudaMemcpyDeviceToHost, device.stream()),
            "cudaMemcpy device to host");
  device.synchronize("cudaMemcpy device to host");
}

}  // namespace shardc::runtime::cuda
