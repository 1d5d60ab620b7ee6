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
#include <optional>
#include <string>
#include <vector>

namespace shardc::runtime {

class LocalGroup;
class PeerCopier;

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

  /// This rank's communicator in `group` (as its member `member`) for one
  /// call: the group's rendezvous, the bytes moved by copier().
  std::unique_ptr<Communicator> communicator(LocalGroup &group, int64_t member);
  /// What moves bytes between ranks' device memory: memcpy on the CPU, a
  /// device-to-device copy on the rank's stream on a GPU. A scatter within
  /// a --ranks subset (runtime/RankSubset.h) copies with it too.
  virtual PeerCopier &copier();
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

  /// Writes this rank's rows of every param of `plan` into `path` with the
  /// cooperative writer (runtime/checkpoint/CooperativeWriter.h; `subset`:
  /// the ranks run, empty = all). `hostComm` must move host memory: the
  /// writer's collectives agree on host values (name lengths, pids). Where
  /// storage is not host memory, each param is copied to the host first.
  void saveRows(const plan::Plan &plan, Communicator &hostComm, const std::string &path,
                const std::vector<int64_t> &subset = {});

  /// Where this rank's memory is, for reports ("cpu", "cuda:0 (NVIDIA
  /// H200, ...)").
  virtual std::string deviceName() const { return "cpu"; }
  /// The driver's count of device memory in use (cudaMemGetInfo: every
  /// rank and context on the device together, after the device's queue
  /// drained); nullopt where the device has no such count (the CPU: the
  /// OS's resident set is measured instead).
  virtual std::optional<int64_t> driverUsedBytes() { return std::nullopt; }

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
