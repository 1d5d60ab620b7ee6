// Threads the OS refuses to start (ulimit -v, ulimit -u, a cgroup's pid
// limit) end a local run with an error that says how many ranks started and
// what to do, after joining every started thread (runLocal, and LocalSession
// through runtime/RankThreads.h); kernel and reader threads
// fall back to the calling thread with the same results. The refusal is
// injected with limitThreadStartsForTesting (a unit test cannot set an
// rlimit for itself alone); test/lit/shardc/thread-limit.test gets the real
// one from `ulimit -v`.
#include "TestPlans.h"
#include "runtime/JoiningThreads.h"
#include "runtime/LocalRun.h"
#include "runtime/LocalSession.h"
#include "runtime/RuntimeError.h"
#include "runtime/init/ParallelFor.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <vector>

using namespace shardc::runtime;
using namespace shardc::plan;
using Catch::Matchers::Contains;

namespace {

/// Lifts the injected limit however the test ends.
struct ThreadStartLimit {
  explicit ThreadStartLimit(int64_t allowed) { limitThreadStartsForTesting(allowed); }
  ~ThreadStartLimit() { limitThreadStartsForTesting(-1); }
};

RunOptions seedOptions() {
  RunOptions options;
  HostTensor x{"x", DType::F32, {1}, std::vector<std::byte>(4)};
  float quarter = 0.25f;
  std::memcpy(x.data.data(), &quarter, 4);
  options.inputs = {x};
  options.timeout = std::chrono::seconds(20);
  return options;
}

}  // namespace

TEST_CASE("a rank thread the OS refuses fails the run with how many started", "[threads]") {
  const Plan plan = shardc::test::seedPlan(8, 64, 16);
  {
    ThreadStartLimit limit(3);
    try {
      runLocal(plan, seedOptions());
      FAIL("the run succeeded with 3 of 8 rank threads");
    } catch (const RuntimeError &e) {
      CHECK_THAT(e.what(), Contains("could not start local rank 3"));
      CHECK_THAT(e.what(), Contains("only 3 of 8 rank threads started"));
      CHECK_THAT(e.what(), Contains("--backend mpi"));
    }
  }
  // The three started ranks were joined (a joinable std::thread destroyed
  // would have terminated the process): the same plan now runs whole.
  RunResult result = runLocal(plan, seedOptions());
  CHECK(result.ranks.size() == 8);
}

TEST_CASE("LocalSession (the JIT's ranks): a refused rank thread fails the call, the session "
          "stays usable", "[threads]") {
  const Plan plan = shardc::test::seedPlan(4, 64, 16);
  LocalSession session(plan, /*seed=*/0, std::chrono::seconds(20));
  {
    ThreadStartLimit limit(2);
    CHECK_THROWS_WITH(session.init(), Contains("could not start local rank 2") &&
                                          Contains("only 2 of 4 rank threads started"));
  }
  CHECK_FALSE(session.materialized());  // a failed init releases every shard
  session.init();
  std::vector<PhaseReport> reports;
  const std::vector<HostTensor> y = session.forward(seedOptions().inputs, reports);
  REQUIRE(y.size() == 1);
  float first;
  std::memcpy(&first, y[0].data.data(), 4);
  CHECK(first == 1.25f);
}

TEST_CASE("parallelFor runs the parts whose thread was refused on the caller", "[threads]") {
  for (int64_t allowed : {0, 1, 2}) {
    INFO(allowed << " thread start(s) allowed");
    ThreadStartLimit limit(allowed);
    std::vector<std::atomic<int>> seen(1000);
    init::parallelFor(1000, 4, [&](int64_t begin, int64_t count) {
      for (int64_t i = begin; i < begin + count; ++i) ++seen[static_cast<size_t>(i)];
    });
    for (const std::atomic<int> &times : seen) REQUIRE(times == 1);
  }
}

TEST_CASE("JoiningThreads joins what it started and reports a refusal", "[threads]") {
  std::atomic<int> ran{0};
  {
    ThreadStartLimit limit(2);
    JoiningThreads threads;
    for (int i = 0; i < 3; ++i) threads.start([&] { ++ran; });
    CHECK(threads.started() == 2);
    CHECK(threads.refusal() == "thread start refused by the test limit");
  }  // destroyed without joinAll(): it joins
  CHECK(ran == 2);
}
