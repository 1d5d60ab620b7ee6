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

  liveBytes_ += bytes;
  highWater_ = std::max(highWater_, liveBytes_);

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
  const bool large = bytes >= kLargeBlock;
  void *memory = nullptr;
  if (posix_memalign(&memory, large ? kHugePage : kPage, bytes) != 0) {
    liveBytes_ -= bytes;
    residentBytes_ -= bytes;
    return {nullptr, 0, 0, 0};
  }
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
  // Only whole 2 MiB pages inside the block become huge; the tail stays on
  // 4 KiB pages, so nothing beyond `bytes` is ever touched. A hint: failure
  // only costs speed.
  if (large)
    madvise(memory, bytes / kHugePage * kHugePage,
            policy_.adviseHugePages ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#endif
  Block block{memory, bytes, bytes, bytes};
  ++stats_.freshBlocks;
  stats_.freshBytes += bytes;
  prefault(block, 0, bytes);
  live_[memory] = block;
  noteHeld();
  return block;
}

void HostMemory::release(const Block &block) {
  if (!block.data) return;
  auto found = live_.find(block.data);
  if (found == live_.end()) {  // a small block
    smallBytes_ -= block.capacity;
    ::operator delete(block.data, std::align_val_t{64});
    return;
  }
  Block large = found->second;  // its resident is tracked here, not in `block`
  live_.erase(found);
  liveBytes_ -= large.used;
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
  while (!kept_.empty()) freeKept(kept_.size() - 1);
  highWater_ = liveBytes_;
  stats_ = {};
  noteHeld();
}

bool HostMemory::reusesBlocks() { return kReuse; }

size_t HostMemory::keptBytes() const {
  size_t total = 0;
  for (const Block &block : kept_) total += block.capacity;
  return total;
}

}  // namespace shardc::runtime
