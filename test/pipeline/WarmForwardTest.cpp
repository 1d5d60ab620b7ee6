// Repeated forwards reach a steady state: the blocks a forward released
// serve the next one, so after the first no forward first-touches memory,
// through the JIT's LocalSession (which keeps them between forward calls)
// and `shardc run --repeat` (runLocal's forwardRepeats). Outputs and the
// ledger's peak are the same every time.
#include "PipelineTestSupport.h"
#include "runtime/DeterministicInput.h"
#include "runtime/LocalRun.h"
#include "runtime/LocalSession.h"

#include <catch2/catch.hpp>

using namespace shardc;

TEST_CASE("LocalSession: forwards after the first first-touch nothing", "[pipeline][warm]") {
  const compiler::Graph graph = test::loadExample("llama");
  const plan::Plan plan = test::compileForTest(graph, 2);
  const std::vector<runtime::HostTensor> inputs =
      runtime::makeDeterministicInputs(plan, /*seed=*/0, compiler::inputBounds(graph));
  runtime::LocalSession session(plan, /*seed=*/0);
  session.init();
  std::vector<runtime::PhaseReport> first, later;
  const std::vector<runtime::HostTensor> expected = session.forward(inputs, first);
  for (int call = 0; call < 2; ++call) {
    CHECK(session.forward(inputs, later)[0].data == expected[0].data);
    for (int64_t r = 0; r < 2; ++r) {
      INFO("call " << call + 2 << ", rank " << r << ": first forward first-touched "
                   << first[r].firstTouchBytes << " bytes in " << first[r].freshLargeBlocks
                   << " blocks");
      CHECK(first[r].firstTouchBytes > 0);  // the model has kept-size buffers
      CHECK(later[r].peakBytes == first[r].peakBytes);
      // Under AddressSanitizer every release frees: nothing is reused.
      if (runtime::HostMemory::reusesBlocks()) {
        CHECK(later[r].reusedLargeBlocks ==
              first[r].reusedLargeBlocks + first[r].freshLargeBlocks);
        CHECK(later[r].freshLargeBlocks == 0);
        CHECK(later[r].firstTouchBytes == 0);
      }
    }
  }
}

TEST_CASE("runLocal: --repeat forwards first-touch nothing", "[pipeline][warm]") {
  const compiler::Graph graph = test::loadExample("llama");
  const plan::Plan plan = test::compileForTest(graph, 2);
  runtime::RunOptions options;
  options.inputs = runtime::makeDeterministicInputs(plan, /*seed=*/0, compiler::inputBounds(graph));
  options.forwardRepeats = 2;
  const runtime::RunResult result = runtime::runLocal(plan, options);
  for (const runtime::RankReport &rank : result.ranks) {
    REQUIRE(rank.repeats.size() == 2);
    REQUIRE(rank.forward);
    CHECK(rank.forward->firstTouchBytes > 0);
    for (const runtime::RankReport::Repeat &repeat : rank.repeats) {
      CHECK(repeat.seconds > 0);
      if (runtime::HostMemory::reusesBlocks()) {
        CHECK(repeat.freshLargeBlocks == 0);
        CHECK(repeat.firstTouchBytes == 0);
      }
    }
  }
}
