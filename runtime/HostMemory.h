// Raw host memory for CpuDevice: aligned blocks, large ones prefaulted and
// (where that pays, runtime/PagePolicy.h) backed by huge pages, and reuse of
// freed large blocks.
//
// Why: a forward pass allocates one gathered buffer per unit, unit after
// unit. Fresh memory costs a page fault and a kernel page clear per page on
// first touch; measured on GPT-2 at N = 4 that was two thirds of the
// forward. Reusing the previous unit's block avoids both.
//
// The bound: the resident bytes of kept-size blocks (live and kept) never
// exceed the high-water mark of the live bytes requested since the last
// trim() (the accounted peak, which the memory plan predicts) plus the reuse
// slack, a sixteenth of the mark but at least 1 MiB and at most 64 MiB, up
// to 2 MiB of rounding per block. Kept
// blocks are returned to the system, largest first, whenever a fresh
// allocation or the reuse of a block beyond what it held before would cross
// that bound; if that is not enough, the unused tails of live reused blocks
// are handed back to the kernel (MADV_DONTNEED) while their address ranges
// are kept. trim() returns every kept block and restarts the mark; runners
// call it after each function. Kept blocks go back before a new
// allocation's pages are touched, so the process never has the kept blocks
// and the new pages resident at once beyond the bound.
//
// What the allocator holds (Stats::heldPeakBytes: small requests plus
// resident large blocks, kept ones included) is the figure a resident-set
// measurement can be held to; the accounted peak alone misses the kept
// blocks (7 MiB on GPT-2 at N = 2), and a bound on it alone was flaky.
//
// Functions that run again (a training loop's step, a serving loop's
// forward) can have their large requests served from one arena
// (runtime/AllocationReplay.h): runners say when a function starts
// (beginFunction), each complete run is recorded, and when a warm run still
// first-touched memory (best fit left some request without a kept block),
// the next runs of that function take their blocks at offsets planned from
// that run, in one arena that stays resident between runs. The arena counts
// in the resident bytes and is only made when it fits the bound (with the
// kept blocks, which it replaces, given back first); a run it does not fit
// yet (right after a trim) is served by best fit and recorded again. A run
// that departs from the recording (another size, another order of
// releases) is served by best fit from then on; the arena's unused pages go
// back at once and the arena itself when its last block is released.
//
// Why the slack: a forward's buffers come in a few sizes, and a freed block
// serves a smaller request whole, so with the bound at the mark exactly the
// pool was always a little short and freed blocks that the same forward
// (and the next one) needed again: on HF Llama, GPT-2 and Swin (CI size)
// every repeated forward first-touched 5-6 MiB in a dozen fresh blocks, up
// to a tenth of its time. With a sixteenth more no repeat first-touches
// anything (bench/README.md, "Warm forwards"); the 1 MiB floor is for small
// forwards (nn.MultiheadAttention at 2 MiB: three fresh blocks per repeat
// with a sixteenth alone).
#pragma once

#include "runtime/AllocationReplay.h"
#include "runtime/PagePolicy.h"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <unordered_map>
#include <vector>

namespace shardc::runtime {

class HostMemory {
public:
  /// Blocks of at least this many bytes are 2 MiB aligned, reused after
  /// release, and handled as the page policy says: advised for transparent
  /// huge pages (MADV_HUGEPAGE) if adviseHugePages, else kept on 4 KiB pages
  /// (MADV_NOHUGEPAGE, so THP "always" does not undo it); if prefault, the
  /// part of a block not resident yet is faulted in at allocation
  /// (MADV_POPULATE_WRITE: one call instead of a trap per page; callers
  /// write every byte they ask for, so no figure changes).
  static constexpr size_t kLargeBlock = size_t(2) << 20;
  /// Blocks from this size up to kLargeBlock are page aligned, kept and
  /// reused like large ones (prefaulted as the policy says, no huge-page
  /// advice). Why: glibc serves such sizes from mmap or the top of its heap
  /// and hands them back to the kernel on free (its dynamic mmap and trim
  /// thresholds), so every forward's activations of 128 KiB-2 MiB were
  /// faulted in and cleared again; on HF Llama (CI size) that churn was a
  /// tenth of the forward. Smaller blocks stay with operator new.
  static constexpr size_t kKeptBlock = size_t(64) << 10;
  /// The reuse slack above the high-water mark (see the top of this file).
  static constexpr size_t kReuseSlackDivisor = 16;
  static constexpr size_t kReuseSlackFloor = size_t(1) << 20;
  static constexpr size_t kReuseSlackCap = size_t(64) << 20;

  explicit HostMemory(const PagePolicy &policy = systemPagePolicy()) : policy_(policy) {}
  HostMemory(const HostMemory &) = delete;
  HostMemory &operator=(const HostMemory &) = delete;
  ~HostMemory() { trim(); }

  struct Block {
    void *data = nullptr;
    size_t capacity = 0;  // what free() needs back
    size_t used = 0;      // bytes of the request it serves
    size_t resident = 0;  // bytes of it that may be resident (touched)
    /// Its entry in the function's recording or (arena blocks) replay; -1
    /// when neither.
    int32_t traceId = -1;
  };

