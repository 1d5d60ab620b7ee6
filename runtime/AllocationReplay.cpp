#include "runtime/AllocationReplay.h"

#include <algorithm>
#include <cassert>
#include <numeric>

namespace shardc::runtime {

int32_t AllocationTrace::allocate(size_t bytes) {
  Entry entry;
  entry.bytes = bytes;
  entry.releasesBefore = releaseOrder_.size();
  entry.allocatedAt = clock_++;
  entries_.push_back(entry);
  return static_cast<int32_t>(entries_.size() - 1);
}

void AllocationTrace::release(int32_t id) {
  Entry &entry = entries_[static_cast<size_t>(id)];
  assert(entry.releasedAt == kStillLive && "released twice");
  entry.releasedAt = clock_++;
  releaseOrder_.push_back(id);
}

ArenaLayout layoutArena(const AllocationTrace &trace, size_t granule) {
  assert(trace.complete());
  const std::vector<AllocationTrace::Entry> &entries = trace.entries();
  auto rounded = [&](size_t bytes) { return (bytes + granule - 1) & ~(granule - 1); };
  std::vector<int32_t> bySize(entries.size());
  std::iota(bySize.begin(), bySize.end(), 0);
  std::stable_sort(bySize.begin(), bySize.end(),
                   [&](int32_t a, int32_t b) { return entries[a].bytes > entries[b].bytes; });

  ArenaLayout layout;
  layout.offsets.assign(entries.size(), 0);
  struct Placed {
    size_t offset, end;  // bytes [offset, end) of the arena
    size_t from, to;     // live in event times [from, to)
  };
  std::vector<Placed> placed;  // sorted by offset
  for (int32_t id : bySize) {
    const AllocationTrace::Entry &entry = entries[static_cast<size_t>(id)];
    const size_t size = rounded(entry.bytes);
    // The smallest gap that holds it between the placed entries live at
    // the same time, scanned by offset; above the highest of them if none.
    size_t below = 0, best = SIZE_MAX, bestGap = SIZE_MAX;
    for (const Placed &other : placed) {
      if (other.to <= entry.allocatedAt || entry.releasedAt <= other.from) continue;
      if (other.offset >= below) {
        const size_t gap = other.offset - below;
        if (gap >= size && gap < bestGap) best = below, bestGap = gap;
      }
      below = std::max(below, other.end);
    }
    const size_t offset = best != SIZE_MAX ? best : below;
    layout.offsets[static_cast<size_t>(id)] = offset;
    layout.bytes = std::max(layout.bytes, offset + size);
    const Placed mine{offset, offset + size, entry.allocatedAt, entry.releasedAt};
    placed.insert(
        std::upper_bound(placed.begin(), placed.end(), mine,
                         [](const Placed &a, const Placed &b) { return a.offset < b.offset; }),
        mine);
  }
  return layout;
}

ArenaReplay::ArenaReplay(const AllocationTrace &trace)
    : trace_(trace), state_(trace.entries().size(), State::NotYet) {}

int32_t ArenaReplay::next(size_t bytes) {
  if (departed_) return -1;
  const std::vector<AllocationTrace::Entry> &entries = trace_.entries();
  const std::vector<int32_t> &order = trace_.releaseOrder();
  while (releasedPrefix_ < order.size() &&
         state_[static_cast<size_t>(order[releasedPrefix_])] == State::Released)
    ++releasedPrefix_;
  // The layout keeps this entry apart from the entries live when it was
  // recorded; those released by then in the trace must be released now
  // (the first releasesBefore of the release order), or they may share its
  // bytes. Entries released earlier than the trace had them are harmless.
  if (cursor_ >= entries.size() || entries[cursor_].bytes != bytes ||
      releasedPrefix_ < entries[cursor_].releasesBefore) {
    departed_ = true;
    return -1;
  }
  state_[cursor_] = State::Live;
  ++live_;
  return static_cast<int32_t>(cursor_++);
}

void ArenaReplay::release(int32_t id) {
  State &state = state_[static_cast<size_t>(id)];
  assert(state == State::Live && "released an entry not handed out");
  state = State::Released;
  --live_;
}

}  // namespace shardc::runtime
