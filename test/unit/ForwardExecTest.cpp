// Forward plans through the executor: one all_gather per FSDP unit with
// per-param aliases into the unit buffer, alias rules, int64 data, and
// predicted == measured memory with aliases.
#include "runtime/DeterministicInput.h"
#include "runtime/HalfFloat.h"
#include "runtime/LocalCommunicator.h"
#include "runtime/LocalRun.h"
#include "runtime/MemoryModel.h"
#include "runtime/Philox.h"
#include "runtime/PlanCheck.h"
#include "runtime/PlanJson.h"
#include "runtime/RuntimeError.h"
#include "runtime/Safetensors.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <thread>

using namespace shardc::runtime;
using namespace shardc::plan;
using Catch::Contains;

namespace {

struct UnitParam {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};

const std::vector<UnitParam> kUnit = {
    {"h.0.a", DType::F32, {5, 3}}, {"h.0.b", DType::F32, {7}}, {"h.0.c", DType::BF16, {3, 2}}};

int32_t addBuffer(Function &f, Buffer b) {
  b.id = static_cast<int32_t>(f.buffers.size());
  f.buffers.push_back(b);
  return b.id;
}

/// init: every param = arange over its full flat index (sharded on dim 0).
/// forward(x [2, 3] f32): one all_gather of the unit into one buffer, an
/// alias per param with its full shape, strided copies of each full tensor
/// to an output, linear(x, a) through an alias, and a reshape alias of an
/// output.
Plan unitPlan(int64_t n) {
  Plan plan;
  plan.worldSize = n;
  Function init, forward;
  init.name = "init";
  forward.name = "forward";
  const int32_t x = addBuffer(forward, {0, "x", DType::F32, {2, 3}, 24, Category::IO});
  forward.inputs = {x};
  std::vector<int32_t> shards;
  std::vector<int64_t> offsets;
  int64_t unitBytes = 0;
  for (size_t i = 0; i < kUnit.size(); ++i) {
    Param p;
    p.name = kUnit[i].name;
    p.dtype = kUnit[i].dtype;
    p.shape = kUnit[i].shape;
    p.device = "cpu";
    p.unit = "h.0";
    p.chunkRows = (p.shape[0] + n - 1) / n;
    plan.params.push_back(p);
    const int32_t id = addBuffer(init, {0, p.name, p.dtype, p.localShape(), p.localBytes(),
                                        Category::Parameter, static_cast<int32_t>(i)});
    init.body.push_back({OpCode::Alloc, {}, {id}, {}, "init.py"});
    init.body.push_back({OpCode::Generate, {}, {id},
                         {{"kind", std::string("arange")}, {"start", 0.0}, {"step", 1.0},
                          {"stream", p.name}, {"position", int64_t(0)}},
                         "init.py"});
    shards.push_back(addBuffer(forward, {0, p.name, p.dtype, p.localShape(), p.localBytes(),
                                         Category::Parameter, static_cast<int32_t>(i)}));
    offsets.push_back(unitBytes);
    unitBytes += p.gatheredBytes(n);
  }
  const int32_t unit =
      addBuffer(forward, {0, "h.0.gathered", DType::F32, {unitBytes / 4}, unitBytes, Category::Gathered});
  forward.body.push_back({OpCode::Alloc, {}, {unit}, {}, "fwd.py:1"});
  forward.body.push_back({OpCode::AllGather, shards, {unit}, {{"offsets", offsets}}, "fwd.py:1"});
  std::vector<int32_t> outputs;
  for (size_t i = 0; i < kUnit.size(); ++i) {
    const UnitParam &u = kUnit[i];
    const int64_t bytes = numElements(u.shape) * dtypeSize(u.dtype);
    const int32_t full = addBuffer(forward, {0, u.name + ".full", u.dtype, u.shape, bytes,
                                             Category::Gathered, std::nullopt, unit, offsets[i]});
    const int32_t out =
        addBuffer(forward, {0, u.name + ".out", u.dtype, u.shape, bytes, Category::Activation});
    std::vector<int64_t> strides(u.shape.size(), 1);
    for (size_t d = u.shape.size() - 1; d-- > 0;) strides[d] = strides[d + 1] * u.shape[d + 1];
    forward.body.push_back({OpCode::Alloc, {}, {out}, {}, "fwd.py:2"});
    forward.body.push_back({OpCode::StridedCopy, {full}, {out}, {{"strides", strides}}, "fwd.py:2"});
    outputs.push_back(out);
  }
  const int32_t y = addBuffer(forward, {0, "y", DType::F32, {2, 5}, 40, Category::Activation});
  forward.body.push_back({OpCode::Alloc, {}, {y}, {}, "fwd.py:3"});
  forward.body.push_back({OpCode::Linear, {x, forward.buffers[shards.size() + 2].id}, {y}, {}, "fwd.py:3"});
  forward.body.push_back({OpCode::Free, {unit}, {}, {}, "fwd.py:4"});
  // A reshape without copy: y viewed as [10].
  const int32_t yFlat = addBuffer(forward, {0, "y.flat", DType::F32, {10}, 40,
                                            Category::Activation, std::nullopt, y, 0});
  outputs.push_back(yFlat);
  forward.outputs = outputs;
  plan.functions = {init, forward};
  return plan;
}

}  // namespace

