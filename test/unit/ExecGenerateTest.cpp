// The init instructions end to end on hand-built plans: generate (with and
// without index_map), in-place pointwise ops, rank-conditional instructions,
// scatter and orthogonal, at world sizes 1..5 with uneven shards.
#include "ExecTestUtil.h"
#include "runtime/InitOps.h"
#include "runtime/LocalRun.h"
#include "runtime/PlanCheck.h"
#include "runtime/PlanJson.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace shardc::test::exec;
using shardc::runtime::RuntimeError;
using Catch::Matchers::Contains;

namespace {

using Attrs = std::map<std::string, AttrValue>;

Attrs generator(const std::string &kind, const std::string &stream, int64_t position = 0) {
  Attrs a{{"kind", kind}, {"stream", stream}, {"position", position}};
  if (kind == "fill") a["value"] = 0.5;
  if (kind == "uniform") a.insert({{"low", -2.0}, {"high", 3.0}});
  if (kind == "normal") a.insert({{"mean", 1.0}, {"std", 0.02}});
  if (kind == "trunc_normal") a.insert({{"mean", 0.0}, {"std", 1.0}, {"low", -2.0}, {"high", 2.0}});
  if (kind == "arange") a.insert({{"start", 0.0}, {"step", 1.0}});
  return a;
}

/// One param generated straight into its shard.
Plan generatePlan(int64_t n, std::vector<int64_t> shape, const std::string &kind,
                  DType dtype = DType::F32, Attrs extra = {}) {
  Plan plan = emptyPlan(n);
  int32_t p = addParam(plan, "w", shape, dtype);
  emit(plan, OpCode::Alloc, {}, {p});
  Attrs attrs = generator(kind, "w");
  for (auto &[k, v] : extra) attrs[k] = v;
  emit(plan, OpCode::Generate, {}, {p}, attrs);
  return plan;
}

void checkPredictedEqualsMeasured(const std::vector<RankInit> &ranks) {
  for (size_t r = 0; r < ranks.size(); ++r) {
    INFO("rank " << r);
    CHECK(ranks[r].peakBytes == ranks[r].predicted.peakBytes);
    CHECK(ranks[r].liveAtPeak == ranks[r].predicted.liveAtPeak);
    CHECK(ranks[r].endBytes == ranks[r].predicted.endBytes);
  }
}

}  // namespace

TEST_CASE("generate: concatenated shards equal N = 1 for N = 1..5", "[exec][generate]") {
  for (const char *kind : {"fill", "uniform", "normal", "trunc_normal", "arange", "eye"})
    for (DType dtype : {DType::F32, DType::F64, DType::BF16})
      for (std::vector<int64_t> shape :
           {std::vector<int64_t>{7, 3}, {2, 5}, {1, 4}, {11}, {5, 2, 3}}) {
        if (std::string(kind) == "eye" && shape.size() != 2) continue;
        INFO(kind << " " << shardc::plan::dtypeName(dtype) << " " << shape.size() << "-d, d0 "
                  << shape[0]);
        Plan one = generatePlan(1, shape, kind, dtype);
        std::vector<std::byte> reference = runInit(one, 42)[0].params[0];
        REQUIRE(reference.size() == static_cast<size_t>(one.params[0].fullBytes()));
        for (int64_t n = 2; n <= 5; ++n) {
          INFO("world size " << n);
          Plan plan = generatePlan(n, shape, kind, dtype);
          auto ranks = runInit(plan, 42, n == 3 ? 2 : 1);
          CHECK(concatenated(plan, ranks, 0) == reference);
          CHECK(paddingIsZero(plan, ranks, 0));
          checkPredictedEqualsMeasured(ranks);
        }
      }
  // The seed and the stream matter; the world size does not.
  Plan plan = generatePlan(1, {4, 4}, "uniform");
  auto a = runInit(plan, 1)[0].params[0], b = runInit(plan, 2)[0].params[0];
  CHECK(a != b);
  initOf(plan).body[1].attrs["stream"] = std::string("v");
  CHECK(runInit(plan, 1)[0].params[0] != a);
  initOf(plan).body[1].attrs["stream"] = std::string("w");
  initOf(plan).body[1].attrs["position"] = int64_t(1);
  CHECK(runInit(plan, 1)[0].params[0] != a);
}

