#include "runtime/LocalCommunicator.h"

#include "runtime/RuntimeError.h"

#include <algorithm>
#include <cstring>
#include <sstream>

namespace shardc::runtime {

namespace {
class HostCopier final : public PeerCopier {
public:
  void copy(void *dst, const void *src, size_t bytes) override { std::memcpy(dst, src, bytes); }
};
}  // namespace

PeerCopier &hostCopier() {
  static HostCopier copier;
  return copier;
}

LocalGroup::LocalGroup(int64_t worldSize, std::chrono::duration<double> timeout)
    : worldSize_(worldSize), timeout_(timeout) {
  if (worldSize < 1)
    throw RuntimeError("LocalGroup: world size must be >= 1, got " +
                       std::to_string(worldSize));
  arrived_.assign(worldSize, false);
  arrivedAt_.assign(worldSize, nullptr);
  send_.assign(worldSize, nullptr);
  sendBytes_.assign(worldSize, 0);
  root_.assign(worldSize, 0);
  rootBytes_.assign(worldSize, 0);
  window_.assign(worldSize, {0, 0});
  parts_.assign(worldSize, nullptr);
}

std::chrono::duration<double> LocalGroup::timeout() const {
  std::lock_guard lock(mutex_);
  return timeout_;
}

void LocalGroup::setTimeout(std::chrono::duration<double> timeout) {
  std::lock_guard lock(mutex_);
  timeout_ = timeout;
}

void LocalGroup::abort(const std::string &reason) {
  {
    std::lock_guard lock(mutex_);
    if (!abortReason_) abortReason_ = reason;
  }
  cv_.notify_all();
}

bool LocalGroup::aborted() const {
  std::lock_guard lock(mutex_);
  return abortReason_.has_value();
}

void LocalGroup::throwAborted(int64_t rank, const char *what) const {
  throw RuntimeError(std::string(what) + " on rank " + std::to_string(rank) +
                     ": group aborted: " + *abortReason_);
}

void LocalGroup::rendezvous(std::unique_lock<std::mutex> &lock, int64_t rank,
                            const char *what) {
  if (abortReason_) throwAborted(rank, what);
  if (rank < 0 || rank >= worldSize_)
    throw RuntimeError(std::string(what) + ": rank " + std::to_string(rank) +
                       " out of range for world size " + std::to_string(worldSize_));
  arrived_[rank] = true;
  arrivedAt_[rank] = what;
  uint64_t generation = generation_;
  if (++arrivedCount_ == worldSize_) {
    // Last to arrive: check everyone is in the same collective, then release.
    for (int64_t r = 0; r < worldSize_; ++r)
      if (std::strcmp(arrivedAt_[r], what) != 0) {
        abortReason_ = "collective mismatch: rank " + std::to_string(r) + " called " +
                       arrivedAt_[r] + " while rank " + std::to_string(rank) +
                       " called " + what;
        cv_.notify_all();
        throwAborted(rank, what);
      }
    arrivedCount_ = 0;
    arrived_.assign(worldSize_, false);
    ++generation_;
    cv_.notify_all();
    return;
  }
  auto timeout = timeout_;
  bool done = cv_.wait_for(lock, timeout, [&] {
    return generation_ != generation || abortReason_.has_value();
  });
  if (generation_ != generation) return;  // completed, even if aborted later
  if (abortReason_) throwAborted(rank, what);
  (void)done;
  std::ostringstream message;
  message << what << " timed out after " << timeout.count() << " s waiting for ranks [";
  bool first = true;
  for (int64_t r = 0; r < worldSize_; ++r)
    if (!arrived_[r]) {
      message << (first ? "" : ", ") << r;
      first = false;
    }
  message << "] (rank " << rank << ")";
  // This rank is leaving; the collective can never complete correctly now.
  abortReason_ = message.str();
  cv_.notify_all();
  throw RuntimeError(message.str());
}

void LocalGroup::copyPhase(std::unique_lock<std::mutex> &lock, int64_t rank, const char *what,
                           PeerCopier &copier, const std::function<void()> &copies) {
  if (abortReason_) {  // a peer failed: copy nothing, leave once nobody reads us
    waitForCopiers(lock);
    throwAborted(rank, what);
  }
  ++copying_;
  lock.unlock();
  std::string failure;
  try {
    copies();
    copier.flush();
  } catch (const std::exception &e) {
    failure = e.what();
  }
  lock.lock();
  --copying_;
  cv_.notify_all();
  if (!failure.empty()) {
    // The peers are (or will be) waiting at the completion rendezvous.
    if (!abortReason_)
      abortReason_ = std::string(what) + " copy on rank " + std::to_string(rank) + " failed: " + failure;
    cv_.notify_all();
    waitForCopiers(lock);
    throw RuntimeError(std::string(what) + " on rank " + std::to_string(rank) + ": " + failure);
  }
}

void LocalGroup::completion(std::unique_lock<std::mutex> &lock, int64_t rank, const char *what) {
  try {
    rendezvous(lock, rank, what);
  } catch (...) {
    waitForCopiers(lock);
    throw;
  }
}

void LocalGroup::waitForCopiers(std::unique_lock<std::mutex> &lock) {
  // wait_for, not wait: libstdc++ 12 versions condition_variable::wait as
  // GLIBCXX_3.4.30, and the GPU bundle keeps to older symbols where it can
  // (scripts/gpu-bundle.sh). Copies are bounded; copyPhase notifies.
  while (copying_ != 0) cv_.wait_for(lock, std::chrono::milliseconds(50));
}

void LocalGroup::allGather(int64_t rank, const void *send, size_t bytesPerRank, void *recv,
                           PeerCopier &copier) {
  std::unique_lock lock(mutex_);
  if (rank >= 0 && rank < worldSize_) {
    send_[rank] = send;
    sendBytes_[rank] = bytesPerRank;
  }
  rendezvous(lock, rank, "all_gather");
  // Between the two rendezvous every rank's send pointer is valid and fixed.
  for (int64_t r = 0; r < worldSize_; ++r)
    if (sendBytes_[r] != bytesPerRank) {
      std::string reason = "all_gather size mismatch: rank " + std::to_string(r) +
                           " sends " + std::to_string(sendBytes_[r]) +
                           " bytes, rank " + std::to_string(rank) + " sends " +
                           std::to_string(bytesPerRank);
      if (!abortReason_) abortReason_ = reason;
      cv_.notify_all();
      throwAborted(rank, "all_gather");
    }
  copyPhase(lock, rank, "all_gather", copier, [&] {
    for (int64_t r = 0; r < worldSize_; ++r) {
      std::byte *block = static_cast<std::byte *>(recv) + r * bytesPerRank;
      if (bytesPerRank && block != send_[r])  // not in place
        copier.copy(block, send_[r], bytesPerRank);
    }
  });
  // Nobody may return (and free its send buffer) before everyone has copied.
  completion(lock, rank, "all_gather (completion)");
}

void LocalGroup::allGatherMany(int64_t rank, const std::vector<AllGatherPart> &parts,
                               PeerCopier &copier) {
  std::unique_lock lock(mutex_);
  if (rank >= 0 && rank < worldSize_) parts_[rank] = &parts;
  rendezvous(lock, rank, "all_gather_many");
  // Between the two rendezvous every rank's part list is valid and fixed.
  std::string reason;
  for (int64_t r = 0; r < worldSize_ && reason.empty(); ++r) {
    const std::vector<AllGatherPart> &theirs = *parts_[r];
    if (theirs.size() != parts.size()) {
      reason = "all_gather_many part count mismatch: rank " + std::to_string(r) + " sends " +
               std::to_string(theirs.size()) + " parts, rank " + std::to_string(rank) +
               " sends " + std::to_string(parts.size());
      break;
    }
    for (size_t i = 0; i < parts.size() && reason.empty(); ++i)
      if (theirs[i].bytesPerRank != parts[i].bytesPerRank)
        reason = "all_gather_many size mismatch in part " + std::to_string(i) + ": rank " +
                 std::to_string(r) + " sends " + std::to_string(theirs[i].bytesPerRank) +
                 " bytes, rank " + std::to_string(rank) + " sends " +
                 std::to_string(parts[i].bytesPerRank);
  }
  if (!reason.empty()) {
    if (!abortReason_) abortReason_ = reason;
    cv_.notify_all();
    throwAborted(rank, "all_gather_many");
  }
  copyPhase(lock, rank, "all_gather_many", copier, [&] {
    for (size_t i = 0; i < parts.size(); ++i) {
      const size_t bytes = parts[i].bytesPerRank;
      if (!bytes) continue;
      for (int64_t r = 0; r < worldSize_; ++r) {
        std::byte *block = static_cast<std::byte *>(parts[i].recv) + r * bytes;
        if (block != (*parts_[r])[i].send)  // not in place
          copier.copy(block, (*parts_[r])[i].send, bytes);
      }
    }
  });
  // Nobody may return (and free its send buffers) before everyone has copied.
  completion(lock, rank, "all_gather_many (completion)");
}

void LocalGroup::scatter(int64_t rank, int64_t root, const void *send, size_t bytesPerRank,
                         void *recv, PeerCopier &copier) {
  scatterFrom(rank, root, send, static_cast<size_t>(worldSize_) * bytesPerRank, bytesPerRank, 0,
              bytesPerRank, recv, copier, "scatter", "scatter (completion)");
}

void LocalGroup::scatterRows(int64_t rank, int64_t root, const void *send, size_t sendBytes,
                             size_t bytesPerRank, size_t offset, size_t windowBytes, void *recv,
                             PeerCopier &copier) {
  scatterFrom(rank, root, send, sendBytes, bytesPerRank, offset, windowBytes, recv, copier,
              "scatter_rows", "scatter_rows (completion)");
}

void LocalGroup::scatterFrom(int64_t rank, int64_t root, const void *send, size_t sendBytes,
                             size_t bytesPerRank, size_t offset, size_t windowBytes, void *recv,
                             PeerCopier &copier, const char *what, const char *whatCompleted) {
  std::unique_lock lock(mutex_);
  if (rank >= 0 && rank < worldSize_) {
    send_[rank] = send;
    sendBytes_[rank] = bytesPerRank;
    rootBytes_[rank] = sendBytes;
    root_[rank] = root;
    window_[rank] = {offset, windowBytes};
  }
  rendezvous(lock, rank, what);
  // Between the two rendezvous root's send pointer is valid and fixed.
  std::string reason;
  for (int64_t r = 0; r < worldSize_ && reason.empty(); ++r)
    if (root_[r] != root)
      reason = std::string(what) + " root mismatch: rank " + std::to_string(r) +
               " names root " + std::to_string(root_[r]) + ", rank " + std::to_string(rank) +
               " names root " + std::to_string(root);
    else if (sendBytes_[r] != bytesPerRank || rootBytes_[r] != sendBytes)
      reason = std::string(what) + " size mismatch: rank " + std::to_string(r) + " expects " +
               std::to_string(sendBytes_[r]) + " of " + std::to_string(rootBytes_[r]) +
               " bytes, rank " + std::to_string(rank) + " expects " +
               std::to_string(bytesPerRank) + " of " + std::to_string(sendBytes);
    else if (window_[r] != std::pair(offset, windowBytes))
      reason = std::string(what) + " window mismatch: rank " + std::to_string(r) +
               " expects bytes " + std::to_string(window_[r].first) + " + " +
               std::to_string(window_[r].second) + " of its part, rank " + std::to_string(rank) +
               " expects " + std::to_string(offset) + " + " + std::to_string(windowBytes);
  if (reason.empty() && offset + windowBytes > bytesPerRank)
    reason = std::string(what) + " window " + std::to_string(offset) + " + " +
             std::to_string(windowBytes) + " lies outside a part of " +
             std::to_string(bytesPerRank) + " bytes";
  if (reason.empty() && (root < 0 || root >= worldSize_))
    reason = std::string(what) + " root " + std::to_string(root) +
             " out of range for world size " + std::to_string(worldSize_);
  if (reason.empty() && sendBytes && !send_[root])
    reason = std::string(what) + ": root " + std::to_string(root) + " passed no send buffer";
  if (!reason.empty()) {
    if (!abortReason_) abortReason_ = reason;
    cv_.notify_all();
    throwAborted(rank, what);
  }
  const std::byte *source = static_cast<const std::byte *>(send_[root]);
  const size_t begin = static_cast<size_t>(rank) * bytesPerRank + offset;
  const size_t bytes = begin >= sendBytes ? 0 : std::min(windowBytes, sendBytes - begin);
  copyPhase(lock, rank, what, copier, [&] {
    if (bytes) copier.copy(recv, source + begin, bytes);
  });
  // Root must not return (and free its send buffer) before everyone copied.
  completion(lock, rank, whatCompleted);
}

void LocalGroup::barrier(int64_t rank) {
  std::unique_lock lock(mutex_);
  rendezvous(lock, rank, "barrier");
}

LocalCommunicator::LocalCommunicator(LocalGroup &group, int64_t rank, PeerCopier &copier)
    : group_(group), rank_(rank), copier_(copier) {
  if (rank < 0 || rank >= group.worldSize())
    throw RuntimeError("LocalCommunicator: rank " + std::to_string(rank) +
                       " out of range for world size " + std::to_string(group.worldSize()));
}

void LocalCommunicator::allGather(const void *send, size_t bytesPerRank, void *recv) {
  group_.allGather(rank_, send, bytesPerRank, recv, copier_);
}

void LocalCommunicator::allGatherMany(const std::vector<AllGatherPart> &parts) {
  group_.allGatherMany(rank_, parts, copier_);
}

void LocalCommunicator::scatter(int64_t root, const void *send, size_t bytesPerRank,
                                void *recv) {
  group_.scatter(rank_, root, send, bytesPerRank, recv, copier_);
}

void LocalCommunicator::scatterRows(int64_t root, const void *send, size_t sendBytes,
                                    size_t bytesPerRank, size_t offset, size_t windowBytes,
                                    void *recv) {
  group_.scatterRows(rank_, root, send, sendBytes, bytesPerRank, offset, windowBytes, recv,
                     copier_);
}

void LocalCommunicator::barrier() { group_.barrier(rank_); }

}  // namespace shardc::runtime