TEST_CASE("one all_gather per unit fills every param's full tensor through aliases",
          "[forward][alias]") {
  for (int64_t n = 1; n <= 5; ++n) {
    INFO("world size " << n);
    Plan plan = unitPlan(n);
    REQUIRE(plan.functions[1].buffers[5].name == "h.0.a.full");
    REQUIRE_NOTHROW(checkPlan(plan));
    // The JSON form keeps the alias fields.
    Plan again = planFromJson(planToJson(plan), "unit.json");
    CHECK(again.functions[1].buffers[5].aliasOf == plan.functions[1].buffers[5].aliasOf);
    CHECK(again.functions[1].buffers[9].byteOffset == plan.functions[1].buffers[9].byteOffset);
    CHECK(planToJson(again) == planToJson(plan));

    RunOptions options;
    options.inputs = {makeDeterministicInput("x", DType::F32, {2, 3}, 1)};
    RunResult result = runLocal(plan, options);
    REQUIRE(result.outputs.size() == 4);
    for (size_t i = 0; i < kUnit.size(); ++i) {
      const HostTensor &t = result.outputs[i];
      for (int64_t e = 0; e < t.numElements(); ++e) {
        const double v = t.dtype == DType::F32 ? t.as<float>()[e]
                                               : bfloat16BitsToFloat(t.as<uint16_t>()[e]);
        REQUIRE(v == double(e));
      }
    }
    // y = x a^T with a[r][c] = 3r + c.
    const HostTensor &y = result.outputs[3];
    CHECK(y.shape == std::vector<int64_t>{10});
    const float *xv = options.inputs[0].as<float>();
    for (int m = 0; m < 2; ++m)
      for (int r = 0; r < 5; ++r) {
        double want = 0;
        for (int c = 0; c < 3; ++c) want += xv[m * 3 + c] * double(3 * r + c);
        REQUIRE(std::abs(y.as<float>()[m * 5 + r] - want) < 1e-5);
      }
    // Aliases cost nothing: predicted == measured, and no alias is live at peak.
    for (const RankReport &r : result.ranks) {
      REQUIRE(r.forward);
      CHECK(r.forward->peakBytes == r.forward->predictedPeakBytes);
      CHECK(r.forward->liveAtPeak == r.forward->predictedLiveAtPeak);
      CHECK(r.forward->endBytes == r.forward->predictedEndBytes);
      for (const LiveAllocation &a : r.forward->liveAtPeak)
        CHECK(a.label.find(".full") == std::string::npos);
    }
    int64_t unitBytes = 0;
    for (const Param &p : plan.params) unitBytes += p.gatheredBytes(n);
    int64_t params = 0;
    for (const Param &p : plan.params) params += p.localBytes();
    CHECK(result.ranks[0].forward->peakBytes == params + 24 + unitBytes + 60 + 28 + 12 + 40);
  }
}

