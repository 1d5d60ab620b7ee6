// indexmap::mapIndex (runtime/IndexMapProgram.h) is what a device runs to
// map a `generate`'s output elements through an index_map: it must agree
// with the host's IndexMap and mapFlatIndices on every element, mapping
// where they map and refusing where they throw (division by zero, int64
// overflow, out of the source). The executor core's one-launch path
// (Backend::generateMapped) must give the host path's values and errors.
#include "DeviceMappingCpuBackend.h"
#include "ExecTestUtil.h"

#include "runtime/InitOps.h"

#include <catch2/catch.hpp>

#include <limits>
#include <random>

using namespace shardc;
using namespace shardc::test::exec;
using runtime::IndexMap;
using runtime::IndexMapProgram;

namespace {

/// A random postfix expression over dims [0, rank) and constants chosen to
/// reach every failure: zero divisors, -1 against INT64_MIN, overflowing
/// products and sums.
void randomExpression(std::mt19937_64 &rng, size_t rank, int depth, std::vector<int64_t> &out) {
  static const int64_t constants[] = {0, 1, -1, 2, 3, -3, 5, 7, 16,
                                      std::numeric_limits<int64_t>::max(),
                                      std::numeric_limits<int64_t>::min(),
                                      int64_t(1) << 32, -(int64_t(1) << 40)};
  if (depth == 0 || rng() % 3 == 0) {
    const bool dim = rng() % 2;
    out.push_back(dim ? 0 : 1);
    out.push_back(dim ? static_cast<int64_t>(rng() % rank)
                      : constants[rng() % std::size(constants)]);
    return;
  }
  randomExpression(rng, rank, depth - 1, out);
  randomExpression(rng, rank, depth - 1, out);
  out.push_back(2 + static_cast<int64_t>(rng() % 5));  // add, mul, floordiv, mod, ceildiv
}

std::vector<int64_t> randomShape(std::mt19937_64 &rng, size_t rank) {
  std::vector<int64_t> shape(rank);
  for (int64_t &d : shape) d = 1 + static_cast<int64_t>(rng() % 5);
  return shape;
}

/// The host's answer for one flat index: the source index, or nullopt
/// where mapFlatIndices throws.
std::optional<int64_t> hostMap(const IndexMap &map, const std::vector<int64_t> &full,
                               const std::vector<int64_t> &source, int64_t flat) {
  int64_t out = 0;
  std::vector<int64_t> p;
  try {
    runtime::mapFlatIndices(map, full, source, flat, 1, &out, p, true);
  } catch (const runtime::RuntimeError &) {
    return std::nullopt;
  }
  return out;
}

}  // namespace

TEST_CASE("mapIndex agrees with the host's IndexMap on random maps", "[indexmap]") {
  std::mt19937_64 rng(2026);
  int64_t mapped = 0, refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const size_t rank = 1 + rng() % 3, sourceRank = 1 + rng() % 3;
    const std::vector<int64_t> full = randomShape(rng, rank);
    std::vector<int64_t> source = randomShape(rng, sourceRank);
    std::vector<int64_t> encoding = {static_cast<int64_t>(sourceRank)};
    for (size_t r = 0; r < sourceRank; ++r) {
      std::vector<int64_t> tokens;
      randomExpression(rng, rank, 3, tokens);
      encoding.push_back(static_cast<int64_t>(tokens.size()));
      encoding.insert(encoding.end(), tokens.begin(), tokens.end());
    }
    const IndexMap map = IndexMap::parse(encoding, rank, sourceRank);
    IndexMapProgram program;
    REQUIRE(map.toProgram(full, source, program));
    int64_t elements = 1;
    for (int64_t d : full) elements *= d;
    for (int64_t flat = 0; flat < elements; ++flat) {
      int64_t got = -1;
      const bool ok = runtime::indexmap::mapIndex(program, flat, &got);
      const std::optional<int64_t> want = hostMap(map, full, source, flat);
      INFO("trial " << trial << " flat " << flat);
      REQUIRE(ok == want.has_value());
      if (ok) REQUIRE(got == *want);
      ++(ok ? mapped : refused);
    }
  }
  // Both outcomes were exercised, plenty of each.
  CHECK(mapped > 1000);
  CHECK(refused > 1000);
}

TEST_CASE("mapIndex: the transpose and slice maps the compiler writes", "[indexmap]") {
  // [4, 6] output, [6, 4] source: s = (p1, p0).
  const IndexMap transpose = IndexMap::parse({2, 2, 0, 1, 2, 0, 0}, 2, 2);
  IndexMapProgram program;
  REQUIRE(transpose.toProgram({4, 6}, {6, 4}, program));
  for (int64_t flat = 0; flat < 24; ++flat) {
    int64_t source = -1;
    REQUIRE(runtime::indexmap::mapIndex(program, flat, &source));
    CHECK(source == (flat % 6) * 4 + flat / 6);
  }
  // The identity onto a smaller source refuses exactly the columns past it.
  const IndexMap identity = IndexMap::identity(2);
  REQUIRE(identity.toProgram({3, 5}, {3, 4}, program));
  for (int64_t flat = 0; flat < 15; ++flat) {
    int64_t source = -1;
    CHECK(runtime::indexmap::mapIndex(program, flat, &source) == (flat % 5 < 4));
  }
}

