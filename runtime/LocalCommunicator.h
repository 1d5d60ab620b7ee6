// The `local` backend: ranks are threads of one process sharing a LocalGroup.
#pragma once

#include "runtime/Communicator.h"

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace shardc::runtime {

/// How a rank moves bytes during a collective: memcpy for threads sharing
/// host memory (hostCopier), or a device copy on the rank's stream
/// (cuda::DeviceLocalCommunicator: several ranks on one GPU). copy() may
/// return before the bytes moved; flush() waits for every copy this rank
/// enqueued. The group calls flush() before the completion rendezvous, after
/// which peers may reuse or free their buffers. A throwing copy or flush
/// aborts the group (no peer waits for a rank that left).
class PeerCopier {
public:
  virtual ~PeerCopier() = default;
  virtual void copy(void *dst, const void *src, size_t bytes) = 0;
  virtual void flush() {}
};

/// std::memcpy, nothing to flush.
PeerCopier &hostCopier();

/// Rendezvous state shared by the ranks. Each collective is a numbered
/// generation, so calls can repeat. Once aborted (a rank failed or timed out),
/// every waiting and every later call throws instead of hanging.
class LocalGroup {
public:
  explicit LocalGroup(int64_t worldSize,
                      std::chrono::duration<double> timeout = std::chrono::seconds(60));

  int64_t worldSize() const { return worldSize_; }
  std::chrono::duration<double> timeout() const;
  void setTimeout(std::chrono::duration<double> timeout);

  /// Wakes every waiting rank with RuntimeError("... aborted: <reason>").
  /// The first reason wins; later calls are ignored.
  void abort(const std::string &reason);
  bool aborted() const;

  // Each rank moves its own bytes with `copier` between two rendezvous.
  void allGather(int64_t rank, const void *send, size_t bytesPerRank, void *recv,
                 PeerCopier &copier = hostCopier());
  /// One rendezvous for all parts; each rank copies every rank's part
  /// straight from its send buffer into its own recv (no staging).
  void allGatherMany(int64_t rank, const std::vector<AllGatherPart> &parts,
                     PeerCopier &copier = hostCopier());
  /// No staging: each rank copies its own part straight out of root's `send`
  /// between two rendezvous, so root's buffer is read in place.
  void scatter(int64_t rank, int64_t root, const void *send, size_t bytesPerRank, void *recv,
               PeerCopier &copier = hostCopier());
  /// scatter() from a root holding only `sendBytes` bytes, one window of
  /// each part (Communicator::scatterRows); all ranks must pass the same
  /// sendBytes and window.
  void scatterRows(int64_t rank, int64_t root, const void *send, size_t sendBytes,
                   size_t bytesPerRank, size_t offset, size_t windowBytes, void *recv,
                   PeerCopier &copier = hostCopier());
  void barrier(int64_t rank);

private:
  /// scatter and scatterRows: root's send holds sendBytes bytes; each rank
  /// receives [offset, offset + windowBytes) of its part. `what` and
  /// `whatCompleted` are string literals (peers read them in errors).
  void scatterFrom(int64_t rank, int64_t root, const void *send, size_t sendBytes,
                   size_t bytesPerRank, size_t offset, size_t windowBytes, void *recv,
                   PeerCopier &copier, const char *what, const char *whatCompleted);
  /// Waits until all ranks arrived at the same collective `what`.
  void rendezvous(std::unique_lock<std::mutex> &lock, int64_t rank, const char *what);
  [[noreturn]] void throwAborted(int64_t rank, const char *what) const;
  /// Runs this rank's copies (unlocked) and flushes them; an exception
  /// aborts the group before it propagates. In an aborted group it copies
  /// nothing.
  void copyPhase(std::unique_lock<std::mutex> &lock, int64_t rank, const char *what,
                 PeerCopier &copier, const std::function<void()> &copies);
  /// The rendezvous after the copies. Whoever leaves a collective by an
  /// exception (here or in copyPhase) first waits until no rank is still
  /// copying: peers read this rank's send buffer in place, which its return
  /// frees (a stack buffer, a released device buffer).
  void completion(std::unique_lock<std::mutex> &lock, int64_t rank, const char *what);
  void waitForCopiers(std::unique_lock<std::mutex> &lock);

  const int64_t worldSize_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::chrono::duration<double> timeout_;
  uint64_t generation_ = 0;
  int64_t copying_ = 0;  // ranks inside a copy phase now
  int64_t arrivedCount_ = 0;
  std::vector<bool> arrived_;
  std::vector<const char *> arrivedAt_;  // which collective each rank is in
  std::vector<const void *> send_;
  std::vector<size_t> sendBytes_;
  std::vector<int64_t> root_;  // the root each rank named (scatter)
  std::vector<size_t> rootBytes_;  // the root's valid bytes each rank named (scatterRows)
  std::vector<std::pair<size_t, size_t>> window_;          // offset and bytes each rank named
  std::vector<const std::vector<AllGatherPart> *> parts_;  // allGatherMany
  std::optional<std::string> abortReason_;
};

class LocalCommunicator final : public Communicator {
public:
  /// `copier` moves the bytes (hostCopier: memcpy); it must outlive this.
  LocalCommunicator(LocalGroup &group, int64_t rank, PeerCopier &copier = hostCopier());

  int64_t rank() const override { return rank_; }
  int64_t worldSize() const override { return group_.worldSize(); }
  void allGather(const void *send, size_t bytesPerRank, void *recv) override;
  void allGatherMany(const std::vector<AllGatherPart> &parts) override;
  void scatter(int64_t root, const void *send, size_t bytesPerRank, void *recv) override;
  void scatterRows(int64_t root, const void *send, size_t sendBytes, size_t bytesPerRank,
                   size_t offset, size_t windowBytes, void *recv) override;
  void barrier() override;
  std::chrono::duration<double> timeout() const override { return group_.timeout(); }
  void setTimeout(std::chrono::duration<double> timeout) override {
    group_.setTimeout(timeout);
  }

private:
  LocalGroup &group_;
  int64_t rank_;
  PeerCopier &copier_;
};

}  // namespace shardc::runtime
