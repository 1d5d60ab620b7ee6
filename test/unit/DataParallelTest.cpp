// Data-parallel pieces (runtime/DataParallel.h): batch slices, the
// collectives-only function of a rank without rows, input slicing and
// output concatenation, and the linear kernel's row independence that makes
// a micro-batch's rows bit-identical to the global batch's.
#include "runtime/DataParallel.h"
#include "runtime/ForwardKernels.h"
#include "runtime/InitOps.h"
#include "runtime/RuntimeError.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <random>

using namespace shardc::runtime;
using namespace shardc::plan;

TEST_CASE("batchSlice: the first B mod N ranks get one row more", "[data-parallel]") {
  auto slices = [](int64_t b, int64_t n) {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (int64_t r = 0; r < n; ++r) out.push_back({batchSlice(b, n, r).begin, batchSlice(b, n, r).rows});
    return out;
  };
  using V = std::vector<std::pair<int64_t, int64_t>>;
  CHECK(slices(5, 1) == V{{0, 5}});
  CHECK(slices(5, 2) == V{{0, 3}, {3, 2}});
  CHECK(slices(5, 3) == V{{0, 2}, {2, 2}, {4, 1}});
  CHECK(slices(8, 4) == V{{0, 2}, {2, 2}, {4, 2}, {6, 2}});
  CHECK(slices(2, 4) == V{{0, 1}, {1, 1}, {2, 0}, {2, 0}});
  CHECK(microBatchSizes(8, 4) == std::vector<int64_t>{2});
  CHECK(microBatchSizes(5, 3) == std::vector<int64_t>{2, 1});
  CHECK(microBatchSizes(2, 4) == std::vector<int64_t>{1, 0});
  CHECK(forwardFunctionName(2, 2) == "forward");
  CHECK(forwardFunctionName(0, 2) == "forward.rows0");
}

TEST_CASE("collectivesOnly keeps the all-gathers and their buffers only", "[data-parallel]") {
  Function f;
  f.name = "forward";
  f.buffers = {Buffer(0, "x", DType::F32, {2, 4}, 32, Category::IO),
               Buffer(1, "p", DType::F32, {2, 4}, 32, Category::Parameter, 0),
               Buffer(2, "p.gathered", DType::F32, {4, 4}, 64, Category::Gathered),
               Buffer(3, "y", DType::F32, {2, 4}, 32, Category::Activation)};
  f.inputs = {0};
  f.outputs = {3};
  f.body = {{OpCode::Alloc, {}, {2}, {}, ""},  {OpCode::AllGather, {1}, {2}, {}, ""},
            {OpCode::Alloc, {}, {3}, {}, ""},  {OpCode::Add, {0, 2}, {3}, {}, ""},
            {OpCode::Free, {2}, {}, {}, ""},   {OpCode::Free, {0}, {}, {}, ""}};
  Function c = collectivesOnly(f, "forward.rows0");
  CHECK(c.name == "forward.rows0");
  CHECK(c.inputs.empty());
  CHECK(c.outputs.empty());
  REQUIRE(c.body.size() == 3);
  CHECK(c.body[0].op == OpCode::Alloc);
  CHECK(c.body[1].op == OpCode::AllGather);
  CHECK(c.body[2].op == OpCode::Free);
  CHECK(c.body[2].inputs == std::vector<int32_t>{2});
}

