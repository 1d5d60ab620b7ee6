// Collectives between the ranks of one plan execution.
//
// Every call is collective (all ranks must make the same calls in the same
// order) and bounded by a timeout: a rank that waits longer throws
// RuntimeError naming the ranks it waited for, instead of hanging forever.
#pragma once

#include "runtime/RuntimeError.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace shardc::runtime {

/// One tensor of a multi-tensor all-gather: this rank sends `bytesPerRank`
/// bytes from `send`; rank r's part lands at recv + r * bytesPerRank.
struct AllGatherPart {
  const void *send = nullptr;
  size_t bytesPerRank = 0;
  void *recv = nullptr;
};

class Communicator {
public:
  virtual ~Communicator() = default;

  virtual int64_t rank() const = 0;
  virtual int64_t worldSize() const = 0;

  /// Every rank contributes `bytesPerRank` bytes from `send`; `recv` receives
  /// worldSize * bytesPerRank bytes, rank 0's first. `send` either does not
  /// overlap `recv` or is this rank's own block of it, recv + rank *
  /// bytesPerRank (in place, as NCCL and MPI_IN_PLACE allow: the executor
  /// converts master weights into that block before gathering them). All
  /// ranks must pass the same bytesPerRank.
  virtual void allGather(const void *send, size_t bytesPerRank, void *recv) = 0;
  /// One collective for several tensors (an FSDP unit): for every part i,
  /// recv_i receives worldSize * bytesPerRank_i bytes, rank 0's first. All
  /// ranks must pass the same number of parts and the same sizes, in the same
  /// order. A part's send is in place (its own block of its recv) or
  /// overlaps no part's recv. Backends override it
  /// with one collective; this default runs one allGather per part.
  virtual void allGatherMany(const std::vector<AllGatherPart> &parts) {
    for (const AllGatherPart &part : parts) allGather(part.send, part.bytesPerRank, part.recv);
  }
  /// Gathers that overlap compute (FSDP's prefetch): a communicator that
  /// can leave an all-gather in flight (NCCL: it runs on its own stream
  /// while the caller enqueues other work) says so here. The executor core
  /// then starts every all_gather with startAllGatherMany and calls
  /// waitGathers() before the first instruction that touches one of its
  /// buffers (docs/plan.md "all_gather"), so a prefetched unit's gather
  /// runs while the current unit computes.
  virtual bool defersGathers() const { return false; }
  /// allGatherMany that may still be in flight when it returns: the parts'
  /// send and recv bytes belong to the collective until waitGathers()
  /// returns. Any other collective first completes the gathers in flight
  /// (they are ordered as started). Default: allGatherMany.
  virtual void startAllGatherMany(const std::vector<AllGatherPart> &parts) {
    allGatherMany(parts);
  }
  /// Waits for every gather startAllGatherMany left in flight, with the
  /// timeout and abort rules of a collective. Default: none is.
  virtual void waitGathers() {}
  /// Rank `root` sends worldSize * bytesPerRank bytes from `send` (rank r's
  /// part first at r * bytesPerRank); every rank, root included, receives its
  /// bytesPerRank bytes into `recv`. `send` is read on root only (other ranks
  /// may pass nullptr); it must not overlap root's `recv`. All ranks must pass
  /// the same root and bytesPerRank. Same timeout and abort behaviour as
  /// allGather.
  virtual void scatter(int64_t root, const void *send, size_t bytesPerRank, void *recv) = 0;
  /// scatter() from a root whose `send` holds only `sendBytes` bytes (a
  /// full gradient, not padded to worldSize * bytesPerRank), one window of
  /// each rank's part at a time: every rank receives the part of bytes
  /// [rank * bytesPerRank + offset, rank * bytesPerRank + offset +
  /// windowBytes) of root's send that lies below sendBytes into `recv`;
  /// bytes of `recv` past it are left as they are (the caller zeroes them).
  /// offset + windowBytes <= bytesPerRank. reduce_scatter runs one per root
  /// and window (docs/training.md): its workspace holds one window, not the
  /// whole part. All ranks pass the same root, sendBytes, bytesPerRank and
  /// window. The default fails: this communicator cannot reduce-scatter.
  virtual void scatterRows(int64_t, const void *, size_t, size_t, size_t, size_t, void *) {
    throw RuntimeError("this communicator has no reduce-scatter (scatterRows); "
                       "sharded gradients run on the local and MPI communicators");
  }
  virtual void barrier() = 0;

  virtual std::chrono::duration<double> timeout() const = 0;
  virtual void setTimeout(std::chrono::duration<double> timeout) = 0;
};

}  // namespace shardc::runtime
