// Gradients (docs/training.md): the joint graph of withGradients, compiled
// and run like any graph. Losses whose gradients are known in closed form
// give exactly those values at every world size; the outputs are named and
// ordered as documented; docs/training.md lists exactly the ops with a rule.
// (Every rule is checked against torch.autograd in lit shardc/grad.test.)
#include "compiler/Autodiff.h"
#include "PipelineTestSupport.h"
#include "compiler/GradientRules.h"
#include "runtime/InitOps.h"
#include "runtime/LocalRun.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

using namespace shardc;
using json = nlohmann::json;

namespace {

json param(const std::string &name, const std::vector<int64_t> &shape, json init) {
  return {{"name", name},
          {"shape", shape},
          {"dtype", "float32"},
          {"device", "cpu"},
          {"init", std::move(init)}};
}

json graphOf(json params, json inputs, json nodes, json outputs, json buffers = json::array()) {
  return {{"format", "shardc-graph"},        {"version", 1},
          {"parameters", std::move(params)}, {"buffers", std::move(buffers)},
          {"inputs", std::move(inputs)},     {"nodes", std::move(nodes)},
          {"outputs", std::move(outputs)}};
}

runtime::HostTensor floats(const std::string &name, const std::vector<int64_t> &shape,
                           const std::vector<float> &values) {
  runtime::HostTensor t;
  t.name = name;
  t.shape = shape;
  t.data.resize(values.size() * sizeof(float));
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

/// Runs the joint graph of `graph` for `loss` on `worldSize` ranks.
std::map<std::string, runtime::HostTensor> gradients(const json &graph, const std::string &loss,
                                                     int64_t worldSize,
                                                     std::vector<runtime::HostTensor> inputs,
                                                     std::vector<std::string> *order = nullptr) {
  compiler::JointGraph joint = compiler::withGradients(graph.dump(), "test.json", loss);
  plan::Plan plan = test::compileForTest(compiler::parseGraph(joint.text, "test.json"), worldSize);
  runtime::RunOptions options;
  options.inputs = std::move(inputs);
  runtime::RunResult result = runtime::runLocal(plan, options);
  for (const runtime::RankReport &rank : result.ranks) {
    REQUIRE(rank.forward);
    CHECK(rank.forward->predictedPeakBytes == rank.forward->peakBytes);
  }
  std::map<std::string, runtime::HostTensor> byName;
  for (runtime::HostTensor &tensor : result.outputs) {
    if (order) order->push_back(tensor.name);
    byName[tensor.name] = std::move(tensor);
  }
  return byName;
}

std::vector<float> valuesOf(const runtime::HostTensor &t) {
  std::vector<float> values(static_cast<size_t>(t.numElements()));
  std::memcpy(values.data(), t.data.data(), values.size() * sizeof(float));
  return values;
}

std::string readDoc(const std::string &name) {
  std::ifstream in(std::string(SHARDC_SOURCE_DIR) + "/docs/" + name);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("sum(p * p) has gradient 2p exactly, at every world size", "[pipeline][grad]") {
  json graph = graphOf({param("p", {6}, {{{"op", "arange"}}})}, json::array(),
                       {{{"name", "sq"}, {"op", "mul"}, {"inputs", {"p", "p"}}},
                        {{"name", "loss"}, {"op", "sum"}, {"inputs", {"sq"}}}},
                       {"loss"});
  for (int64_t n : {1, 2, 4}) {
    auto out = gradients(graph, "loss", n, {});
    CHECK(valuesOf(out.at("loss")) == std::vector<float>{55});
    // Both operands of the product get g p; their sum is 2p.
    CHECK(valuesOf(out.at("grad.p")) == std::vector<float>{0, 2, 4, 6, 8, 10});
  }
}

TEST_CASE("mean(linear(x, W, b)) has gradients x / (M N) and 1 / N", "[pipeline][grad]") {
  // x [2, 3] rows (1, 2, 4) and (8, 16, 32): powers of two keep every sum
  // and quotient exact. W [4, 3], b [4]: M = 2 rows, N = 4 outputs.
  json graph =
      graphOf({param("W", {4, 3}, {{{"op", "normal"}}}), param("b", {4}, {{{"op", "normal"}}})},
              {{{"name", "x"}, {"shape", {2, 3}}, {"dtype", "float32"}}},
              {{{"name", "y"}, {"op", "linear"}, {"inputs", {"x", "W", "b"}}},
               {{"name", "loss"}, {"op", "mean"}, {"inputs", {"y"}}}},
              {"y"});
  std::vector<std::string> order;
  auto out = gradients(graph, "loss", 3, {floats("x", {2, 3}, {1, 2, 4, 8, 16, 32})}, &order);
  // The graph's outputs, then the loss, then a gradient per parameter.
  CHECK(order == std::vector<std::string>{"y", "loss", "grad.W", "grad.b"});
  // dL/dW[n][k] = sum_m x[m][k] / (M N) = (x0k + x1k) / 8, for every n.
  std::vector<float> row = {9.0f / 8, 18.0f / 8, 36.0f / 8};
  std::vector<float> expected;
  for (int n = 0; n < 4; ++n) expected.insert(expected.end(), row.begin(), row.end());
  CHECK(valuesOf(out.at("grad.W")) == expected);
  CHECK(valuesOf(out.at("grad.b")) == std::vector<float>(4, 0.25f));
}

TEST_CASE("a parameter the loss does not read gets no gradient; buffers get none",
          "[pipeline][grad]") {
  json graph =
      graphOf({param("used", {3}, {{{"op", "ones"}}}), param("unused", {3}, {{{"op", "ones"}}})},
              json::array(),
              {{{"name", "y"}, {"op", "mul"}, {"inputs", {"used", "scale"}}},
               {{"name", "loss"}, {"op", "sum"}, {"inputs", {"y"}}}},
              {"loss"}, {param("scale", {3}, {{{"op", "arange"}}})});
  compiler::JointGraph joint = compiler::withGradients(graph.dump(), "test.json", "loss");
  CHECK(joint.withoutGradient == std::vector<std::string>{"unused"});
  compiler::Graph parsed = compiler::parseGraph(joint.text, "test.json");
  CHECK(parsed.outputs == std::vector<std::string>{"loss", "grad.used"});
  auto out = gradients(graph, "loss", 2, {});
  CHECK(valuesOf(out.at("grad.used")) == std::vector<float>{0, 1, 2});
}

TEST_CASE("docs/training.md lists exactly the ops with a gradient rule", "[pipeline][grad]") {
  const std::string doc = readDoc("training.md");
  const size_t table = doc.find("## Ops with a gradient rule");
  REQUIRE(table != std::string::npos);
  const size_t end = doc.find("\n## ", table + 1);
  std::vector<std::string> listed;
  std::istringstream lines(doc.substr(table, end - table));
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("| `", 0) == 0) listed.push_back(line.substr(3, line.find('`', 3) - 3));
  CHECK(listed == compiler::opsWithGradients());
}
