// Collectives between GPUs through NCCL.
//
// One process driving all local GPUs: createLocal() makes one communicator
// per device with ncclCommInitAll; rank r's communicator is then used by one
// thread (the rank's), as Communicator requires. One process per GPU (MPI
// launch): createFromUniqueId() with an ncclUniqueId that rank 0 made
// (makeUniqueId) and sent to every rank (e.g. MPI_Bcast of its bytes).
//
// Pointers given to the collectives are device pointers on the rank's GPU.
// A collective is enqueued on the communicator's own stream after the work
// already enqueued on the compute stream (setComputeStream: an event makes
// the communication stream wait), and the call returns when it has
// completed, so callers see the same synchronous semantics as the CPU
// backends; except startAllGatherMany (defersGathers()), which returns once
// NCCL has the gather and leaves it running on the communication stream
// while the caller enqueues compute: waitGathers() (or any later
// collective) waits for it, under the same rules.
//
// Never a hang: while waiting, the rank polls the stream, ncclCommGetAsyncError
// and the group's shared failure flag. On an NCCL error, on the timeout, or
// when another rank of the same process has failed, it calls ncclCommAbort
// and throws RuntimeError naming the collective, the rank and the reason.
// After that the communicator is unusable (every call throws).
#pragma once

#include "runtime/Communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace shardc::runtime::cuda {

/// Shared by the ranks of one process: the first failure is recorded here
/// and every other rank gives up its wait instead of timing out.
struct NcclGroupState {
  std::atomic<bool> failed{false};
  std::mutex mutex;
  std::string firstError;  // guarded by mutex; the first failure's message

  void fail(const std::string &why) {
    {
      std::lock_guard lock(mutex);
      if (firstError.empty()) firstError = why;
    }
    failed.store(true);
  }
  std::string error() {
    std::lock_guard lock(mutex);
    return firstError;
  }
};

class NcclCommunicator final : public Communicator {
public:
  /// One communicator per device, rank r on devices[r] (ncclCommInitAll).
  /// Sets NCCL_RUNTIME_CONNECT=0 unless the environment sets it: all
  /// connections are made here, so no later collective can block its caller
  /// waiting for a peer's connection.
  static std::vector<std::unique_ptr<NcclCommunicator>> createLocal(
      const std::vector<int> &devices,
      std::chrono::duration<double> timeout = std::chrono::seconds(300));

  /// For one process per GPU: rank 0 calls makeUniqueId() and broadcasts the
  /// bytes; every rank then calls createFromUniqueId (ncclCommInitRankConfig,
  /// non-blocking, so a missing peer is a timeout, not a hang).
  static ncclUniqueId makeUniqueId();
  static std::unique_ptr<NcclCommunicator> createFromUniqueId(
      const ncclUniqueId &id, int rank, int worldSize, int device,
      std::chrono::duration<double> timeout = std::chrono::seconds(300));

  ~NcclCommunicator() override;

  int64_t rank() const override { return rank_; }
  int64_t worldSize() const override { return worldSize_; }
  int device() const { return device_; }

  void allGather(const void *send, size_t bytesPerRank, void *recv) override;
  /// One ncclGroupStart/End around one ncclAllGather per part.
  void allGatherMany(const std::vector<AllGatherPart> &parts) override;
  /// Gathers overlap compute: startAllGatherMany enqueues (as
  /// allGatherMany) and returns; waitGathers waits for the stream.
  bool defersGathers() const override { return true; }
  void startAllGatherMany(const std::vector<AllGatherPart> &parts) override;
  void waitGathers() override;
  /// ncclSend/ncclRecv in one group; root copies its own part locally.
  void scatter(int64_t root, const void *send, size_t bytesPerRank, void *recv) override;
  void scatterRows(int64_t root, const void *send, size_t sendBytes, size_t bytesPerRank,
                   size_t offset, size_t windowBytes, void *recv) override;
  /// A one-element all-reduce, waited for.
  void barrier() override;

  std::chrono::duration<double> timeout() const override { return timeout_; }
  void setTimeout(std::chrono::duration<double> timeout) override { timeout_ = timeout; }

  /// Collectives wait for the work enqueued on `stream` first (default: the
  /// legacy default stream's ordering is not relied on; pass the device's
  /// compute stream).
  void setComputeStream(cudaStream_t stream) { computeStream_ = stream; }
  cudaStream_t stream() const { return stream_; }

  /// ncclCommAbort now (idempotent); later calls throw.
  void abort(const std::string &why);
  bool aborted() const { return aborted_; }

private:
  NcclCommunicator(ncclComm_t comm, int rank, int worldSize, int device,
                   std::shared_ptr<NcclGroupState> group, std::chrono::duration<double> timeout);
  /// scatter and scatterRows: root's send holds sendBytes bytes; each rank
  /// receives the window [offset, offset + windowBytes) of its part.
  void scatterFrom(int64_t root, const void *send, size_t sendBytes, size_t bytesPerRank,
                   size_t offset, size_t windowBytes, void *recv, const char *what);
  void begin(const char *what);
  /// Waits until NCCL has enqueued the operation (a non-blocking
  /// communicator may still be doing so), watching for errors.
  void enqueued(const char *what);
  /// Waits for everything enqueued on stream_ (gathers left in flight
  /// included) with the timeout/abort rules.
  void finish(const char *what);
  void enqueueAllGatherMany(const std::vector<AllGatherPart> &parts);
  void check(ncclResult_t status, const char *what, const char *call);

  ncclComm_t comm_ = nullptr;
  int rank_ = 0, worldSize_ = 1, device_ = 0;
  std::shared_ptr<NcclGroupState> group_;
  std::chrono::duration<double> timeout_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t computeStream_ = nullptr;
  cudaEvent_t ready_ = nullptr, done_ = nullptr;
  void *barrierScratch_ = nullptr;
  bool aborted_ = false;
  bool gathersInFlight_ = false;
};

}  // namespace shardc::runtime::cuda
