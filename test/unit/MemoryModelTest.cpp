#include "TestPlans.h"
#include "runtime/MemoryModel.h"
#include "runtime/RuntimeError.h"

#include <catch2/catch.hpp>

using namespace shardc::runtime;
using namespace shardc::plan;

TEST_CASE("memory model predicts the seed case exactly", "[memory]") {
  Plan plan = shardc::test::seedPlan(2);
  MemoryPrediction init = predictMemory(plan, "init", 0);
  CHECK(init.peakBytes == 2097152);
  CHECK(init.endBytes == 2097152);
  REQUIRE(init.paramsAtEnd.size() == 1);
  MemoryPrediction forward = predictMemory(plan, "forward", 1, init.paramsAtEnd);
  CHECK(forward.peakBytes == 2097152 + 4 + 4194304 + 4194304);
  CHECK(forward.liveAtPeak == std::vector<LiveAllocation>{
                                  {"p1", Category::Parameter, 2097152},
                                  {"x", Category::IO, 4},
                                  {"p1.gathered", Category::Gathered, 4194304},
                                  {"y", Category::Activation, 4194304}});
  CHECK(forward.peakByCategory[size_t(Category::Gathered)] == 4194304);
  CHECK(forward.endBytes == 2097152 + 4 + 4194304);
  CHECK(forward.endByCategory[size_t(Category::Gathered)] == 0);
  CHECK(unshardedParamBytes(plan) == 4194304);
}

TEST_CASE("memory model rejects inconsistent streams", "[memory]") {
  Plan plan = shardc::test::seedPlan(2);
  Function &forward = plan.functions[1];
  forward.body.push_back({OpCode::Free, {2}, {}, {}, "fwd.py:9"});
  CHECK_THROWS_WITH(predictMemory(plan, "forward", 0),
                    Catch::Contains("function 'forward' instruction #5 'free' at fwd.py:9: "
                                    "buffer 'p1.gathered' is not allocated"));
  forward.body.back() = {OpCode::Free, {0}, {}, {}, "fwd.py:9"};
  CHECK_THROWS_WITH(predictMemory(plan, "forward", 0), Catch::Contains("must not be freed"));
  forward.body.back() = {OpCode::Alloc, {}, {0}, {}, ""};
  CHECK_THROWS_WITH(predictMemory(plan, "forward", 0,
                                  {{"p1", Category::Parameter, 2097152}}),
                    Catch::Contains("param 'p1' is already allocated"));
  CHECK_THROWS_WITH(predictMemory(plan, "nope", 0), Catch::Contains("no function 'nope'"));
  CHECK_THROWS_WITH(predictMemory(plan, "init", 2), Catch::Contains("rank 2 out of range"));
}
