// runtime/AllocationReplay: entries live at the same time never share an
// arena byte, the arena is as small as the packing allows on known
// patterns, and a replay hands out entries only while the run follows the
// trace.
#include "runtime/AllocationReplay.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <vector>

using shardc::runtime::AllocationTrace;
using shardc::runtime::ArenaLayout;
using shardc::runtime::ArenaReplay;
using shardc::runtime::layoutArena;

namespace {
constexpr size_t kGranule = 4096;

size_t rounded(size_t bytes) { return (bytes + kGranule - 1) / kGranule * kGranule; }

/// A random run: up to `maxLive` buffers of 1 byte to 1 MiB at once,
/// `steps` allocations or releases, everything released at the end.
AllocationTrace randomTrace(std::mt19937 &random, int steps, size_t maxLive) {
  AllocationTrace trace;
  std::vector<int32_t> live;
  for (int step = 0; step < steps; ++step) {
    if (live.empty() || (live.size() < maxLive && random() % 3 != 0)) {
      live.push_back(trace.allocate(1 + random() % (size_t(1) << 20)));
    } else {
      const size_t index = random() % live.size();
      trace.release(live[index]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(index));
    }
  }
  for (int32_t id : live) trace.release(id);
  return trace;
}

/// The most bytes (rounded to the granule) live at one event time.
size_t peakLive(const AllocationTrace &trace) {
  size_t peak = 0;
  for (const AllocationTrace::Entry &at : trace.entries()) {
    size_t live = 0;
    for (const AllocationTrace::Entry &other : trace.entries())
      if (other.allocatedAt <= at.allocatedAt && at.allocatedAt < other.releasedAt)
        live += rounded(other.bytes);
    peak = std::max(peak, live);
  }
  return peak;
}
}  // namespace

TEST_CASE("layoutArena: entries live at the same time never share a byte", "[replay]") {
  std::mt19937 random(11);
  for (int round = 0; round < 20; ++round) {
    const AllocationTrace trace = randomTrace(random, 400, 1 + round % 12);
    REQUIRE(trace.complete());
    const ArenaLayout layout = layoutArena(trace, kGranule);
    const auto &entries = trace.entries();
    REQUIRE(layout.offsets.size() == entries.size());
    for (size_t a = 0; a < entries.size(); ++a) {
      REQUIRE(layout.offsets[a] % kGranule == 0);
      REQUIRE(layout.offsets[a] + entries[a].bytes <= layout.bytes);
      for (size_t b = a + 1; b < entries.size(); ++b) {
        const bool together = entries[a].allocatedAt < entries[b].releasedAt &&
                              entries[b].allocatedAt < entries[a].releasedAt;
        const bool apart = layout.offsets[a] + entries[a].bytes <= layout.offsets[b] ||
                           layout.offsets[b] + entries[b].bytes <= layout.offsets[a];
        INFO("round " << round << ": entries " << a << " and " << b);
        REQUIRE((!together || apart));
      }
    }
    // No layout is below the peak; greedy by size stays near it on such runs.
    CHECK(layout.bytes >= peakLive(trace));
    CHECK(layout.bytes <= peakLive(trace) * 3 / 2);
  }
}

TEST_CASE("layoutArena: a chain of units packs into its peak", "[replay]") {
  // A forward's shape: each unit's input stays live while its output is
  // made, then goes. Two buffers at a time, so two slots.
  AllocationTrace trace;
  int32_t previous = trace.allocate(3 * kGranule);
  for (int unit = 0; unit < 10; ++unit) {
    const int32_t next = trace.allocate(3 * kGranule);
    trace.release(previous);
    previous = next;
  }
  trace.release(previous);
  const ArenaLayout layout = layoutArena(trace, kGranule);
  CHECK(layout.bytes == 6 * kGranule);
  // Buffers whose lifetimes do not meet share bytes: the middle one lies
  // inside the big one's, the small one (live with both) above them.
  AllocationTrace mixed;
  const int32_t big = mixed.allocate(8 * kGranule);
  const int32_t small = mixed.allocate(2 * kGranule);
  mixed.release(big);
  const int32_t middle = mixed.allocate(5 * kGranule);
  mixed.release(small);
  mixed.release(middle);
  const ArenaLayout packed = layoutArena(mixed, kGranule);
  CHECK(packed.bytes == 10 * kGranule);
  CHECK(packed.offsets[static_cast<size_t>(middle)] + 5 * kGranule <= 8 * kGranule);
}

TEST_CASE("ArenaReplay follows the trace and departs where the run differs", "[replay]") {
  AllocationTrace trace;
  const int32_t a = trace.allocate(100), b = trace.allocate(200);
  trace.release(a);
  const int32_t c = trace.allocate(300);
  trace.release(b);
  trace.release(c);

  SECTION("the same run gets every entry") {
    ArenaReplay replay(trace);
    CHECK(replay.next(100) == a);
    CHECK(replay.next(200) == b);
    replay.release(a);
    CHECK(replay.next(300) == c);
    CHECK(replay.live() == 2);
    replay.release(c);
    replay.release(b);
    CHECK(replay.live() == 0);
    CHECK_FALSE(replay.departed());
  }
  SECTION("releasing earlier than the trace is harmless") {
    ArenaReplay replay(trace);
    CHECK(replay.next(100) == a);
    replay.release(a);
    CHECK(replay.next(200) == b);
    replay.release(b);
    CHECK(replay.next(300) == c);
  }
  SECTION("another size departs, for good") {
    ArenaReplay replay(trace);
    CHECK(replay.next(100) == a);
    CHECK(replay.next(201) == -1);
    CHECK(replay.departed());
    CHECK(replay.next(200) == -1);
    CHECK(replay.live() == 1);
    replay.release(a);
    CHECK(replay.live() == 0);
  }
  SECTION("a buffer the trace had released still live departs") {
    // c may share a's bytes: a must be gone before c is handed out.
    ArenaReplay replay(trace);
    CHECK(replay.next(100) == a);
    CHECK(replay.next(200) == b);
    CHECK(replay.next(300) == -1);
  }
  SECTION("more requests than recorded depart") {
    ArenaReplay replay(trace);
    replay.next(100), replay.next(200);
    replay.release(a);
    replay.next(300);
    CHECK(replay.next(100) == -1);
  }
}
