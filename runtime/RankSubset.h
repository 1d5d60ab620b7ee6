// Running only some ranks of an N-rank plan (`shardc run --ranks LIST
// --init-only`, docs/cli.md "Running some ranks").
//
// Shardable parameters need nothing from other ranks: a rank generates its
// own rows. A non-shardable one is computed in full by its owner rank and
// scattered; when the owner is not among the ranks run, every rank that is
// run computes the full tensor itself (the owner's rank-conditional
// instructions run on it too) and keeps its own rows, so its values are the
// ones a full run gives it, bit for bit (the generators do not depend on
// the rank that runs them; docs/rng.md).
#pragma once

#include "runtime/Communicator.h"
#include "runtime/LocalCommunicator.h"
#include "runtime/Plan.h"

#include <string>
#include <vector>

namespace shardc::runtime {

/// "0", "0-3", "0,17,63", "0-3,8": ranks of a world of `worldSize`, sorted.
/// Throws RuntimeError naming the bad item (not a number, out of range,
/// FIRST > LAST, listed twice, empty).
std::vector<int64_t> parseRankList(const std::string &text, int64_t worldSize);

/// "0-3,8": the shortest text parseRankList reads back as `ranks` (sorted).
std::string formatRankList(const std::vector<int64_t> &ranks);

/// `plan` with the `rank` attribute removed from every instruction naming
/// a rank not in `present` (sorted): the ranks that are run do the absent
/// owners' work themselves, and the memory model predicts it (the full
/// tensor is live on each of them). Instructions of present ranks keep it.
plan::Plan planForRanks(const plan::Plan &plan, const std::vector<int64_t> &present);

/// A rank of a subset run: rank() and worldSize() are the plan's (global
/// rank ranks[peers.rank()], world plan.worldSize); `peers` connects only
/// the ranks that are run, in the order of `ranks`, and moves host memory
/// (its collectives carry bookkeeping: root's pointer, the barrier).
///  - scatter from a present root: root's buffer, read in place (the ranks
///    are threads of one process), at the global rank's offset;
///  - scatter from an absent root: this rank computed the full tensor itself
///    (planForRanks) and passes it as `send`: its own rows are copied out;
///  - all_gather: fails (it needs every rank's shards; a subset runs init
///    only, which gathers nothing).
/// Scatter's rows move with `copier` (memcpy for host memory; ranks on one
/// GPU copy device to device on their stream); it must outlive this.
class SubsetCommunicator final : public Communicator {
public:
  SubsetCommunicator(Communicator &peers, std::vector<int64_t> ranks, int64_t worldSize,
                     PeerCopier &copier = hostCopier());

  int64_t rank() const override { return ranks_[peers_.rank()]; }
  int64_t worldSize() const override { return worldSize_; }
  void allGather(const void *send, size_t bytesPerRank, void *recv) override;
  void allGatherMany(const std::vector<AllGatherPart> &parts) override;
  void scatter(int64_t root, const void *send, size_t bytesPerRank, void *recv) override;
  void barrier() override { peers_.barrier(); }
  std::chrono::duration<double> timeout() const override { return peers_.timeout(); }
  void setTimeout(std::chrono::duration<double> timeout) override {
    peers_.setTimeout(timeout);
  }

private:
  Communicator &peers_;
  PeerCopier &copier_;
  std::vector<int64_t> ranks_;
  int64_t worldSize_;
};

}  // namespace shardc::runtime
