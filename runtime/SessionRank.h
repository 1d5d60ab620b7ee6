// One rank of a LocalSession (runtime/LocalSession.h): the device its
// storage lives on, the backend whose kernels run there, the communicator
// of each call, and what it keeps between calls (its RankState). The
// session itself does not know which device it runs on: CPU ranks come from
// cpuSessionRanks() here, ranks sharing one GPU from
// cuda::gpuSessionRanks() (runtime/cuda/CudaSession.h).
#pragma once

#include "runtime/Backend.h"
#include "runtime/Communicator.h"
#include "runtime/Device.h"
#include "runtime/Executor.h"
#include "runtime/HostMemory.h"
#include "runtime/HostTensor.h"

#include <functional>
#include <memory>

namespace shardc::runtime {

class LocalGroup;

class SessionRank {
public:
  /// Releases the state's buffers while the device still exists.
  virtual ~SessionRank();
  SessionRank(const SessionRank &) = delete;
  SessionRank &operator=(const SessionRank &) = delete;

  Device &device() { return *device_; }
  const Device &device() const { return *device_; }
  Backend &backend() { return *backend_; }
  RankState &state() { return state_; }
  const RankState &state() const { return state_; }

  /// The communicator of one call among the session's ranks (`group`).
  virtual std::unique_ptr<Communicator> communicator(LocalGroup &group) = 0;
  /// Called first on the thread that runs this rank's part of a call (each
  /// call has its own threads; a GPU rank selects its device there).
  virtual void enterThread() {}
  /// Returns memory kept for reuse to the system (CpuDevice's large blocks);
  /// nothing where the allocator keeps no cache of its own.
  virtual void trimReuseCache() {}
  /// Large-block statistics since the last trim (CpuDevice's; zero elsewhere).
  virtual HostMemory::Stats blockStats() const { return {}; }
  /// True when storage pointers are host addresses (a save writes them
  /// directly; otherwise each param is copied to the host first).
  virtual bool hostAddressable() const = 0;

  /// A host copy of `bytes` bytes of this rank's device memory at `src`
  /// (the backend's copy, waited for).
  virtual void copyToHost(void *hostDst, const void *src, size_t bytes) {
    backend_->copyToHost(hostDst, src, bytes);
  }
  /// A host tensor with the bytes of `view` (forward's outputs).
  HostTensor toHost(const TensorView &view);

protected:
  SessionRank(int64_t rank, std::unique_ptr<Device> device, std::unique_ptr<Backend> backend);

private:
  // Declared in this order so that the state's buffers go first, then the
  // backend, then the device they live on.
  std::unique_ptr<Device> device_;
  std::unique_ptr<Backend> backend_;
  RankState state_;
};

/// Makes rank `rank` of a session (called once per rank, in rank order).
using SessionRankFactory = std::function<std::unique_ptr<SessionRank>(int64_t rank)>;

/// Ranks on the CPU: a CpuDevice and the CPU backend with `threads` kernel
/// threads each, LocalCommunicator (memcpy between ranks).
SessionRankFactory cpuSessionRanks(int threads);

}  // namespace shardc::runtime
