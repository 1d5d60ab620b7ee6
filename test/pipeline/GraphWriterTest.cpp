// A rewritten graph goes back to the file format (compiler/GraphWriter.h)
// and reads back to the same graph: every graph file of the examples and
// the lit inputs, and a rebatched data-parallel step with its new constant.
#include "compiler/GraphWriter.h"
#include "compiler/DataParallel.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

using namespace shardc::compiler;

namespace {

std::string readText(const std::filesystem::path &path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Everything a node is read to, its path aside (a rewrite renumbers).
void checkSameNodes(const Graph &a, const Graph &b) {
  REQUIRE(a.nodes.size() == b.nodes.size());
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const GraphNode &x = a.nodes[i], &y = b.nodes[i];
    INFO("node " << i << " " << x.op);
    CHECK(x.names == y.names);
    CHECK(x.op == y.op);
    CHECK(x.inputs == y.inputs);
    CHECK(x.numbers == y.numbers);
    CHECK(x.strings == y.strings);
    CHECK(x.causal == y.causal);
    CHECK(x.ints == y.ints);
    CHECK(x.familyOp == y.familyOp);
    CHECK(x.attrs == y.attrs);
    CHECK(x.shapes == y.shapes);
    CHECK(x.dtype == y.dtype);
  }
}

}  // namespace

TEST_CASE("every graph file reads back the same after rewrittenGraphText", "[graph-writer]") {
  int files = 0;
  for (const char *dir : {"/examples", "/test/lit/shardc/Inputs", "/test/fuzz/corpus/graph"}) {
    const std::filesystem::path folder = std::string(SHARDC_SOURCE_DIR) + dir;
    if (!std::filesystem::exists(folder)) continue;
    for (const auto &entry : std::filesystem::directory_iterator(folder)) {
      if (entry.path().extension() != ".json") continue;
      const std::string text = readText(entry.path());
      Graph graph;
      try {
        graph = parseGraph(text, entry.path().string());
      } catch (const GraphError &) {
        continue;  // an input of an error test, or not a graph
      }
      INFO(entry.path().string());
      const Graph again = parseGraph(rewrittenGraphText(text, graph), "again.json");
      checkSameNodes(graph, again);
      CHECK(again.outputs == graph.outputs);
      REQUIRE(again.inputs.size() == graph.inputs.size());
      for (size_t i = 0; i < graph.inputs.size(); ++i) {
        CHECK(again.inputs[i].shape == graph.inputs[i].shape);
        CHECK(again.inputs[i].high == graph.inputs[i].high);
        CHECK(again.inputs[i].value == graph.inputs[i].value);
      }
      CHECK(again.params.size() == graph.params.size());
      ++files;
    }
  }
  CHECK(files >= 12);  // the examples and the lit inputs were found
}

TEST_CASE("a rebatched loss goes back to text with its share's constant", "[graph-writer]") {
  const std::string text = R"({"format": "shardc-graph", "version": 1,
    "parameters": [{"name": "w", "shape": [4, 3], "dtype": "float32", "device": "cpu",
                    "init": [{"op": "ones"}]}],
    "inputs": [{"name": "x", "shape": [6, 3], "dtype": "float32"}],
    "nodes": [{"name": "y", "op": "linear", "inputs": ["x", "w"]},
              {"name": "loss", "op": "mean", "inputs": ["y"]}],
    "outputs": ["loss"]})";
  const Graph graph = parseGraph(text, "loss.json");
  const Graph two = rebatchGraph(graph, 2);
  const Graph again = parseGraph(rewrittenGraphText(text, two), "again.json");
  checkSameNodes(two, again);
  CHECK(again.inputs[0].shape == std::vector<int64_t>{2, 3});
  REQUIRE(again.params.size() == 2);
  const GraphParam &scale = again.params[1];
  CHECK(scale.isBuffer);
  CHECK_FALSE(scale.persistent);
  CHECK(scale.shape.empty());
  REQUIRE(scale.init.size() == 1);
  CHECK(scale.init[0].number("value") == 2.0 / 6.0);
}

TEST_CASE("a rebatched cross_entropy goes back to text with its count over ranks",
          "[graph-writer]") {
  const std::string text = R"({"format": "shardc-graph", "version": 1,
    "parameters": [{"name": "w", "shape": [4, 3], "dtype": "float32", "device": "cpu",
                    "init": [{"op": "ones"}]}],
    "inputs": [{"name": "x", "shape": [6, 3], "dtype": "float32"},
               {"name": "t", "shape": [6], "dtype": "int64", "high": 4}],
    "nodes": [{"name": "y", "op": "linear", "inputs": ["x", "w"]},
              {"name": "loss", "op": "cross_entropy", "inputs": ["y", "t"]}],
    "outputs": ["loss"]})";
  const Graph graph = parseGraph(text, "loss.json");
  const Graph two = rebatchGraph(graph, 2);
  const Graph again = parseGraph(rewrittenGraphText(text, two), "again.json");
  checkSameNodes(two, again);
  CHECK(again.inputs[1].shape == std::vector<int64_t>{2});
  // The rank's mean, its counted targets, their sum over ranks, the share.
  std::vector<std::string> ops;
  for (const GraphNode &node : again.nodes) ops.push_back(node.op);
  CHECK(ops == std::vector<std::string>{"linear", "cross_entropy", "ne", "cast", "sum",
                                        "all_reduce_sum", "div", "gt", "where", "mul"});
  CHECK(again.nodes.back().names[0] == "loss");
}

TEST_CASE("nodeJson writes infinities as the format's strings", "[graph-writer]") {
  GraphNode fill;
  fill.names = {"m"};
  fill.op = "ge";
  fill.inputs = {"x"};
  fill.familyOp = true;
  fill.attrs["value"] = -std::numeric_limits<double>::infinity();
  CHECK(nodeJson(fill)["value"] == "-inf");
  GraphNode split;
  split.names = {"a", "b"};
  split.op = "split";
  split.inputs = {"x"};
  split.ints = {1, 2};
  split.numbers["dim"] = 0;
  const nlohmann::json json = nodeJson(split);
  CHECK(json["names"] == nlohmann::json::array({"a", "b"}));
  CHECK(json["sizes"] == nlohmann::json::array({1, 2}));
  CHECK_FALSE(json.contains("name"));
}
