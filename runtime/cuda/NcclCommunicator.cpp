#include "runtime/cuda/NcclCommunicator.h"

#include "runtime/RuntimeError.h"
#include "runtime/cuda/CudaCheck.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace shardc::runtime::cuda {
namespace {

using Clock = std::chrono::steady_clock;

std::string ncclMessage(ncclResult_t status) {
  return std::string(ncclGetErrorString(status)) + " (ncclResult " +
         std::to_string(static_cast<int>(status)) + ")";
}

std::string seconds(std::chrono::duration<double> d) {
  return std::to_string(d.count()) + " s";
}

void pause() { std::this_thread::sleep_for(std::chrono::microseconds(50)); }

}  // namespace

std::vector<std::unique_ptr<NcclCommunicator>> NcclCommunicator::createLocal(
    const std::vector<int> &devices, std::chrono::duration<double> timeout) {
  if (devices.empty()) throw RuntimeError("NcclCommunicator::createLocal: no devices given");
  // Connect every peer during init: no collective can then block its caller
  // on a connection to a rank that never arrives.
  setenv("NCCL_RUNTIME_CONNECT", "0", /*overwrite=*/0);
  const int n = static_cast<int>(devices.size());
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  std::string list;
  for (int d : devices) list += (list.empty() ? "" : ", ") + std::to_string(d);
  checkNccl(ncclCommInitAll(comms.data(), n, devices.data()),
            "ncclCommInitAll(devices " + list + ")");
  auto group = std::make_shared<NcclGroupState>();
  std::vector<std::unique_ptr<NcclCommunicator>> out;
  try {
    for (int r = 0; r < n; ++r)
      out.push_back(std::unique_ptr<NcclCommunicator>(
          new NcclCommunicator(comms[r], r, n, devices[r], group, timeout)));
  } catch (...) {
    for (size_t r = out.size(); r < comms.size(); ++r) ncclCommAbort(comms[r]);
    throw;
  }
  return out;
}

ncclUniqueId NcclCommunicator::makeUniqueId() {
  ncclUniqueId id;
  checkNccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  return id;
}

std::unique_ptr<NcclCommunicator> NcclCommunicator::createFromUniqueId(
    const ncclUniqueId &id, int rank, int worldSize, int device,
    std::chrono::duration<double> timeout) {
  const std::string what = "ncclCommInitRankConfig(rank " + std::to_string(rank) + " of " +
                           std::to_string(worldSize) + ", device " + std::to_string(device) + ")";
  if (rank < 0 || rank >= worldSize) throw RuntimeError(what + ": rank out of range");
  checkCuda(cudaSetDevice(device), what + ": cudaSetDevice");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // init and every call return at once; we poll
  ncclComm_t comm = nullptr;
  ncclResult_t status = ncclCommInitRankConfig(&comm, worldSize, id, rank, &config);
  if (status != ncclSuccess && status != ncclInProgress) {
    if (comm) ncclCommAbort(comm);
    throw RuntimeError(what + ": " + ncclMessage(status));
  }
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(timeout);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(comm, &state);
    if (state == ncclSuccess) break;
    if (state != ncclInProgress) {
      ncclCommAbort(comm);
      throw RuntimeError(what + ": " + ncclMessage(state));
    }
    if (Clock::now() > deadline) {
      ncclCommAbort(comm);
      throw RuntimeError(what + ": timed out after " + seconds(timeout) +
                         " waiting for the other ranks to join (aborted)");
    }
    pause();
  }
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(
      comm, rank, worldSize, device, std::make_shared<NcclGroupState>(), timeout));
}

NcclCommunicator::NcclCommunicator(ncclComm_t comm, int rank, int worldSize, int device,
                                   std::shared_ptr<NcclGroupState> group,
                                   std::chrono::duration<double> timeout)
    : comm_(comm), rank_(rank), worldSize_(worldSize), device_(device), group_(std::move(group)),
      timeout_(timeout) {
  const std::string what = "NcclCommunicator(rank " + std::to_string(rank) + ")";
  checkCuda(cudaSetDevice(device), what + ": cudaSetDevice");
  checkCuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), what + ": cudaStreamCreate");
  checkCuda(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), what + ": cudaEventCreate");
  checkCuda(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), what + ": cudaEventCreate");
  checkCuda(cudaMalloc(&barrierScratch_, sizeof(float)), what + ": cudaMalloc");
  checkCuda(cudaMemset(barrierScratch_, 0, sizeof(float)), what + ": cudaMemset");
}

NcclCommunicator::~NcclCommunicator() {
  cudaSetDevice(device_);
  if (comm_) {
    if (group_->failed.load()) ncclCommAbort(comm_);
    else ncclCommDestroy(comm_);
  }
  if (stream_) cudaStreamSynchronize(stream_);
  if (barrierScratch_) cudaFree(barrierScratch_);
  if (ready_) cudaEventDestroy(ready_);
  if (done_) cudaEventDestroy(done_);
  if (stream_) cudaStreamDestroy(stream_);
}

