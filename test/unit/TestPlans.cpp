#include "TestPlans.h"

namespace shardc::test {
using namespace shardc::plan;

plan::Plan seedPlan(int64_t worldSize, int64_t rows, int64_t cols, double value) {
  Plan plan;
  plan.worldSize = worldSize;
  Param p1;
  p1.name = "p1";
  p1.shape = {rows, cols};
  p1.device = "cpu";
  p1.chunkRows = (rows + worldSize - 1) / worldSize;
  plan.params.push_back(p1);

  Function init;
  init.name = "init";
  init.buffers.push_back({0, "p1", DType::F32, p1.localShape(), p1.localBytes(),
                          Category::Parameter, 0});
  init.body.push_back({OpCode::Alloc, {}, {0}, {}, "init.py:1"});
  init.body.push_back({OpCode::Fill, {}, {0}, {{"value", value}}, "init.py:2"});
  plan.functions.push_back(init);

  Function forward;
  forward.name = "forward";
  forward.buffers.push_back({0, "p1", DType::F32, p1.localShape(), p1.localBytes(),
                             Category::Parameter, 0});
  forward.buffers.push_back({1, "x", DType::F32, {1}, 4, Category::IO, std::nullopt});
  forward.buffers.push_back({2, "p1.gathered", DType::F32, {rows, cols},
                             p1.gatheredBytes(worldSize), Category::Gathered, std::nullopt});
  forward.buffers.push_back({3, "y", DType::F32, {rows, cols}, rows * cols * 4,
                             Category::Activation, std::nullopt});
  forward.inputs = {1};
  forward.outputs = {3};
  forward.body.push_back({OpCode::Alloc, {}, {2}, {}, "fwd.py:1"});
  forward.body.push_back({OpCode::AllGather, {0}, {2}, {}, "fwd.py:1"});
  forward.body.push_back({OpCode::Alloc, {}, {3}, {}, "fwd.py:2"});
  forward.body.push_back({OpCode::Add, {2, 1}, {3}, {}, "fwd.py:2"});
  forward.body.push_back({OpCode::Free, {2}, {}, {}, "fwd.py:3"});
  plan.functions.push_back(forward);
  return plan;
}

}  // namespace shardc::test