TEST_CASE("collectivesOnly joins every sum over ranks with zeros, in order", "[data-parallel]") {
  // A count over the batch summed over ranks (cross_entropy's counted
  // targets), then a gather: a rank with no rows adds 0 to the sum and
  // joins both collectives in the forward's order.
  Function f;
  f.name = "forward";
  f.buffers = {Buffer(0, "t", DType::F32, {2}, 8, Category::IO),
               Buffer(1, "count", DType::F32, {}, 4, Category::Activation),
               Buffer(2, "count.all_ranks", DType::F32, {}, 4, Category::Activation),
               Buffer(3, "p", DType::F32, {2, 4}, 32, Category::Parameter, 0),
               Buffer(4, "p.gathered", DType::F32, {4, 4}, 64, Category::Gathered)};
  f.inputs = {0};
  f.body = {{OpCode::Alloc, {}, {1}, {}, ""},      {OpCode::Sum, {0}, {1}, {}, ""},
            {OpCode::Alloc, {}, {2}, {}, ""},      {OpCode::AllReduceSum, {1}, {2}, {}, "loss"},
            {OpCode::Free, {1}, {}, {}, ""},       {OpCode::Alloc, {}, {4}, {}, ""},
            {OpCode::AllGather, {3}, {4}, {}, ""}, {OpCode::Free, {4}, {}, {}, ""},
            {OpCode::Free, {2}, {}, {}, ""}};
  Function c = collectivesOnly(f, "forward.rows0");
  std::vector<OpCode> ops;
  for (const Instruction &inst : c.body) ops.push_back(inst.op);
  CHECK(ops == std::vector<OpCode>{OpCode::Alloc, OpCode::Fill, OpCode::Alloc, OpCode::AllReduceSum,
                                   OpCode::Free, OpCode::Free, OpCode::Alloc, OpCode::AllGather,
                                   OpCode::Free});
  // The sum reads fresh zeros of the count's shape, not the forward's
  // buffers (which this rank never computes).
  const Instruction &sum = c.body[3];
  REQUIRE(sum.inputs.size() == 1);
  CHECK(sum.inputs[0] >= 5);
  CHECK(c.buffers.at(static_cast<size_t>(sum.inputs[0])).shape.empty());
  CHECK(c.buffers.at(static_cast<size_t>(sum.inputs[0])).bytes == 4);
  CHECK(c.body[1].outputs == sum.inputs);
  CHECK(std::get<double>(c.body[1].attrs.at("value")) == 0.0);
  CHECK(sum.loc == "loss");
}

TEST_CASE("sliceRows and concatRankOutputs are inverse over the ranks", "[data-parallel]") {
  HostTensor t{"y", DType::I64, {5, 3}, {}};
  t.data.resize(5 * 3 * 8);
  for (int64_t i = 0; i < 15; ++i) std::memcpy(t.data.data() + i * 8, &i, 8);
  for (int64_t n : {1, 2, 3, 4, 7}) {
    INFO("N = " << n);
    std::vector<std::vector<HostTensor>> perRank;
    for (int64_t r = 0; r < n; ++r) {
      BatchSlice s = batchSlice(5, n, r);
      perRank.push_back(s.rows ? std::vector<HostTensor>{sliceRows(t, s.begin, s.rows)}
                               : std::vector<HostTensor>{});
    }
    std::vector<HostTensor> whole = concatRankOutputs(perRank);
    REQUIRE(whole.size() == 1);
    CHECK(whole[0].shape == t.shape);
    CHECK(whole[0].data == t.data);
  }
  HostTensor other{"y", DType::I64, {1, 4}, std::vector<std::byte>(32)};
  CHECK_THROWS_WITH(concatRankOutputs({{t}, {other}}), Catch::Contains("does not stack"));
}

TEST_CASE("concatRankOutputs sums 0-d outputs: the ranks' shares of a loss", "[data-parallel]") {
  auto scalar = [](DType dtype, double value) {
    HostTensor t{"loss", dtype, {}, std::vector<std::byte>(static_cast<size_t>(dtypeSize(dtype)))};
    storeFromDouble(dtype, t.data.data(), 0, value);
    return t;
  };
  // float32 shares whose float sum would lose the small ones: added in long
  // double in rank order, rounded once.
  const std::vector<std::vector<HostTensor>> perRank = {
      {scalar(DType::F32, 1e8)}, {scalar(DType::F32, 3)}, {}, {scalar(DType::F32, -1e8)}};
  const std::vector<HostTensor> loss = concatRankOutputs(perRank);
  REQUIRE(loss.size() == 1);
  CHECK(loss[0].shape.empty());
  CHECK(loadAsDouble(DType::F32, loss[0].data.data(), 0) == 3.0);
  const HostTensor f64 = sumRankShares({&perRank[0][0], &perRank[1][0]});
  CHECK(loadAsDouble(DType::F32, f64.data.data(), 0) == float(1e8 + 3));
  HostTensor ids{"n", DType::I64, {}, std::vector<std::byte>(8)};
  CHECK_THROWS_WITH(sumRankShares({&ids, &ids}), Catch::Contains("0-d int64"));
  HostTensor row{"loss", DType::F32, {1}, std::vector<std::byte>(4)};
  CHECK_THROWS_WITH(concatRankOutputs({{perRank[0][0]}, {row}}),
                    Catch::Contains("not a 0-d float32 share"));
}

