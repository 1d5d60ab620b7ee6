#include "runtime/HostMemory.h"

#include <algorithm>
#include <cstdlib>
#include <new>

#include <sys/mman.h>

namespace shardc::runtime {
namespace {

// Under AddressSanitizer every release really frees, so a use after free
// of a large buffer is still caught.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kReuse = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kReuse = false;
#else
constexpr bool kReuse = true;
#endif
#else
constexpr bool kReuse = true;
#endif

constexpr size_t kHugePage = size_t(2) << 20;
constexpr size_t kPage = 4096;
/// Functions whose runs are recorded and planned; later ones are served as
/// kept blocks only (a JIT session with this many functions is unusual).
constexpr size_t kMaxPlans = 64;

size_t roundUp(size_t bytes, size_t to) { return (bytes + to - 1) / to * to; }

}  // namespace

HostMemory::Block HostMemory::allocate(size_t bytes, size_t alignment) {
  if (bytes < kKeptBlock) {
    void *memory = ::operator new(bytes, std::align_val_t{alignment}, std::nothrow);
    if (!memory) return {nullptr, 0, 0, 0};
    smallBytes_ += bytes;
    noteHeld();
    return {memory, bytes, bytes, bytes};
  }

  if (replaying_ && alignment <= kPage) {  // arena offsets are page aligned
    Block block = allocateFromArena(bytes);
    if (block.data) return block;
  }
  liveBytes_ += bytes;
  highWater_ = std::max(highWater_, liveBytes_);
  const int32_t traceId = recording_ ? recording_->allocate(bytes) : -1;

  // Best fit: the smallest kept block that holds the request.
  size_t best = kept_.size();
  for (size_t i = 0; i < kept_.size(); ++i)
    if (kept_[i].capacity >= bytes &&
        (best == kept_.size() || kept_[i].capacity < kept_[best].capacity))
      best = i;
  if (best != kept_.size()) {
    Block block = kept_[best];
    kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(best));
    block.used = bytes;
    block.traceId = traceId;
    ++stats_.reusedBlocks;
    const size_t residentBefore = block.resident;
    if (bytes > block.resident) {
      stats_.freshBytes += bytes - block.resident;
      residentBytes_ += bytes - block.resident;
      block.resident = bytes;
    }
    Block &entry = live_[block.data] = block;
    // Kept blocks (and live blocks' unused tails; this one has none) go back
    // before the growth's pages are touched, so the process never holds
    // them and the growth at once.
    shrinkToBound();
    prefault(entry, residentBefore, bytes);  // nothing when the block did not grow
    noteHeld();
    return entry;
  }

  residentBytes_ += bytes;
  shrinkToBound();  // before the new block is touched (as above)
  void *memory = freshMemory(bytes);
  if (!memory) {
    liveBytes_ -= bytes;
    residentBytes_ -= bytes;
    return {nullptr, 0, 0, 0};
  }
  Block block{memory, bytes, bytes, bytes, traceId};
  ++stats_.freshBlocks;
  stats_.freshBytes += bytes;
  prefault(block, 0, bytes);
  live_[memory] = block;
  noteHeld();
  return block;
}