void NcclCommunicator::abort(const std::string &why) {
  group_->fail("rank " + std::to_string(rank_) + ": " + why);
  if (!aborted_) {
    aborted_ = true;
    cudaSetDevice(device_);
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
    // The abort makes NCCL's kernels exit; wait for them, so that a
    // gather's buffers the caller frees next (stream-ordered on the compute
    // stream, not this one) are no longer touched. An intra-process
    // communicator's abort need not synchronize by itself.
    if (stream_) cudaStreamSynchronize(stream_);
  }
}

void NcclCommunicator::check(ncclResult_t status, const char *what, const char *call) {
  if (status == ncclSuccess || status == ncclInProgress) return;
  std::string message = std::string("nccl ") + what + " (rank " + std::to_string(rank_) + "): " +
                        call + " failed: " + ncclMessage(status) + "; communicator aborted";
  abort(message);
  throw RuntimeError(message);
}

void NcclCommunicator::begin(const char *what) {
  const std::string place = std::string("nccl ") + what + " (rank " + std::to_string(rank_) + ")";
  if (aborted_) throw RuntimeError(place + ": the communicator was aborted by an earlier error");
  if (group_->failed.load()) {
    abort("gave up: another rank failed");
    throw RuntimeError(place + ": another rank of this process failed first (" +
                       group_->error() + "); communicator aborted");
  }
  checkCuda(cudaSetDevice(device_), place + ": cudaSetDevice");
  if (computeStream_) {
    checkCuda(cudaEventRecord(ready_, computeStream_), place + ": cudaEventRecord");
    checkCuda(cudaStreamWaitEvent(stream_, ready_, 0), place + ": cudaStreamWaitEvent");
  }
}

namespace {

/// "nccl WHAT (rank R of N, cuda:D)": where a wait failed.
std::string waitPlace(const char *what, int rank, int worldSize, int device) {
  return std::string("nccl ") + what + " (rank " + std::to_string(rank) + " of " +
         std::to_string(worldSize) + ", cuda:" + std::to_string(device) + ")";
}

}  // namespace

void NcclCommunicator::enqueued(const char *what) {
  const std::string place = waitPlace(what, rank_, worldSize_, device_);
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(timeout_);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t status = ncclCommGetAsyncError(comm_, &state);
    if (status != ncclSuccess) state = status;
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) {
      std::string message = place + ": " + ncclMessage(state) + "; communicator aborted";
      abort(message);
      throw RuntimeError(message);
    }
    if (group_->failed.load()) {
      abort("gave up: another rank failed");
      throw RuntimeError(place + ": another rank of this process failed (" + group_->error() +
                         "); communicator aborted");
    }
    if (Clock::now() > deadline) {
      std::string message = place + ": timed out after " + seconds(timeout_) +
                            " enqueueing (a peer did not take part); communicator aborted";
      abort(message);
      throw RuntimeError(message);
    }
    pause();
  }
}

void NcclCommunicator::finish(const char *what) {
  const std::string place = waitPlace(what, rank_, worldSize_, device_);
  enqueued(what);
  gathersInFlight_ = false;  // the wait below covers them: one stream, in order
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(timeout_);
  auto giveUpIfNeeded = [&](const char *stage) {
    if (group_->failed.load()) {
      abort("gave up: another rank failed");
      throw RuntimeError(place + ": another rank of this process failed (" + group_->error() +
                         "); communicator aborted");
    }
    if (Clock::now() > deadline) {
      std::string message = place + ": timed out after " + seconds(timeout_) + " " + stage +
                            " (a peer did not take part); communicator aborted";
      abort(message);
      throw RuntimeError(message);
    }
  };
  // Wait for the stream, still watching for asynchronous NCCL errors.
  checkCuda(cudaEventRecord(done_, stream_), place + ": cudaEventRecord");
  for (;;) {
    cudaError_t query = cudaEventQuery(done_);
    if (query == cudaSuccess) return;
    if (query != cudaErrorNotReady) {
      std::string message = place + ": CUDA error " + cudaGetErrorName(query) + " (" +
                            cudaGetErrorString(query) + "); communicator aborted";
      abort(message);
      throw RuntimeError(message);
    }
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(comm_, &state);
    if (state != ncclSuccess && state != ncclInProgress) {
      std::string message = place + ": " + ncclMessage(state) + "; communicator aborted";
      abort(message);
      throw RuntimeError(message);
    }
    giveUpIfNeeded("waiting for the collective to complete");
    pause();
  }
}

void NcclCommunicator::allGather(const void *send, size_t bytesPerRank, void *recv) {
  begin("all_gather");
  if (bytesPerRank > 0)
    check(ncclAllGather(send, recv, bytesPerRank, ncclUint8, comm_, stream_), "all_gather",
          "ncclAllGather");
  finish("all_gather");
}

void NcclCommunicator::allGatherMany(const std::vector<AllGatherPart> &parts) {
  begin("all_gather (unit)");
  enqueueAllGatherMany(parts);
  finish("all_gather (unit)");
}