TEST_CASE("generate: an index_map reads the source through the map", "[exec][generate]") {
  // Reference: the 5x3 source itself.
  Plan sourcePlan = generatePlan(1, {5, 3}, "uniform");
  auto source = as<float>(runInit(sourcePlan, 9)[0].params[0]);
  Attrs transpose{{"source_shape", std::vector<int64_t>{5, 3}},
                  {"index_map", std::vector<int64_t>{2, 2, 0, 1, 2, 0, 0}}};
  std::vector<std::byte> one;
  for (int64_t n = 1; n <= 5; ++n) {
    INFO("world size " << n);
    Plan plan = generatePlan(n, {3, 5}, "uniform", DType::F32, transpose);
    auto ranks = runInit(plan, 9);
    std::vector<std::byte> full = concatenated(plan, ranks, 0);
    if (n == 1) one = full;
    CHECK(full == one);
    CHECK(paddingIsZero(plan, ranks, 0));
    auto values = as<float>(full);
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 5; ++j) REQUIRE(values[i * 5 + j] == source[j * 3 + i]);
  }
  // Without index_map but a larger source_shape: identity map, a corner slice.
  Plan bigger = generatePlan(1, {6, 4}, "arange");
  auto big = as<float>(runInit(bigger, 0)[0].params[0]);
  for (int64_t n = 1; n <= 4; ++n) {
    Plan plan = generatePlan(n, {3, 2}, "arange", DType::F32,
                             {{"source_shape", std::vector<int64_t>{6, 4}}});
    auto values = as<float>(concatenated(plan, runInit(plan, 0), 0));
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 2; ++j) CHECK(values[i * 2 + j] == big[i * 4 + j]);
  }
  // More than one 4096-element block, sharded at an odd offset.
  Plan wide = generatePlan(1, {70, 130}, "normal", DType::F32,
                           {{"source_shape", std::vector<int64_t>{130, 70}},
                            {"index_map", std::vector<int64_t>{2, 2, 0, 1, 2, 0, 0}}});
  auto wideOne = runInit(wide, 3)[0].params[0];
  Plan wide3 = generatePlan(3, {70, 130}, "normal", DType::F32,
                            {{"source_shape", std::vector<int64_t>{130, 70}},
                             {"index_map", std::vector<int64_t>{2, 2, 0, 1, 2, 0, 0}}});
  CHECK(concatenated(wide3, runInit(wide3, 3), 0) == wideOne);
}