  /// `bytes` (already a multiple of `alignment`, > 0) of uninitialized
  /// memory; data == nullptr when the system has none.
  Block allocate(size_t bytes, size_t alignment);
  /// Keeps blocks of kKeptBlock and more for reuse; frees smaller ones. Takes back the Block
  /// that allocate() returned.
  void release(const Block &block);
  /// Returns every kept block (and the arena, unless some of its blocks are
  /// live: then when the last is released) to the system, restarts the
  /// high-water mark at the bytes live now and the stats at zero.
  void trim();
  /// A function identified by `key` starts (the previous one ended and its
  /// buffers were released, or they outlive it): its requests are recorded,
  /// or served from its arena when an earlier run planned one (see the top
  /// of this file). Keys are compared, never dereferenced.
  void beginFunction(const void *key);
  /// The arena's size (0 when there is none) and whether the running
  /// function's requests are served from it.
  size_t arenaBytes() const { return arena_.bytes; }
  bool replaying() const { return replaying_; }
  size_t keptBytes() const;
  /// What the bound is about (see the top of this file).
  size_t residentBytes() const { return residentBytes_; }
  /// Small blocks' requests plus residentBytes(): see Stats::heldPeakBytes.
  size_t heldBytes() const { return smallBytes_ + residentBytes_; }
  size_t highWater() const { return highWater_; }
  /// What residentBytes() stays under: highWater() plus the reuse slack.
  size_t residentBound() const;
  /// False in AddressSanitizer builds, where every release frees.
  static bool reusesBlocks();

  /// Where kept-size requests (kKeptBlock and more) were served from since construction or the last
  /// trim(): a kept block (no first touch, up to what it held before) or
  /// fresh memory (first-touched: faulted in and cleared by the kernel).
  /// Runners trim after each function, so figures read before that trim
  /// cover the function (PhaseReport's large-block counts).
  struct Stats {
    size_t reusedBlocks = 0;
    size_t freshBlocks = 0;
    size_t freshBytes = 0;  // bytes of fresh blocks plus growth of reused ones
    /// The most bytes held at once: small blocks' requests plus the
    /// resident bytes of kept-size blocks, live and kept (what the
    /// process's resident set holds for this allocator, up to malloc's own
    /// overhead on small blocks). A trim restarts it at what is held then.
    size_t heldPeakBytes = 0;
  };
  const Stats &stats() const { return stats_; }

private:
  /// Frees kept blocks, largest first, then trims live blocks' unused
  /// tails, until resident <= residentBound() (or nothing is left to give).
  void shrinkToBound();
  void freeKept(size_t index);
  /// Gives back the pages of `block` beyond its request, rounded to 2 MiB.
  void trimTail(Block &block);
  /// `bytes` of memory not touched yet, page aligned (2 MiB aligned and
  /// advised as the policy says from kLargeBlock up); nullptr when the
  /// system has none.
  void *freshMemory(size_t bytes) const;
  /// Faults in bytes [from, to) of `block` (page-rounded) if the policy says so.
  void prefault(const Block &block, size_t from, size_t to) const;
  void noteHeld() { stats_.heldPeakBytes = std::max(stats_.heldPeakBytes, heldBytes()); }
  /// The next arena block of the function being replayed, or data ==
  /// nullptr when the run departs from its recording (or no arena fits).
  Block allocateFromArena(size_t bytes);
  /// Makes an arena of `bytes` (the kept blocks and an idle arena go
  /// first); false when it would cross the bound.
  bool makeArena(size_t bytes);
  void freeArena();
  /// The run departed from its recording: no more arena blocks for it, the
  /// pages no live block covers go back now, the arena when it is idle.
  void stopReplay();
  /// Stores the recording of the run that just ended as its function's
  /// plan when complete (see the top of this file); forgets it otherwise.
  void finishRecording();

  /// A function's last complete run, and what it is used for.
  struct FunctionPlan {
    AllocationTrace trace;
    ArenaLayout layout;
    /// Complete runs recorded since the last trim().
    int runsSinceTrim = 0;
    bool useArena = false;
    /// A run departed from the recording: served by best fit from now on.
    bool rejected = false;
  };
  struct Arena {
    std::byte *data = nullptr;
    size_t bytes = 0;
    size_t resident = 0;
    size_t liveBlocks = 0;
    /// Freed when its last live block is released (a departed run, a trim
    /// while blocks were live).
    bool draining = false;
    bool holds(const void *address) const {
      const auto *byte = static_cast<const std::byte *>(address);
      return data && byte >= data && byte < data + bytes;
    }
  };

  PagePolicy policy_;
  Stats stats_;
  std::vector<Block> kept_;
  std::unordered_map<void *, Block> live_;  // large blocks in use, by address
  size_t liveBytes_ = 0;      // requested bytes of live large blocks
  size_t highWater_ = 0;      // max liveBytes_ since the last trim()
  size_t residentBytes_ = 0;  // resident of live and kept large blocks and the arena
  size_t smallBytes_ = 0;     // requested bytes of live small blocks

  std::unordered_map<const void *, FunctionPlan> plans_;  // by function key
  const void *recordingKey_ = nullptr;
  std::optional<AllocationTrace> recording_;
  size_t freshBytesAtRecordingStart_ = 0;
  Arena arena_;
  /// The arena's blocks' entries: from the plan being replayed (kept while
  /// blocks it handed out are live, after the replay stopped too).
  std::optional<ArenaReplay> replay_;
  FunctionPlan *replayPlan_ = nullptr;
  const void *replayKey_ = nullptr;
  bool replaying_ = false;
};

}  // namespace shardc::runtime
