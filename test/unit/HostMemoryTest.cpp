// HostMemory: large blocks are reused, and the resident bytes never exceed
// the high-water mark of the live bytes (the accounted peak) by more than
// the 2 MiB rounding per block; live blocks keep their contents throughout.
#include "runtime/HostMemory.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

using shardc::runtime::HostMemory;

namespace {
constexpr size_t MiB = size_t(1) << 20;

void fill(const HostMemory::Block &block, unsigned char value) {
  std::memset(block.data, value, block.used);
}

bool holds(const HostMemory::Block &block, unsigned char value) {
  const auto *bytes = static_cast<const unsigned char *>(block.data);
  // First, last and a middle byte: a stray MADV_DONTNEED zeroes whole pages.
  return bytes[0] == value && bytes[block.used - 1] == value && bytes[block.used / 2] == value;
}
}  // namespace

TEST_CASE("a freed large block serves the next request that fits", "[hostmemory]") {
  HostMemory memory;
  HostMemory::Block first = memory.allocate(8 * MiB, 64);
  REQUIRE(first.data);
  fill(first, 1);
  void *address = first.data;
  memory.release(first);
  HostMemory::Block second = memory.allocate(6 * MiB, 64);
  if (HostMemory::reusesBlocks()) {
    CHECK(second.data == address);
    CHECK(second.capacity == 8 * MiB);
    CHECK(memory.keptBytes() == 0);
  } else {
    WARN("AddressSanitizer build: blocks are freed, not reused");
  }
  fill(second, 2);
  CHECK(holds(second, 2));
  memory.release(second);
  memory.trim();
  CHECK(memory.keptBytes() == 0);
  CHECK(memory.residentBytes() == 0);
}

TEST_CASE("small blocks are not kept", "[hostmemory]") {
  HostMemory memory;
  HostMemory::Block small = memory.allocate(4096, 64);
  REQUIRE(small.data);
  memory.release(small);
  CHECK(memory.keptBytes() == 0);
  CHECK(memory.residentBytes() == 0);
}

TEST_CASE("resident bytes stay under the high-water mark of live bytes", "[hostmemory]") {
  std::mt19937 random(7);
  HostMemory memory;
  struct Live {
    HostMemory::Block block;
    unsigned char value;
  };
  std::vector<Live> live;
  for (int step = 0; step < 400; ++step) {
    bool allocate = live.empty() || (live.size() < 6 && random() % 2 == 0);
    if (allocate) {
      size_t bytes = (2 * MiB + random() % (24 * MiB)) / 64 * 64;
      HostMemory::Block block = memory.allocate(bytes, 64);
      REQUIRE(block.data);
      REQUIRE(block.capacity >= bytes);
      unsigned char value = static_cast<unsigned char>(1 + step % 250);
      fill(block, value);
      live.push_back({block, value});
    } else {
      size_t index = random() % live.size();
      memory.release(live[index].block);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(index));
    }
    for (const Live &entry : live) REQUIRE(holds(entry.block, entry.value));
    size_t blocks = live.size() + memory.keptBytes() / (2 * MiB) + 1;
    INFO("step " << step << ": resident " << memory.residentBytes() << ", high water "
                 << memory.highWater());
    REQUIRE(memory.residentBytes() <= memory.highWater() + blocks * 2 * MiB);
    if (step % 97 == 96) {
      memory.trim();
      REQUIRE(memory.keptBytes() == 0);
    }
  }
  for (const Live &entry : live) memory.release(entry.block);
  memory.trim();
  CHECK(memory.residentBytes() == 0);
}