TEST_CASE("generate: bad attributes and malformed index_maps name the instruction",
          "[exec][generate]") {
  auto failure = [](Plan plan) {
    try {
      runInit(plan);
    } catch (const RuntimeError &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string place = "function 'init' instruction #1 'generate' at init.py:2: ";
  CHECK_THAT(failure(generatePlan(2, {3, 5}, "uniform", DType::F32,
                                  {{"source_shape", std::vector<int64_t>{5, 3}},
                                   {"index_map", std::vector<int64_t>{1, 2, 0, 1}}})),
             Contains(place + "malformed index_map: entry 0: 1 results, but source_shape has "
                              "rank 2"));
  CHECK_THAT(failure(generatePlan(2, {3, 5}, "uniform", DType::F32,
                                  {{"source_shape", std::vector<int64_t>{5, 3}},
                                   {"index_map", std::vector<int64_t>{2, 2, 0, 1, 2, 0, 5}}})),
             Contains(place + "malformed index_map: entry 6: dim 5 out of range"));
  // Identity map onto a smaller source: out of range at run time.
  CHECK_THAT(failure(generatePlan(1, {3, 5}, "uniform", DType::F32,
                                  {{"source_shape", std::vector<int64_t>{3, 4}}})),
             Contains(place + "index_map sends output element [0, 4] to [0, 4], outside "
                              "source_shape [3, 4]"));
  CHECK_THAT(failure(generatePlan(1, {3, 5}, "uniform", DType::F32,
                                  {{"source_shape", std::vector<int64_t>{15}}})),
             Contains("has another rank than the output"));
  CHECK_THAT(failure(generatePlan(1, {3, 5}, "uniform", DType::F32,
                                  {{"index_map", std::string("t")}})),
             Contains(place + "attribute 'index_map' must be an integer list"));
  CHECK_THAT(failure(generatePlan(1, {3, 5}, "gaussian")),
             Contains(place + "unknown generator kind 'gaussian'"));
  Plan noLow = generatePlan(1, {3, 5}, "uniform");
  initOf(noLow).body[1].attrs.erase("low");
  CHECK_THAT(failure(noLow), Contains(place + "needs a float attribute 'low'"));
  Plan badPosition = generatePlan(1, {3, 5}, "uniform", DType::F32, {{"position", int64_t(-1)}});
  CHECK_THAT(failure(badPosition), Contains(place + "position -1 is out of range"));
  Plan noStream = generatePlan(1, {3, 5}, "normal");
  initOf(noStream).body[1].attrs.erase("stream");
  CHECK_THAT(failure(noStream), Contains(place + "needs a string attribute 'stream'"));
}

TEST_CASE("pointwise ops touch only valid rows; padding stays zero", "[exec][pointwise]") {
  struct Op {
    OpCode op;
    Attrs attrs;
  };
  const std::vector<Op> chain = {{OpCode::MulScalar, {{"value", 2.0}}},
                                 {OpCode::AddScalar, {{"value", 0.25}}},
                                 {OpCode::SubScalar, {{"value", 1.0}}},
                                 {OpCode::DivScalar, {{"value", 4.0}}},
                                 {OpCode::Clamp, {{"min", -0.5}, {"max", 0.75}}},
                                 {OpCode::Neg, {}},
                                 {OpCode::Erfinv, {}},
                                 {OpCode::AddScalar, {{"value", 3.0}}},
                                 {OpCode::Sqrt, {}},
                                 {OpCode::InitExp, {}},
                                 {OpCode::InitLog, {}},
                                 {OpCode::InitExpm1, {}},
                                 {OpCode::InverseSoftplus, {}}};
  auto build = [&](int64_t n, size_t steps, std::vector<int64_t> shape) {
    Plan plan = generatePlan(n, shape, "uniform");
    // 1.0 would leave padding zero anyway: make padding rows non-zero-prone.
    for (size_t i = 0; i < steps; ++i) emit(plan, chain[i].op, {0}, {0}, chain[i].attrs);
    return plan;
  };
  for (std::vector<int64_t> shape : {std::vector<int64_t>{7, 3}, {2, 3}}) {
    auto reference = runInit(build(1, chain.size(), shape), 5)[0].params[0];
    for (int64_t n = 2; n <= 5; ++n) {
      INFO("world size " << n << " d0 " << shape[0]);
      Plan plan = build(n, chain.size(), shape);
      auto ranks = runInit(plan, 5);
      CHECK(concatenated(plan, ranks, 0) == reference);
      CHECK(paddingIsZero(plan, ranks, 0));  // add_scalar 3 would make padding 3
    }
  }
  // The values follow the ops: mul_scalar 2 doubles exactly.
  auto base = as<float>(runInit(build(3, 0, {7, 3}), 5)[0].params[0]);
  auto doubled = as<float>(runInit(build(3, 1, {7, 3}), 5)[0].params[0]);
  for (size_t i = 0; i < base.size(); ++i) CHECK(doubled[i] == 2 * base[i]);
  // In place only.
  Plan notInPlace = build(1, 0, {2, 2});
  int32_t other = addBuffer(notInPlace, "t", {2, 2});
  emit(notInPlace, OpCode::Alloc, {}, {other});
  emit(notInPlace, OpCode::Neg, {0}, {other});
  CHECK_THROWS_WITH(runInit(notInPlace),
                    Contains("instruction #3 'neg' at init.py:4: works in place"));
  Plan noValue = build(1, 0, {2, 2});
  emit(noValue, OpCode::MulScalar, {0}, {0});
  CHECK_THROWS_WITH(runInit(noValue), Contains("needs a float attribute 'value'"));
}

namespace {

/// Non-shardable init of param "w": the owner allocates a padded full buffer,
/// fills it (generate or orthogonal), scatters it and frees it.
Plan ownerPlan(int64_t n, std::vector<int64_t> shape, int64_t owner, const std::string &how) {
  Plan plan = emptyPlan(n);
  int32_t p = addParam(plan, "w", shape);
  const Param &param = plan.params[0];
  int32_t full = addBuffer(plan, "w.full", shape, DType::F32, param.gatheredBytes(n));
  const Attrs onOwner{{"rank", owner}};
  emit(plan, OpCode::Alloc, {}, {p});
  emit(plan, OpCode::Alloc, {}, {full}, onOwner);
  if (how == "orthogonal")
    emit(plan, OpCode::Orthogonal, {}, {full},
         {{"gain", 1.0}, {"stream", std::string("w")}, {"position", int64_t(0)}, {"rank", owner}});
  else {
    Attrs attrs = generator(how, "w");
    attrs["rank"] = owner;
    emit(plan, OpCode::Generate, {}, {full}, attrs);
  }
  emit(plan, OpCode::Scatter, {full}, {p}, {{"root", owner}});
  emit(plan, OpCode::Free, {full}, {}, onOwner);
  return plan;
}

}  // namespace

TEST_CASE("rank-conditional alloc/free: only the owner holds the full tensor",
          "[exec][rank]") {
  for (int64_t n = 1; n <= 5; ++n)
    for (int64_t owner = 0; owner < n; ++owner) {
      INFO("world size " << n << " owner " << owner);
      Plan plan = ownerPlan(n, {7, 3}, owner, "uniform");
      auto ranks = runInit(plan, 11);
      checkPredictedEqualsMeasured(ranks);
      const Param &p = plan.params[0];
      for (int64_t r = 0; r < n; ++r) {
        INFO("rank " << r);
        int64_t expected = p.localBytes() + (r == owner ? p.gatheredBytes(n) : 0);
        CHECK(ranks[r].peakBytes == expected);
        CHECK(ranks[r].endBytes == p.localBytes());
        CHECK(ranks[r].predicted.peakBytes == expected);
      }
      // The scattered values equal generating straight into the shards.
      Plan direct = generatePlan(n, {7, 3}, "uniform");
      auto directRanks = runInit(direct, 11);
      CHECK(concatenated(plan, ranks, 0) == concatenated(direct, directRanks, 0));
      CHECK(paddingIsZero(plan, ranks, 0));
    }
  // Predictions are per rank in runLocal too.
  Plan plan = ownerPlan(3, {7, 3}, 1, "normal");
  shardc::runtime::RunOptions options;
  options.seed = 4;
  options.gatherParams = true;
  auto result = shardc::runtime::runLocal(plan, options);
  for (const auto &r : result.ranks) {
    CHECK(r.init.peakBytes == r.init.predictedPeakBytes);
    CHECK(r.init.liveAtPeak == r.init.predictedLiveAtPeak);
  }
  CHECK(result.ranks[1].init.peakBytes > result.ranks[0].init.peakBytes);
  Plan direct = generatePlan(1, {7, 3}, "normal");
  CHECK(result.params[0].data == runInit(direct, 4)[0].params[0]);
}

TEST_CASE("scatter: uneven rows and d0 < N at N = 1..5", "[exec][scatter]") {
  for (std::vector<int64_t> shape :
       {std::vector<int64_t>{7, 3}, {3, 2}, {1, 5}, {4, 1, 2}, {9}})
    for (int64_t n = 1; n <= 5; ++n) {
      INFO("world size " << n << " d0 " << shape[0]);
      Plan plan = ownerPlan(n, shape, n - 1, "arange");
      auto ranks = runInit(plan);
      auto values = as<float>(concatenated(plan, ranks, 0));
      REQUIRE(static_cast<int64_t>(values.size()) == shardc::plan::numElements(shape));
      for (size_t i = 0; i < values.size(); ++i) REQUIRE(values[i] == static_cast<float>(i));
      CHECK(paddingIsZero(plan, ranks, 0));
      checkPredictedEqualsMeasured(ranks);
    }
}

TEST_CASE("scatter and rank attributes: misuse is rejected clearly", "[exec][scatter]") {
  Plan plan = ownerPlan(2, {4, 2}, 0, "fill");
  initOf(plan).buffers[1].bytes = 4 * 2 * 4 - 4;
  CHECK_THROWS_WITH(runInit(plan), Contains("is less than the logical size"));
  plan = ownerPlan(3, {4, 2}, 0, "fill");  // chunk 2: 6 padded rows
  initOf(plan).buffers[1].bytes = 4 * 2 * 4;
  CHECK_THROWS_WITH(runInit(plan),
                    Contains("instruction #3 'scatter' at init.py:4: input 'w.full' has 32 "
                             "bytes; a scatter source holds world_size * chunk_rows padded rows"));
  plan = ownerPlan(2, {4, 2}, 0, "fill");
  initOf(plan).body[3].attrs["root"] = int64_t(2);
  CHECK_THROWS_WITH(runInit(plan), Contains("root 2 out of range for world size 2"));
  plan = ownerPlan(2, {4, 2}, 0, "fill");
  initOf(plan).body[3].attrs["rank"] = int64_t(0);
  CHECK_THROWS_WITH(shardc::runtime::checkPlan(plan),
                    Contains("functions[0].body[3].attrs.rank: collective 'scatter' runs on "
                             "every rank"));
  plan = ownerPlan(2, {4, 2}, 0, "fill");
  initOf(plan).body[1].attrs["rank"] = int64_t(2);
  CHECK_THROWS_WITH(runInit(plan),
                    Contains("functions[0].body[1].attrs.rank: rank 2 out of range for world "
                             "size 2"));
  initOf(plan).body[1].attrs["rank"] = 1.0;
  CHECK_THROWS_WITH(shardc::runtime::checkPlan(plan), Contains("must be an integer"));
  // The owner frees what only it allocated: another rank's free is skipped,
  // but an unconditional free on a non-owner is an error in both halves.
  plan = ownerPlan(2, {4, 2}, 0, "fill");
  initOf(plan).body[4].attrs.erase("rank");
  CHECK_THROWS_WITH(shardc::runtime::predictMemory(plan, "init", 1),
                    Contains("instruction #4 'free' at init.py:5: buffer 'w.full' is not "
                             "allocated"));
  CHECK_NOTHROW(shardc::runtime::predictMemory(plan, "init", 0));
  // Scatter into a replicated param.
  plan = emptyPlan(2);
  int32_t p = addParam(plan, "b", {4}, DType::F32, /*sharded=*/false);
  int32_t full = addBuffer(plan, "b.full", {4});
  emit(plan, OpCode::Alloc, {}, {p});
  emit(plan, OpCode::Alloc, {}, {full});
  emit(plan, OpCode::Scatter, {full}, {p}, {{"root", int64_t(0)}});
  CHECK_THROWS_WITH(runInit(plan), Contains("param 'b' is replicated"));
}

namespace {

/// max |G - I| where G = M M^T (rowsOrthonormal) or M^T M, M rows x cols.
double gramError(const std::vector<float> &m, int64_t rows, int64_t cols, double gain) {
  const bool byRows = rows <= cols;
  const int64_t k = byRows ? rows : cols, len = byRows ? cols : rows;
  double worst = 0;
  for (int64_t a = 0; a < k; ++a)
    for (int64_t b = 0; b < k; ++b) {
      double dot = 0;
      for (int64_t i = 0; i < len; ++i) {
        double x = byRows ? m[a * cols + i] : m[i * cols + a];
        double y = byRows ? m[b * cols + i] : m[i * cols + b];
        dot += x * y;
      }
      worst = std::max(worst, std::abs(dot / (gain * gain) - (a == b ? 1.0 : 0.0)));
    }
  return worst;
}

}  // namespace

TEST_CASE("orthogonal + scatter: orthonormal, world-size invariant, exact memory",
          "[exec][orthogonal]") {
  for (std::vector<int64_t> shape :
       {std::vector<int64_t>{5, 3}, {3, 5}, {64, 64}, {8, 3, 3, 3}}) {
    const int64_t rows = shape[0], cols = shardc::plan::numElements(shape) / rows;
    INFO(rows << " x " << cols);
    std::vector<std::byte> one;
    for (int64_t n : {1, 2, 3, 5}) {
      INFO("world size " << n);
      const int64_t owner = n / 2;
      Plan plan = ownerPlan(n, shape, owner, "orthogonal");
      initOf(plan).body[2].attrs["gain"] = 1.5;
      auto ranks = runInit(plan, 21);
      checkPredictedEqualsMeasured(ranks);
      std::vector<std::byte> full = concatenated(plan, ranks, 0);
      if (n == 1) one = full;
      CHECK(full == one);
      CHECK(paddingIsZero(plan, ranks, 0));
      CHECK(gramError(as<float>(full), rows, cols, 1.5) < 1e-5);
      const Param &p = plan.params[0];
      // float32: factored in place; only the QR scalars are extra.
      const int64_t qr = shardc::runtime::orthogonalWorkBytes(shape, shardc::plan::DType::F32);
      CHECK(qr == 3 * std::min(rows, cols) * 8);
      for (int64_t r = 0; r < n; ++r) {
        INFO("rank " << r);
        CHECK(ranks[r].peakBytes ==
              p.localBytes() + (r == owner ? p.gatheredBytes(n) + qr : 0));
        if (r == owner) {
          REQUIRE(ranks[r].liveAtPeak.size() == 3);
          CHECK(ranks[r].liveAtPeak[2] ==
                shardc::runtime::LiveAllocation{"w.full.qr", Category::Activation, qr});
        }
      }
    }
  }
  // torch requires at least 2 dims.
  Plan plan = emptyPlan(1);
  int32_t v = addBuffer(plan, "v", {6});
  emit(plan, OpCode::Alloc, {}, {v});
  emit(plan, OpCode::Orthogonal, {}, {v},
       {{"gain", 1.0}, {"stream", std::string("v")}, {"position", int64_t(0)}});
  CHECK_THROWS_WITH(runInit(plan),
                    Contains("instruction #1 'orthogonal' at init.py:2: only tensors with 2 or "
                             "more dimensions are supported, 'v' is [6]"));
  CHECK(shardc::runtime::predictMemory(plan, "init", 0).peakBytes == 24);
  // A param buffer is refused: orthogonal writes a full tensor.
  Plan onParam = emptyPlan(2);
  int32_t w = addParam(onParam, "w", {4, 4});
  emit(onParam, OpCode::Alloc, {}, {w});
  emit(onParam, OpCode::Orthogonal, {}, {w},
       {{"gain", 1.0}, {"stream", std::string("w")}, {"position", int64_t(0)}});
  CHECK_THROWS_WITH(runInit(onParam), Contains("is a param buffer"));
}

TEST_CASE("generate with index_map: threads change nothing, errors included",
          "[exec][generate]") {
  Attrs transpose{{"source_shape", std::vector<int64_t>{301, 300}},
                  {"index_map", std::vector<int64_t>{2, 2, 0, 1, 2, 0, 0}}};
  Plan one = generatePlan(1, {300, 301}, "uniform", DType::F32, transpose);
  auto single = runInit(one, 8, 1)[0].params[0];
  CHECK(runInit(one, 8, 3)[0].params[0] == single);
  Plan two = generatePlan(2, {300, 301}, "uniform", DType::F32, transpose);
  CHECK(concatenated(two, runInit(two, 8, 4), 0) == single);
  // The first bad element is reported whatever the thread count: the
  // source is one column short, so output row 0, column 300 fails first.
  Plan bad = generatePlan(1, {300, 301}, "uniform", DType::F32,
                          {{"source_shape", std::vector<int64_t>{300, 300}},
                           {"index_map", std::vector<int64_t>{2, 2, 0, 1, 2, 0, 0}}});
  for (int threads : {1, 4})
    CHECK_THROWS_WITH(runInit(bad, 8, threads),
                      Contains("index_map sends output element [0, 300] to [300, 0], outside "
                               "source_shape [300, 300]"));
}

TEST_CASE("init instructions survive the Plan JSON round trip", "[exec][json]") {
  Plan plan = ownerPlan(3, {5, 3}, 2, "orthogonal");
  int32_t t = addParam(plan, "t", {3, 5});
  emit(plan, OpCode::Alloc, {}, {t});
  Attrs attrs = generator("trunc_normal", "t", 1);
  attrs["source_shape"] = std::vector<int64_t>{5, 3};
  attrs["index_map"] = std::vector<int64_t>{2, 2, 0, 1, 2, 0, 0};
  emit(plan, OpCode::Generate, {}, {t}, attrs);
  emit(plan, OpCode::MulScalar, {t}, {t}, {{"value", 0.5}});
  Plan back = shardc::runtime::planFromJson(shardc::runtime::planToJson(plan), "round.json");
  CHECK(shardc::runtime::planToJson(back) == shardc::runtime::planToJson(plan));
  auto a = runInit(plan, 3), b = runInit(back, 3);
  for (size_t i = 0; i < 2; ++i) CHECK(concatenated(plan, a, i) == concatenated(back, b, i));
  // A bad rank attribute is named by its JSON path.
  initOf(plan).body[1].attrs["rank"] = int64_t(7);
  CHECK_THROWS_WITH(
      shardc::runtime::planFromJson(shardc::runtime::planToJson(plan), "bad.json"),
      Contains("functions[0].body[1].attrs.rank: rank 7 out of range for world size 3"));
}
