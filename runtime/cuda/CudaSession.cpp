#include "runtime/cuda/CudaSession.h"

#include "runtime/RuntimeError.h"
#include "runtime/cuda/CudaExecutor.h"
#include "runtime/cuda/DeviceLocalCommunicator.h"

#include <algorithm>
#include <thread>

namespace shardc::runtime::cuda {

namespace {

class GpuSessionRank final : public SessionRank {
public:
  static std::unique_ptr<SessionRank> make(int64_t rank, int ordinal, int hostThreads) {
    auto device = std::make_unique<CudaDevice>(ordinal);
    auto backend = std::make_unique<CudaBackend>(*device, hostThreads);
    return std::unique_ptr<SessionRank>(
        new GpuSessionRank(rank, std::move(device), std::move(backend)));
  }
  /// Peers' buffers are on the same device: cudaMemcpyAsync on this
  /// rank's stream (runtime/cuda/DeviceLocalCommunicator.h).
  PeerCopier &copier() override { return copier_; }
  /// cudaSetDevice is per thread, and each call runs on fresh threads.
  void enterThread() override { gpu_.makeCurrent(); }
  bool hostAddressable() const override { return false; }
  std::string deviceName() const override {
    return "cuda:" + std::to_string(gpu_.ordinal()) + " (" + describeDevice(gpu_.ordinal()) + ")";
  }
  std::optional<int64_t> driverUsedBytes() override {
    gpu_.synchronize();
    const MemInfo info = gpu_.memInfo();
    return info.totalBytes - info.freeBytes;
  }

private:
  GpuSessionRank(int64_t rank, std::unique_ptr<CudaDevice> device,
                 std::unique_ptr<CudaBackend> backend)
      : SessionRank(rank, std::move(device), std::move(backend)),
        gpu_(static_cast<CudaDevice &>(this->device())), copier_(gpu_) {}

  CudaDevice &gpu_;
  StreamCopier copier_;
};

}  // namespace

SessionRankFactory gpuSessionRanks(int ordinal, int hostThreads) {
  std::string why;
  const int visible = visibleDeviceCount(&why);
  if (visible == 0) throw RuntimeError("no CUDA device visible (" + why + ")");
  if (ordinal < 0 || ordinal >= visible)
    throw RuntimeError("CUDA device " + std::to_string(ordinal) + " does not exist (" +
                       std::to_string(visible) + " visible)");
  if (hostThreads < 0)
    throw RuntimeError("host threads must be >= 0, got " + std::to_string(hostThreads));
  if (hostThreads == 0)
    hostThreads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return [ordinal, hostThreads](int64_t rank) {
    return GpuSessionRank::make(rank, ordinal, hostThreads);
  };
}

}  // namespace shardc::runtime::cuda