TEST_CASE("alias misuse is rejected with its place", "[forward][alias]") {
  auto fresh = [] { return unitPlan(2); };
  auto errorOf = [](const Plan &plan) {
    try {
      checkPlan(plan);
    } catch (const RuntimeError &e) {
      return std::string(e.what());
    }
    return std::string();
  };
  {
    Plan plan = fresh();
    plan.functions[1].body.push_back({OpCode::Alloc, {}, {5}, {}, "bad.py"});
    CHECK_THAT(errorOf(plan), Contains("'alloc' of alias 'h.0.a.full'"));
  }
  {
    Plan plan = fresh();
    plan.functions[1].body.push_back({OpCode::Free, {12}, {}, {}, "bad.py"});
    CHECK_THAT(errorOf(plan), Contains("'free' of alias 'y.flat'"));
  }
  {
    Plan plan = fresh();
    plan.functions[1].buffers[9].byteOffset += 4096;
    CHECK_THAT(errorOf(plan), Contains("functions[1].buffers[9].byte_offset") &&
                                  Contains("its base 'h.0.gathered' has"));
  }
  {
    Plan plan = fresh();
    plan.functions[1].buffers[5].byteOffset = 2;  // float32 at an odd offset
    CHECK_THAT(errorOf(plan), Contains("not a multiple of its element size 4"));
  }
  {
    Plan plan = fresh();
    plan.functions[1].buffers[5].bytes += 4;
    CHECK_THAT(errorOf(plan), Contains("logical size"));
  }
  {
    Plan plan = fresh();
    plan.functions[1].buffers[4].aliasOf = 5;  // unit -> a.full -> unit
    plan.functions[1].buffers[4].bytes = plan.functions[1].buffers[4].shape[0] * 4;
    CHECK_THAT(errorOf(plan), Contains("cycle"));
  }
  {
    Plan plan = fresh();
    plan.functions[1].inputs = {0, 12};
    CHECK_THAT(errorOf(plan), Contains("cannot be a function input"));
  }
  {
    // Using an alias after its base was freed: the executor names the buffer.
    Plan plan = fresh();
    auto &body = plan.functions[1].body;
    const Instruction copy = {OpCode::StridedCopy, {5}, {6}, {{"strides", std::vector<int64_t>{3, 1}}},
                              "late.py:9"};
    body.push_back(copy);  // h.0.a.out is still allocated; the unit is not
    RunOptions options;
    options.inputs = {makeDeterministicInput("x", DType::F32, {2, 3}, 1)};
    CHECK_THROWS_WITH(runLocal(plan, options),
                      Contains("at late.py:9") && Contains("'h.0.gathered' is used while not allocated"));
  }
  {
    // JSON: byte_offset without alias_of.
    Plan plan = fresh();
    std::string json = planToJson(plan);
    const std::string key = "\"category\": \"io\"";
    auto at = json.find(key);
    REQUIRE(at != std::string::npos);
    json.insert(at + key.size(), ", \"byte_offset\": 0");
    CHECK_THROWS_WITH(planFromJson(json, "p.json"),
                      Contains("functions[1].buffers[0].byte_offset") &&
                          Contains("only an alias"));
  }
}

TEST_CASE("allGatherMany: uneven parts, one collective", "[forward][comm]") {
  for (int64_t n = 1; n <= 5; ++n) {
    LocalGroup group(n, std::chrono::seconds(20));
    const std::vector<size_t> sizes = {3, 0, 17};
    std::vector<std::vector<std::vector<unsigned char>>> recv(n);
    std::vector<std::thread> threads;
    for (int64_t r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        LocalCommunicator comm(group, r);
        std::vector<std::vector<unsigned char>> send;
        std::vector<AllGatherPart> parts;
        recv[r].resize(sizes.size());
        for (size_t i = 0; i < sizes.size(); ++i) {
          send.emplace_back(sizes[i]);
          for (size_t b = 0; b < sizes[i]; ++b) send[i][b] = static_cast<unsigned char>(r * 31 + i * 7 + b);
          recv[r][i].assign(sizes[i] * n, 0xee);
        }
        for (size_t i = 0; i < sizes.size(); ++i)
          parts.push_back({send[i].data(), sizes[i], recv[r][i].data()});
        comm.allGatherMany(parts);
      });
    for (auto &t : threads) t.join();
    for (int64_t r = 0; r < n; ++r)
      for (size_t i = 0; i < sizes.size(); ++i)
        for (int64_t from = 0; from < n; ++from)
          for (size_t b = 0; b < sizes[i]; ++b)
            REQUIRE(recv[r][i][from * sizes[i] + b] ==
                    static_cast<unsigned char>(from * 31 + i * 7 + b));
  }
  // Mismatched part counts abort every rank with a reason.
  LocalGroup group(2, std::chrono::seconds(20));
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      LocalCommunicator comm(group, r);
      unsigned char send[4] = {}, out[8];
      std::vector<AllGatherPart> parts(static_cast<size_t>(r + 1), AllGatherPart{send, 4, out});
      try {
        comm.allGatherMany(parts);
      } catch (const RuntimeError &e) {
        errors[r] = e.what();
      }
    });
  for (auto &t : threads) t.join();
  CHECK_THAT(errors[0], Contains("part count mismatch"));
  CHECK_THAT(errors[1], Contains("part count mismatch"));
}

