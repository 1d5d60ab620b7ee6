#include "TestPlans.h"
#include "runtime/PlanJson.h"
#include "runtime/RuntimeError.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>

using namespace shardc::runtime;
using namespace shardc::plan;
using Catch::Matchers::Contains;

namespace {

bool sameAttrs(const AttrValue &a, const AttrValue &b) {
  if (a.index() != b.index()) return false;
  if (auto *d = std::get_if<double>(&a)) {
    double e = std::get<double>(b);
    // Bitwise: -0.0 and NaN must survive too.
    return std::memcmp(d, &e, sizeof e) == 0 || (std::isnan(*d) && std::isnan(e));
  }
  return a == b;
}

void requireSamePlan(const Plan &a, const Plan &b) {
  REQUIRE(a.version == b.version);
  REQUIRE(a.worldSize == b.worldSize);
  REQUIRE(a.params.size() == b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i) {
    const Param &p = a.params[i], &q = b.params[i];
    CHECK(p.name == q.name);
    CHECK(p.dtype == q.dtype);
    CHECK(p.shape == q.shape);
    CHECK(p.device == q.device);
    CHECK(p.unit == q.unit);
    CHECK(p.isBuffer == q.isBuffer);
    CHECK(p.chunkRows == q.chunkRows);
    CHECK(p.persistent == q.persistent);
    CHECK(p.tiedNames == q.tiedNames);
  }
  REQUIRE(a.functions.size() == b.functions.size());
  for (size_t f = 0; f < a.functions.size(); ++f) {
    const Function &x = a.functions[f], &y = b.functions[f];
    CHECK(x.name == y.name);
    CHECK(x.inputs == y.inputs);
    CHECK(x.outputs == y.outputs);
    REQUIRE(x.buffers.size() == y.buffers.size());
    for (size_t i = 0; i < x.buffers.size(); ++i) {
      CHECK(x.buffers[i].id == y.buffers[i].id);
      CHECK(x.buffers[i].name == y.buffers[i].name);
      CHECK(x.buffers[i].dtype == y.buffers[i].dtype);
      CHECK(x.buffers[i].shape == y.buffers[i].shape);
      CHECK(x.buffers[i].bytes == y.buffers[i].bytes);
      CHECK(x.buffers[i].category == y.buffers[i].category);
      CHECK(x.buffers[i].param == y.buffers[i].param);
      CHECK(x.buffers[i].replicated == y.buffers[i].replicated);
    }
    REQUIRE(x.body.size() == y.body.size());
    for (size_t i = 0; i < x.body.size(); ++i) {
      CHECK(x.body[i].op == y.body[i].op);
      CHECK(x.body[i].inputs == y.body[i].inputs);
      CHECK(x.body[i].outputs == y.body[i].outputs);
      CHECK(x.body[i].loc == y.body[i].loc);
      REQUIRE(x.body[i].attrs.size() == y.body[i].attrs.size());
      for (const auto &[key, value] : x.body[i].attrs) {
        INFO("attr " << key);
        REQUIRE(y.body[i].attrs.count(key));
        CHECK(sameAttrs(value, y.body[i].attrs.at(key)));
      }
    }
  }
}

Plan richPlan() {
  Plan plan = shardc::test::seedPlan(3, 1023, 7);
  plan.params[0].unit = "h.0";
  plan.params[0].device = "cuda:0";
  Param scale;
  scale.name = "scale";
  scale.dtype = DType::BF16;
  scale.isBuffer = true;
  scale.persistent = false;
  plan.params.push_back(scale);
  plan.params[0].tiedNames = {"lm_head.weight", "out.weight"};
  Instruction &fill = plan.functions[0].body[1];
  fill.attrs["one"] = 1.0;
  fill.attrs["tenth"] = 0.1;
  fill.attrs["negzero"] = -0.0;
  fill.attrs["tiny"] = 4.9406564584124654e-324;
  fill.attrs["big"] = 1.7976931348623157e308;
  fill.attrs["nan"] = std::numeric_limits<double>::quiet_NaN();
  fill.attrs["inf"] = std::numeric_limits<double>::infinity();
  fill.attrs["ninf"] = -std::numeric_limits<double>::infinity();
  fill.attrs["int"] = int64_t(1);
  fill.attrs["minint"] = std::numeric_limits<int64_t>::min();
  fill.attrs["str"] = std::string("he said \"hi\"\n");
  fill.attrs["list"] = std::vector<int64_t>{1, -2, 3};
  fill.attrs["empty"] = std::vector<int64_t>{};
  // An output every rank holds the same value of (a gradient norm).
  plan.functions[1].buffers[plan.functions[1].outputs.at(0)].replicated = true;
  return plan;
}

/// Serializes the seed plan, applies `edit` to the JSON, parses it back and
/// returns the error message ("" when it parsed).
template <typename Edit> std::string errorAfter(Edit edit) {
  nlohmann::json j = nlohmann::json::parse(planToJson(shardc::test::seedPlan(2)));
  edit(j);
  try {
    planFromJson(j.dump(), "plan.json");
  } catch (const RuntimeError &e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("plan JSON round trip keeps everything, doubles bit-exactly", "[planjson]") {
  Plan plan = richPlan();
  std::string text = planToJson(plan);
  Plan back = planFromJson(text, "rich.json");
  requireSamePlan(plan, back);
  CHECK(planToJson(back) == text);
  // Integral doubles stay floats in JSON ("1.0"), ints stay ints.
  CHECK_THAT(text, Contains("\"one\": 1.0"));
  CHECK_THAT(text, Contains("\"int\": 1"));
  CHECK_THAT(text, Contains("\"nan\": {"));
  CHECK_THAT(text, Contains("\"replicated\": true"));
}

TEST_CASE("malformed plans are rejected with the JSON path", "[planjson]") {
  using nlohmann::json;
  CHECK_THAT(errorAfter([](json &j) { j["version"] = 2; }),
             Contains("plan.json: version: plan version 2 is not supported"));
  CHECK_THAT(errorAfter([](json &j) { j["format"] = "other"; }), Contains("format: expected"));
  CHECK_THAT(errorAfter([](json &j) { j.erase("world_size"); }),
             Contains("world_size: missing required key"));
  CHECK_THAT(errorAfter([](json &j) { j["world_size"] = 2.0; }),
             Contains("world_size: expected an integer, got a float"));
  CHECK_THAT(errorAfter([](json &j) { j["functions"][1]["buffers"][3]["shape"][0] = -5; }),
             Contains("functions[1].buffers[3].shape[0]: integer -5 is out of range"));
  CHECK_THAT(errorAfter([](json &j) { j["functions"][1]["buffers"][3]["shape"][0] = "x"; }),
             Contains("functions[1].buffers[3].shape[0]: expected an integer, got a string"));
  // Op names are checked once, here: everything after the reader has an OpCode.
  CHECK_THAT(errorAfter([](json &j) { j["functions"][1]["body"][3]["op"] = "conv2d"; }),
             Contains("plan.json: functions[1].body[3].op: unknown op 'conv2d' (known: alloc, "
                      "free, fill,"));
  CHECK_THAT(errorAfter([](json &j) { j["functions"][1]["body"][3]["op"] = 3; }),
             Contains("functions[1].body[3].op: expected a string, got"));
  CHECK_THAT(errorAfter([](json &j) { j["functions"][1]["buffers"][2]["id"] = 5; }),
             Contains("functions[1].buffers[2].id: id 5 must equal its index 2"));
  CHECK_THAT(errorAfter([](json &j) { j["functions"][1]["body"][3]["inputs"][1] = 9; }),
             Contains("functions[1].body[3].inputs[1]: buffer id 9 out of range"));
  CHECK_THAT(errorAfter([](json &j) { j["functions"][1]["inputs"][0] = -1; }),
             Contains("functions[1].inputs[0]: integer -1 is out of range"));
  CHECK_THAT(errorAfter([](json &j) { j["functions"][1]["buffers"][3]["bytes"] = 100; }),
             Contains("functions[1].buffers[3].bytes: bytes 100 is less than the logical size"));
  CHECK_THAT(errorAfter([](json &j) { j["params"][0]["dtype"] = "int8"; }),
             Contains("params[0].dtype: unknown dtype 'int8'"));
  CHECK_THAT(errorAfter([](json &j) { j["functions"][0]["buffers"][0]["category"] = "weights"; }),
             Contains("functions[0].buffers[0].category: unknown category 'weights'"));
  CHECK_THAT(errorAfter([](json &j) { j["functions"][0]["buffers"][0]["param"] = 3; }),
             Contains("functions[0].buffers[0].param: param index 3 out of range"));
  CHECK_THAT(errorAfter([](json &j) { j["functions"][0]["body"][0]["colour"] = 1; }),
             Contains("functions[0].body[0].colour: unknown key"));
  CHECK_THAT(errorAfter([](json &j) { j["functions"][0]["body"][1]["attrs"]["value"] = true; }),
             Contains("functions[0].body[1].attrs.value: unsupported attribute value"));
  CHECK_THAT(errorAfter([](json &j) { j["params"][0]["chunk_rows"] = 10; }),
             Contains("params[0].chunk_rows: chunk_rows 10 x world_size 2 does not cover 1024"));
  CHECK_THAT(errorAfter([](json &j) { j["params"] = json::object(); }),
             Contains("params: expected an array, got an object"));
  CHECK_THAT(errorAfter([](json &j) { j["functions"][1]["buffers"][3]["shape"] =
                                          {int64_t(1) << 62, 16}; }),
             Contains("functions[1].buffers[3].shape: shape is too large"));
}

TEST_CASE("what a checkpoint holds: persistent buffers, tied names", "[planjson]") {
  using nlohmann::json;
  // Defaults are not written: older plans read unchanged.
  CHECK(planToJson(shardc::test::seedPlan(2)).find("persistent") == std::string::npos);
  CHECK_THAT(errorAfter([](json &j) { j["params"][0]["persistent"] = false; }),
             Contains("params[0].persistent: 'p1' is a parameter and is always persistent (only "
                      "buffers and optimizer state, optim.*, are not)"));
  CHECK_THAT(errorAfter([](json &j) {
               j["params"][0]["tied"] = {"p1"};
             }),
             Contains("params[0].tied: tied name 'p1' of 'p1' is empty or already names a tensor"));
  CHECK_THAT(errorAfter([](json &j) {
               j["params"][0]["tied"] = {"a", "a"};
             }),
             Contains("params[0].tied: tied name 'a' of 'p1' is empty or already names a tensor"));
  CHECK(errorAfter([](json &j) { j["params"][0]["tied"] = {"lm_head.weight"}; }) == "");
}

TEST_CASE("plan reader never crashes on garbage", "[planjson]") {
  for (const char *text : {"", "{", "[]", "null", "{\"format\":\"shardc-plan\"}",
                           "{\"format\":\"shardc-plan\",\"version\":1e400}",
                           "{\"format\":\"shardc-plan\",\"version\":18446744073709551615}"}) {
    INFO(text);
    CHECK_THROWS_AS(planFromJson(text, "g.json"), RuntimeError);
  }
  CHECK_THROWS_WITH(planFromJson("{", "g.json"), Contains("g.json: not valid JSON"));
}