void *HostMemory::freshMemory(size_t bytes) const {
  const bool large = bytes >= kLargeBlock;
  void *memory = nullptr;
  if (posix_memalign(&memory, large ? kHugePage : kPage, bytes) != 0) return nullptr;
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
  // Only whole 2 MiB pages inside the block become huge; the tail stays on
  // 4 KiB pages, so nothing beyond `bytes` is ever touched. A hint: failure
  // only costs speed.
  if (large)
    madvise(memory, bytes / kHugePage * kHugePage,
            policy_.adviseHugePages ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#endif
  return memory;
}

void HostMemory::release(const Block &block) {
  if (!block.data) return;
  if (arena_.holds(block.data)) {
    liveBytes_ -= block.used;
    replay_->release(block.traceId);
    if (--arena_.liveBlocks == 0 && arena_.draining) freeArena();
    return;
  }
  auto found = live_.find(block.data);
  if (found == live_.end()) {  // a small block
    smallBytes_ -= block.capacity;
    ::operator delete(block.data, std::align_val_t{64});
    return;
  }
  Block large = found->second;  // its resident is tracked here, not in `block`
  live_.erase(found);
  liveBytes_ -= large.used;
  if (large.traceId >= 0 && recording_) recording_->release(large.traceId);
  if (kReuse) {
    kept_.push_back(large);
  } else {
    residentBytes_ -= large.resident;
    std::free(large.data);
  }
}

void HostMemory::prefault(const Block &block, size_t from, size_t to) const {
#ifdef MADV_POPULATE_WRITE
  if (!policy_.prefault || to <= from) return;
  // Whole pages holding bytes [from, to): the first may be shared with what
  // precedes `from` in the block (already resident or about to be); the
  // last is inside the block's mapping. The kernel may refuse (older than
  // 5.14: EINVAL); the writes then fault the pages in as before.
  size_t begin = from / kPage * kPage;
  size_t end = roundUp(to, kPage);
  madvise(static_cast<char *>(block.data) + begin, end - begin, MADV_POPULATE_WRITE);
#else
  (void)block, (void)from, (void)to;
#endif
}

void HostMemory::trimTail(Block &block) {
  // The end is rounded down to a page (the block may share its last page
  // with other heap memory), the start up to a huge page.
  size_t keep = roundUp(block.used, kHugePage);
  size_t end = std::min(roundUp(block.resident, kHugePage), block.capacity) / kPage * kPage;
  if (keep >= end) return;
  madvise(static_cast<char *>(block.data) + keep, end - keep, MADV_DONTNEED);
  size_t remaining = std::max(block.used, std::min(keep, block.resident));
  residentBytes_ -= block.resident - remaining;
  block.resident = remaining;
}

size_t HostMemory::residentBound() const {
  return highWater_ +
         std::min(std::max(highWater_ / kReuseSlackDivisor, kReuseSlackFloor), kReuseSlackCap);
}

void HostMemory::shrinkToBound() {
  const size_t bound = residentBound();
  while (residentBytes_ > bound && !kept_.empty()) {
    size_t largest = 0;
    for (size_t i = 1; i < kept_.size(); ++i)
      if (kept_[i].resident > kept_[largest].resident) largest = i;
    freeKept(largest);
  }
  if (residentBytes_ > bound && arena_.data && arena_.liveBlocks == 0 && !replaying_) freeArena();
  if (residentBytes_ <= bound) return;
  for (auto &[address, block] : live_) {
    trimTail(block);
    if (residentBytes_ <= bound) return;
  }
}

void HostMemory::freeKept(size_t index) {
  residentBytes_ -= kept_[index].resident;
  std::free(kept_[index].data);
  kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(index));
}

void HostMemory::trim() {
  finishRecording();
  replaying_ = false;
  for (auto &[key, plan] : plans_) plan.runsSinceTrim = 0;
  if (arena_.liveBlocks == 0) {
    if (arena_.data) freeArena();
  } else {
    arena_.draining = true;
  }
  while (!kept_.empty()) freeKept(kept_.size() - 1);
  highWater_ = liveBytes_;
  stats_ = {};
  noteHeld();
}

bool HostMemory::reusesBlocks() { return kReuse; }

void HostMemory::beginFunction(const void *key) {
  finishRecording();
  replaying_ = false;
  // An arena block still live (a buffer that outlived its run) pins the
  // replay whose entries it belongs to: no new recording or replay until
  // it is released.
  if (!kReuse || arena_.liveBlocks > 0) return;
  replay_.reset();
  auto found = plans_.find(key);
  if (found != plans_.end() && found->second.useArena) {
    replayPlan_ = &found->second;
    replayKey_ = key;
    replay_.emplace(replayPlan_->trace);
    replaying_ = true;
    return;
  }
  if (found == plans_.end() && plans_.size() >= kMaxPlans) return;
  recording_.emplace();
  recordingKey_ = key;
  freshBytesAtRecordingStart_ = stats_.freshBytes;
}

void HostMemory::finishRecording() {
  if (!recording_) return;
  AllocationTrace trace = std::move(*recording_);
  recording_.reset();
  if (!trace.complete()) {
    // Its blocks still live must not be taken for a later recording's.
    for (auto &[address, block] : live_) block.traceId = -1;
    return;
  }
  if (trace.entries().empty()) return;
  FunctionPlan &plan = plans_[recordingKey_];
  ++plan.runsSinceTrim;
  // The first run after a trim first-touches everything; a later one that
  // still does churns the kept blocks and is what the arena is for.
  const bool firstTouched = stats_.freshBytes > freshBytesAtRecordingStart_;
  if (plan.runsSinceTrim < 2 || !firstTouched || plan.rejected) return;
  plan.layout = layoutArena(trace, kPage);
  plan.trace = std::move(trace);
  plan.useArena = true;
}

