// The OS's count of resident memory beside the devices' ledger
// (runtime/ResidentMemory.h), for the seed case and full-size GPT-2.
//
// The ledger proves the runtime follows the plan; this proves the process
// holds no more memory than the host allocator says, up to a stated slack:
//
//   ledger  <=  held  <=  ledger + the allocator's reuse slack
//   resident peak growth  <=  held + copies + slack
//
// - ledger: every rank's peak (init or forward) summed over ranks;
// - held: every rank's host allocator peak (HostMemory's heldPeakBytes),
//   summed: the ledger's bytes plus freed blocks kept for reuse, which by
//   design may exceed the peak by a sixteenth of it (runtime/HostMemory.h;
//   7.0 MiB on GPT-2 at N = 2, deterministic);
// - copies: host copies of outputs (every rank) made inside the window;
// - slack: kSlackBytes + kSlackPerRankBytes per rank, for what is neither:
//   thread stacks, per-thread malloc arenas, code and OpenBLAS buffers
//   touched for the first time, which vary with thread timing. Measured
//   over held + copies: 0.6-2.5 MiB (gpt2 at N = 2, four runs); the slack
//   is several times that.
//
// The lower bound (largest rank peak <= growth: the counted bytes are really
// touched) needs a fresh process: here, memory earlier test cases freed can
// stay resident in glibc's thread arenas (malloc_trim does not trim their
// tops) and be reused without a page fault. test/lit/shardc/resident-memory
// .test checks both bounds on `shardc run --report json`, one process per run.
//
// Under AddressSanitizer (scripts/sanitize.sh) shadow memory is resident
// too, and its allocator keeps freed memory (quarantine): the bound does not
// hold there, and the test says so (the normal build's run checks it).
#include "PipelineTestSupport.h"
#include "runtime/HostMemory.h"
#include "runtime/LocalRun.h"
#include "runtime/ResidentMemory.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>

using namespace shardc;

namespace {

constexpr int64_t kSlackBytes = int64_t(8) << 20;
constexpr int64_t kSlackPerRankBytes = int64_t(1) << 20;

void checkResidentBound(const char *model, int64_t worldSize) {
  INFO(model << " at N = " << worldSize);
  const compiler::Graph graph = test::loadExample(model);
  const plan::Plan plan = test::compileForTest(graph, worldSize);
  runtime::RunOptions options;
  options.inputs = runtime::makeDeterministicInputs(plan, /*seed=*/0, compiler::inputBounds(graph));
  options.measureResident = true;  // the OS figure is opt-in (RunOptions)
  const runtime::RunResult result = runtime::runLocal(plan, options);
  REQUIRE(result.residentPeakGrowthBytes.has_value());

  const int64_t growth = *result.residentPeakGrowthBytes;
  const int64_t ledger = runtime::ledgerPeakSumBytes(result);
  const int64_t held = runtime::heldPeakSumBytes(result);
  const int64_t copies = runtime::hostCopyBytes(result, worldSize);
  int64_t largestRank = 0;
  for (const runtime::RankReport &rank : result.ranks)
    largestRank = std::max({largestRank, rank.init.peakBytes,
                            rank.forward ? rank.forward->peakBytes : int64_t(0)});
  const int64_t upper = held + copies + kSlackBytes + kSlackPerRankBytes * worldSize;
  std::printf("%s N=%lld: resident peak growth %lld, held %lld (ledger %lld) + copies %lld "
              "(excess %.2f MiB)\n",
              model, static_cast<long long>(worldSize), static_cast<long long>(growth),
              static_cast<long long>(held), static_cast<long long>(ledger),
              static_cast<long long>(copies),
              static_cast<double>(growth - held - copies) / 1048576.0);
  CHECK(largestRank > 0);
  for (const runtime::RankReport &rank : result.ranks)
    for (const runtime::PhaseReport *phase : {&rank.init, rank.forward ? &*rank.forward : nullptr}) {
      if (!phase) continue;
      INFO("rank " << rank.rank << ": ledger peak " << phase->peakBytes << ", held peak "
                   << phase->heldPeakBytes);
      CHECK(phase->heldPeakBytes >= phase->peakBytes);  // held counts every live request
      if (runtime::HostMemory::reusesBlocks()) {
        // Kept blocks stay within the reuse slack: a sixteenth, at least
        // 1 MiB (plus 2 MiB of rounding per kept block, not reached here).
        const int64_t reuseSlack = std::max<int64_t>(phase->peakBytes / 16, int64_t(1) << 20);
        CHECK(phase->heldPeakBytes <= phase->peakBytes + reuseSlack);
      }
    }
  if (runtime::HostMemory::reusesBlocks()) {
    CHECK(growth <= upper);
  } else {
    WARN("AddressSanitizer build: its allocator keeps freed memory resident and reuses it, and "
         "shadow memory is resident too: the resident bound is checked only in the normal build");
  }
}

}  // namespace

TEST_CASE("seed case: the OS's resident growth stays within the ledger's peaks plus the slack",
          "[pipeline][seed][memory][resident]") {
  checkResidentBound("seed", 1);
  checkResidentBound("seed", 2);
  checkResidentBound("seed", 4);
}

TEST_CASE("GPT-2 small: the OS's resident growth stays within the ledger's peaks plus the slack",
          "[pipeline][forward][memory][resident]") {
  checkResidentBound("gpt2", 2);
}