TEST_CASE("int64 tensors: safetensors round trip and deterministic ids", "[forward][int64]") {
  CHECK(parseDType("int64") == DType::I64);
  CHECK(dtypeSize(DType::I64) == 8);
  HostTensor ids = makeDeterministicInput("ids", DType::I64, {4, 33}, 7, 50257);
  for (int64_t i = 0; i < ids.numElements(); ++i) {
    REQUIRE(ids.as<int64_t>()[i] >= 0);
    REQUIRE(ids.as<int64_t>()[i] < 50257);
  }
  // The documented recipe (docs/cli.md), recomputed here from its parts:
  // Philox-4x32-10 (checked against Random123's vectors in PhiloxTest) on
  // counter (i, 0, FNV-1a-32(name), 0) under key (seed, 0); the first two
  // words as a 64-bit r; the id is floor(r * bound / 2^64).
  uint32_t fnv = 2166136261u;
  for (char c : std::string("ids")) fnv = (fnv ^ static_cast<unsigned char>(c)) * 16777619u;
  for (int64_t i = 0; i < ids.numElements(); ++i) {
    const shardc::runtime::philox::Counter words = shardc::runtime::philox::philox4x32_10(
        {{static_cast<uint32_t>(i), 0, fnv, 0}}, {{7, 0}});
    const uint64_t r = words.v[0] | (static_cast<uint64_t>(words.v[1]) << 32);
    const auto want = static_cast<int64_t>((static_cast<unsigned __int128>(r) * 50257u) >> 64);
    REQUIRE(ids.as<int64_t>()[i] == want);
  }
  // The seed and the name are inputs of the recipe: changing either changes the ids.
  CHECK(ids.data != makeDeterministicInput("ids", DType::I64, {4, 33}, 8, 50257).data);
  CHECK(ids.data != makeDeterministicInput("idx", DType::I64, {4, 33}, 7, 50257).data);
  HostTensor big = makeDeterministicInput("t", DType::I64, {64}, 7);
  int64_t maxSeen = 0;
  for (int64_t i = 0; i < 64; ++i) maxSeen = std::max(maxSeen, big.as<int64_t>()[i]);
  CHECK(maxSeen < kDefaultIntInputBound);
  CHECK(maxSeen > 1000);
  CHECK_THROWS_WITH(makeDeterministicInput("x", DType::F32, {2}, 7, 10), Contains("integer bound"));

  const std::string path =
      (std::filesystem::temp_directory_path() / "shardc_int64_roundtrip.safetensors").string();
  HostTensor neg{"neg", DType::I64, {2}, {}};
  neg.data.resize(16);
  neg.as<int64_t>()[0] = -5;
  neg.as<int64_t>()[1] = int64_t(1) << 40;
  writeSafetensors(path, {ids, neg});
  SafetensorsContents back = readSafetensors(path);
  std::filesystem::remove(path);
  REQUIRE(back.tensors.size() == 2);
  CHECK(back.tensors[0].dtype == DType::I64);
  CHECK(back.tensors[0].data == ids.data);
  CHECK(back.tensors[1].as<int64_t>()[0] == -5);
  CHECK(back.tensors[1].as<int64_t>()[1] == int64_t(1) << 40);

  // makeDeterministicInputs: bounds by input name, unknown names rejected.
  Plan plan = unitPlan(1);
  CHECK_THROWS_WITH(makeDeterministicInputs(plan, 1, {{"x", 10}}),
                    Contains("not an int64 input of forward"));
}