TEST_CASE("linear: a row's result does not depend on how many rows share the call",
          "[data-parallel][forward]") {
  // 150 rows (two full 64-row tiles and a tail) against the same rows in
  // micro-batches of 75, 50 and 1: bit-identical, as --data-parallel needs.
  const int64_t rows = 150, K = 96, N = 300;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> x(rows * K), w(N * K), b(N), y(rows * N);
  for (float &v : x) v = dist(rng);
  for (float &v : w) v = dist(rng);
  for (float &v : b) v = dist(rng);
  KTensor wk{DType::F32, {N, K}, w.data()}, bk{DType::F32, {N}, b.data()};
  linearKernel({DType::F32, {rows, K}, x.data()}, wk, &bk, {DType::F32, {rows, N}, y.data()}, 2);
  for (int64_t micro : {75, 50, 1}) {
    INFO("micro-batch " << micro);
    std::vector<float> part(rows * N);
    for (int64_t m0 = 0; m0 < rows; m0 += micro)
      linearKernel({DType::F32, {micro, K}, x.data() + m0 * K}, wk, &bk,
                   {DType::F32, {micro, N}, part.data() + m0 * N}, 1);
    CHECK(std::memcmp(part.data(), y.data(), y.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("moveBatchDim moves a dim to the front and back", "[data-parallel]") {
  // [T = 2, B = 3, E = 2], element (t, b, e) = 100 t + 10 b + e.
  HostTensor seq{"x", DType::F32, {2, 3, 2}, {}};
  seq.data.resize(12 * sizeof(float));
  for (int t = 0; t < 2; ++t)
    for (int b = 0; b < 3; ++b)
      for (int e = 0; e < 2; ++e) seq.as<float>()[(t * 3 + b) * 2 + e] = 100.f * t + 10.f * b + e;
  HostTensor front = moveBatchDim(seq, 1, true);
  REQUIRE(front.shape == std::vector<int64_t>{3, 2, 2});
  for (int b = 0; b < 3; ++b)
    for (int t = 0; t < 2; ++t)
      for (int e = 0; e < 2; ++e)
        CHECK(front.as<float>()[(b * 2 + t) * 2 + e] == 100.f * t + 10.f * b + e);
  HostTensor back = moveBatchDim(front, 1, false);
  CHECK(back.shape == seq.shape);
  CHECK(back.data == seq.data);
  // The last dim too, and dim 0 unchanged.
  CHECK(moveBatchDim(moveBatchDim(seq, 2, true), 2, false).data == seq.data);
  CHECK(moveBatchDim(seq, 0, true).data == seq.data);
}

TEST_CASE("rankForward gives every rank a 0-d input whole", "[data-parallel]") {
  // forward(n [], x [2, 4]) of a plan for 4 rows over 2 ranks.
  Plan plan;
  plan.worldSize = 2;
  Function forward;
  forward.name = "forward";
  forward.buffers = {Buffer(0, "n", DType::F32, {}, 4, Category::IO),
                     Buffer(1, "x", DType::I64, {2, 4}, 64, Category::IO)};
  forward.inputs = {0, 1};
  plan.functions.push_back(forward);
  HostTensor n{"n", DType::F32, {}, std::vector<std::byte>(4)};
  const float count = 24.0f;
  std::memcpy(n.data.data(), &count, 4);
  HostTensor x{"x", DType::I64, {4, 4}, {}};
  x.data.resize(4 * 4 * 8);
  for (int64_t i = 0; i < 16; ++i) std::memcpy(x.data.data() + i * 8, &i, 8);
  CHECK(globalBatchRows({n, x}) == 4);
  for (int64_t rank : {0, 1}) {
    INFO("rank " << rank);
    RankForward mine = rankForward(plan, {n, x}, rank);
    CHECK(mine.function == "forward");
    REQUIRE(mine.inputs.size() == 2);
    CHECK(mine.inputs[0].shape.empty());
    CHECK(mine.inputs[0].data == n.data);
    CHECK(mine.inputs[1].data == sliceRows(x, 2 * rank, 2).data);
  }
  // The global inputs made from a seed keep it 0-d.
  std::vector<HostTensor> made = makeGlobalInputs(plan, 6, 1, {});
  REQUIRE(made.size() == 2);
  CHECK(made[0].shape.empty());
  CHECK(made[1].shape == std::vector<int64_t>{6, 4});
  CHECK_THROWS_WITH(globalBatchRows({n}), Catch::Contains("no batch input with rows"));
}