void NcclCommunicator::startAllGatherMany(const std::vector<AllGatherPart> &parts) {
  begin("all_gather (started)");
  enqueueAllGatherMany(parts);
  enqueued("all_gather (started)");
  gathersInFlight_ = true;
}

void NcclCommunicator::waitGathers() {
  if (!gathersInFlight_) return;
  if (aborted_)
    throw RuntimeError("nccl all_gather (rank " + std::to_string(rank_) +
                       "): the communicator was aborted by an earlier error");
  checkCuda(cudaSetDevice(device_), "nccl all_gather (waiting): cudaSetDevice");
  finish("all_gather (waited for)");
}

void NcclCommunicator::enqueueAllGatherMany(const std::vector<AllGatherPart> &parts) {
  check(ncclGroupStart(), "all_gather (unit)", "ncclGroupStart");
  ncclResult_t first = ncclSuccess;
  for (const AllGatherPart &part : parts) {
    if (part.bytesPerRank == 0) continue;
    ncclResult_t status =
        ncclAllGather(part.send, part.recv, part.bytesPerRank, ncclUint8, comm_, stream_);
    if (first == ncclSuccess && status != ncclInProgress) first = status;
  }
  ncclResult_t end = ncclGroupEnd();  // always close the group
  check(first, "all_gather (unit)", "ncclAllGather");
  check(end, "all_gather (unit)", "ncclGroupEnd");
}

void NcclCommunicator::scatter(int64_t root, const void *send, size_t bytesPerRank, void *recv) {
  scatterFrom(root, send, static_cast<size_t>(worldSize_) * bytesPerRank, bytesPerRank, 0,
              bytesPerRank, recv, "scatter");
}

void NcclCommunicator::scatterRows(int64_t root, const void *send, size_t sendBytes,
                                   size_t bytesPerRank, size_t offset, size_t windowBytes,
                                   void *recv) {
  scatterFrom(root, send, sendBytes, bytesPerRank, offset, windowBytes, recv, "scatter_rows");
}

void NcclCommunicator::scatterFrom(int64_t root, const void *send, size_t sendBytes,
                                   size_t bytesPerRank, size_t offset, size_t windowBytes,
                                   void *recv, const char *what) {
  if (root < 0 || root >= worldSize_)
    throw RuntimeError("nccl " + std::string(what) + " (rank " + std::to_string(rank_) +
                       "): root " + std::to_string(root) + " out of range for world size " +
                       std::to_string(worldSize_));
  if (offset + windowBytes > bytesPerRank)
    throw RuntimeError("nccl " + std::string(what) + " (rank " + std::to_string(rank_) +
                       "): window " + std::to_string(offset) + " + " + std::to_string(windowBytes) +
                       " lies outside a part of " + std::to_string(bytesPerRank) + " bytes");
  // Rank r's bytes: the window [offset, offset + windowBytes) of its part
  // [r * bytesPerRank, (r + 1) * bytesPerRank), below sendBytes (a full
  // gradient is not padded to the ranks' chunks).
  auto partBegin = [&](int64_t r) -> size_t {
    return std::min(sendBytes, static_cast<size_t>(r) * bytesPerRank + offset);
  };
  auto partBytes = [&](int64_t r) -> size_t {
    return std::min(windowBytes, sendBytes - partBegin(r));
  };
  begin(what);
  if (windowBytes > 0 && sendBytes > 0) {
    const auto *bytes = static_cast<const std::byte *>(send);
    if (rank_ == root && partBytes(root) > 0)
      checkCuda(cudaMemcpyAsync(recv, bytes + partBegin(root), partBytes(root),
                                cudaMemcpyDeviceToDevice, stream_),
                "nccl " + std::string(what) + " (rank " + std::to_string(rank_) +
                    "): root's own part");
    check(ncclGroupStart(), what, "ncclGroupStart");
    ncclResult_t first = ncclSuccess;
    if (rank_ == root) {
      for (int r = 0; r < worldSize_; ++r) {
        if (r == root || partBytes(r) == 0) continue;
        ncclResult_t status =
            ncclSend(bytes + partBegin(r), partBytes(r), ncclUint8, r, comm_, stream_);
        if (first == ncclSuccess && status != ncclInProgress) first = status;
      }
    } else if (partBytes(rank_) > 0) {
      first = ncclRecv(recv, partBytes(rank_), ncclUint8, static_cast<int>(root), comm_, stream_);
      if (first == ncclInProgress) first = ncclSuccess;
    }
    ncclResult_t end = ncclGroupEnd();
    check(first, what, rank_ == root ? "ncclSend" : "ncclRecv");
    check(end, what, "ncclGroupEnd");
  }
  finish(what);
}

void NcclCommunicator::barrier() {
  begin("barrier");
  check(ncclAllReduce(barrierScratch_, barrierScratch_, 1, ncclFloat, ncclSum, comm_, stream_),
        "barrier", "ncclAllReduce");
  finish("barrier");
}

}  // namespace shardc::runtime::cuda
