// Several ranks on one GPU: the `local` backend's rendezvous (LocalGroup,
// runtime/LocalCommunicator.h) with the bytes moved by cudaMemcpyAsync on
// each rank's own stream. NCCL refuses two ranks on one device ("Duplicate
// GPU detected"), so N > 1 ranks sharing a GPU (the seed case and the
// examples at N = 2..8 on one H200) use this; NCCL stays the communicator
// for one GPU per rank.
//
// Ordering: CudaBackend::beforeCollective synchronizes the rank's compute
// stream before it enters a collective, so every peer's send bytes are
// complete at the first rendezvous; each rank enqueues its own copies
// (device to device, peers' pointers are valid: one process, one device)
// on its stream and waits for them before the completion rendezvous, after
// which peers may free or overwrite their buffers. Each rank's CudaDevice
// keeps its own exact ledger.
#pragma once

#include "runtime/LocalCommunicator.h"
#include "runtime/cuda/CudaDevice.h"

namespace shardc::runtime::cuda {

/// A PeerCopier on `device`'s stream.
class StreamCopier final : public PeerCopier {
public:
  explicit StreamCopier(CudaDevice &device) : device_(device) {}
  void copy(void *dst, const void *src, size_t bytes) override;
  void flush() override;

private:
  CudaDevice &device_;
};

class DeviceLocalCommunicator final : public Communicator {
public:
  /// Rank `rank` of `group`; its copies run on `device` (which the rank's
  /// backend also runs on). Both must outlive this.
  DeviceLocalCommunicator(LocalGroup &group, int64_t rank, CudaDevice &device)
      : copier_(device), comm_(group, rank, copier_) {}

  int64_t rank() const override { return comm_.rank(); }
  int64_t worldSize() const override { return comm_.worldSize(); }
  void allGather(const void *send, size_t bytesPerRank, void *recv) override {
    comm_.allGather(send, bytesPerRank, recv);
  }
  void allGatherMany(const std::vector<AllGatherPart> &parts) override {
    comm_.allGatherMany(parts);
  }
  void scatter(int64_t root, const void *send, size_t bytesPerRank, void *recv) override {
    comm_.scatter(root, send, bytesPerRank, recv);
  }
  void barrier() override { comm_.barrier(); }
  std::chrono::duration<double> timeout() const override { return comm_.timeout(); }
  void setTimeout(std::chrono::duration<double> timeout) override { comm_.setTimeout(timeout); }

private:
  StreamCopier copier_;
  LocalCommunicator comm_;
};

}  // namespace shardc::runtime::cuda