HostMemory::Block HostMemory::allocateFromArena(size_t bytes) {
  const ArenaLayout &layout = replayPlan_->layout;
  if (arena_.liveBlocks == 0 && (!arena_.data || arena_.bytes < layout.bytes) &&
      !makeArena(layout.bytes)) {
    // Not within the bound now (right after a trim the high-water mark is
    // only what outlives the runs): this run, whose first large request
    // this is, is served by best fit and recorded, so that a later run
    // that fits plans again.
    replayPlan_->useArena = false;
    replaying_ = false;
    replay_.reset();
    recording_.emplace();
    recordingKey_ = replayKey_;
    freshBytesAtRecordingStart_ = stats_.freshBytes;
    return {};
  }
  const int32_t id = replay_->next(bytes);
  if (id < 0) {
    stopReplay();
    return {};
  }
  liveBytes_ += bytes;
  highWater_ = std::max(highWater_, liveBytes_);
  ++arena_.liveBlocks;
  ++stats_.reusedBlocks;
  noteHeld();
  return {arena_.data + layout.offsets[static_cast<size_t>(id)], bytes, bytes, bytes, id};
}

bool HostMemory::makeArena(size_t bytes) {
  size_t keptResident = 0;
  for (const Block &block : kept_) keptResident += block.resident;
  const size_t without = residentBytes_ - keptResident - arena_.resident;
  if (without + bytes > residentBound()) return false;
  // What it replaces goes back before its pages are touched (as in
  // allocate()): the kept blocks serve nothing while the arena serves all.
  while (!kept_.empty()) freeKept(kept_.size() - 1);
  if (arena_.data) freeArena();
  void *memory = freshMemory(bytes);
  if (!memory) return false;
  arena_ = Arena{static_cast<std::byte *>(memory), bytes, bytes, 0, false};
  residentBytes_ += bytes;
  ++stats_.freshBlocks;
  stats_.freshBytes += bytes;
  prefault(Block{memory, bytes, bytes, bytes}, 0, bytes);
  noteHeld();
  return true;
}

void HostMemory::freeArena() {
  residentBytes_ -= arena_.resident;
  std::free(arena_.data);
  arena_ = Arena{};
  replay_.reset();
}

void HostMemory::stopReplay() {
  replaying_ = false;
  replayPlan_->useArena = false;
  replayPlan_->rejected = true;
  if (arena_.liveBlocks == 0) {
    freeArena();
    return;
  }
  arena_.draining = true;
  // Give back the whole pages that no live block touches: the run goes on
  // with fresh and kept blocks, and the bound counts the arena's resident.
  const ArenaLayout &layout = replayPlan_->layout;
  const std::vector<AllocationTrace::Entry> &entries = replayPlan_->trace.entries();
  std::vector<std::pair<size_t, size_t>> used;  // live blocks' [begin, end)
  for (size_t id = 0; id < entries.size(); ++id)
    if (replay_->isLive(static_cast<int32_t>(id)))
      used.emplace_back(layout.offsets[id], layout.offsets[id] + entries[id].bytes);
  std::sort(used.begin(), used.end());
  used.emplace_back(arena_.bytes, arena_.bytes);  // the end closes the last gap
  size_t from = 0, released = 0;
  for (const auto &[begin, end] : used) {
    const size_t gapBegin = roundUp(from, kPage), gapEnd = begin / kPage * kPage;
    if (gapEnd > gapBegin) {
      madvise(arena_.data + gapBegin, gapEnd - gapBegin, MADV_DONTNEED);
      released += gapEnd - gapBegin;
    }
    from = std::max(from, end);
  }
  arena_.resident -= released;
  residentBytes_ -= released;
}

size_t HostMemory::keptBytes() const {
  size_t total = 0;
  for (const Block &block : kept_) total += block.capacity;
  return total;
}

}  // namespace shardc::runtime