TEST_CASE("toProgram refuses maps over IndexMapProgram's room", "[indexmap]") {
  IndexMapProgram program;
  // Rank 9 > kMaxRank.
  const std::vector<int64_t> nine(9, 2);
  CHECK_FALSE(IndexMap::identity(9).toProgram(nine, nine, program));
  // More than kMaxTokens tokens: d0 + 0 + 0 + ... (two tokens per term).
  std::vector<int64_t> tokens = {0, 0};
  for (int i = 0; i < IndexMapProgram::kMaxTokens; ++i) tokens.insert(tokens.end(), {1, 0, 2});
  std::vector<int64_t> encoding = {1, static_cast<int64_t>(tokens.size())};
  encoding.insert(encoding.end(), tokens.begin(), tokens.end());
  CHECK_FALSE(IndexMap::parse(encoding, 1, 1).toProgram({4}, {4}, program));
  // A stack deeper than kMaxStack: 0 + (0 + (0 + ... + d0)).
  tokens.clear();
  for (int i = 0; i < IndexMapProgram::kMaxStack; ++i) tokens.insert(tokens.end(), {1, 0});
  tokens.insert(tokens.end(), {0, 0});
  for (int i = 0; i < IndexMapProgram::kMaxStack; ++i) tokens.push_back(2);
  encoding = {1, static_cast<int64_t>(tokens.size())};
  encoding.insert(encoding.end(), tokens.begin(), tokens.end());
  const IndexMap deep = IndexMap::parse(encoding, 1, 1);
  CHECK(deep.maxStack() > static_cast<size_t>(IndexMapProgram::kMaxStack));
  CHECK_FALSE(deep.toProgram({4}, {4}, program));
  // Within the room: accepted.
  CHECK(IndexMap::identity(8).toProgram(std::vector<int64_t>(8, 2), std::vector<int64_t>(8, 2),
                                        program));
}

namespace {

struct GenerateRun {
  std::vector<std::byte> bytes;  // the param's local storage
  std::string error;             // empty when init succeeded
  int mappedCalls = 0;
};

/// The plan's init at world size 1 on the CPU backend, or on one that maps
/// index_map indices as a device does.
GenerateRun runOn(const Plan &plan, bool deviceMapping) {
  runtime::CpuDevice device;
  runtime::CpuBackend host(device, 1);
  test::DeviceMappingCpuBackend mapping(device, 1);
  runtime::Backend &backend = deviceMapping ? static_cast<runtime::Backend &>(mapping) : host;
  runtime::LocalGroup group(1);
  runtime::LocalCommunicator comm(group, 0);
  runtime::RankState state(0);
  GenerateRun run;
  try {
    runtime::runFunction(plan, "init", backend, comm, state, {}, /*seed=*/3, "test");
    const runtime::DeviceBuffer *local = state.paramStorage(0);
    REQUIRE(local);
    run.bytes.assign(local->data(), local->data() + local->bytes());
  } catch (const runtime::RuntimeError &error) {
    run.error = error.what();
  }
  run.mappedCalls = mapping.mappedCalls;
  state.releaseAll();
  return run;
}

Plan mappedGeneratePlan(std::vector<int64_t> shape, std::vector<int64_t> sourceShape,
                        std::optional<std::vector<int64_t>> indexMap, DType dtype) {
  Plan plan = emptyPlan(1);
  const int32_t p = addParam(plan, "w", std::move(shape), dtype);
  emit(plan, OpCode::Alloc, {}, {p});
  std::map<std::string, AttrValue> attrs = {{"kind", std::string("normal")},
                                            {"stream", std::string("w")},
                                            {"position", int64_t(0)},
                                            {"mean", 0.0},
                                            {"std", 1.0},
                                            {"source_shape", std::move(sourceShape)}};
  if (indexMap) attrs["index_map"] = *indexMap;
  emit(plan, OpCode::Generate, {}, {p}, attrs);
  return plan;
}

}  // namespace

TEST_CASE("generate through a backend's own index mapping equals the host's mapping",
          "[indexmap][exec]") {
  for (DType dtype : {DType::F32, DType::F64, DType::BF16}) {
    INFO(plan::dtypeName(dtype));
    // A transpose, larger than one of the host path's 4096-index blocks.
    const Plan transpose =
        mappedGeneratePlan({70, 130}, {130, 70}, std::vector<int64_t>{2, 2, 0, 1, 2, 0, 0}, dtype);
    const GenerateRun host = runOn(transpose, false), device = runOn(transpose, true);
    REQUIRE(host.error.empty());
    REQUIRE(device.error.empty());
    CHECK(device.mappedCalls == 1);  // one call for all 9100 elements
    CHECK(device.bytes == host.bytes);
    // A corner of a larger source: the identity map, no index_map attribute.
    const Plan slice = mappedGeneratePlan({5, 3}, {9, 7}, std::nullopt, dtype);
    const GenerateRun hostSlice = runOn(slice, false), deviceSlice = runOn(slice, true);
    CHECK(deviceSlice.mappedCalls == 1);
    CHECK(deviceSlice.bytes == hostSlice.bytes);
  }
  // An element that does not map: the host path's words, and the place.
  const Plan outside = mappedGeneratePlan({3, 5}, {3, 4}, std::nullopt, DType::F32);
  const GenerateRun host = runOn(outside, false), device = runOn(outside, true);
  CHECK(device.mappedCalls == 1);
  REQUIRE_FALSE(host.error.empty());
  CHECK(device.error == host.error);
  CHECK_THAT(device.error,
             Catch::Contains("instruction #1 'generate'") &&
                 Catch::Contains("index_map sends output element [0, 4] to [0, 4], outside "
                                 "source_shape [3, 4]"));
}
