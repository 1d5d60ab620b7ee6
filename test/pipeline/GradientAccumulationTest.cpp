// accumulatedStepGraph (compiler/GradientAccumulation.h): the joint graph of
// one micro-step repeated over the rank's rows, gradients and shares added.
#include "compiler/GradientAccumulation.h"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace shardc::compiler;

namespace {

/// A joint graph of one micro-step's 2 rows: y = x w (a batch output), a
/// 0-d share, and a gradient named by a rename at the end, as Autodiff
/// writes it. `extra` nodes go first.
Graph microStep(const std::string &extra = "") {
  return parseGraph(
      R"({"format": "shardc-graph", "version": 1,
          "parameters": [{"name": "w", "shape": [3, 3], "dtype": "float32", "device": "cpu",
                          "init": [{"op": "ones"}]}],
          "inputs": [{"name": "x", "shape": [2, 3], "dtype": "float32"}],
          "nodes": [)" +
          extra + R"(
            {"name": "y", "op": "linear", "inputs": ["x", "w"]},
            {"name": "loss", "op": "mean", "inputs": ["y"]},
            {"name": "g", "op": "mul", "inputs": ["w", "w"]},
            {"name": "grad.w", "op": "reshape", "inputs": ["g"], "shape": [3, 3]}],
          "outputs": ["y", "loss", "grad.w"]})",
      "t.json");
}

const GraphNode *nodeNamed(const Graph &graph, const std::string &name) {
  for (const GraphNode &node : graph.nodes)
    if (std::find(node.names.begin(), node.names.end(), name) != node.names.end()) return &node;
  return nullptr;
}

}  // namespace

TEST_CASE("accumulatedStepGraph repeats the micro-step over slices of the rows",
          "[gradient-accumulation]") {
  const Graph graph = accumulatedStepGraph(microStep(), 3, {});
  REQUIRE(graph.inputs.size() == 1);
  CHECK(graph.inputs[0].shape == std::vector<int64_t>{6, 3});
  // Copy k reads rows [2k, 2k + 2).
  const GraphNode *third = nodeNamed(graph, "micro3.x");
  REQUIRE(third);
  CHECK(third->op == "slice");
  CHECK(third->number("start") == 4);
  CHECK(third->number("end") == 6);
  CHECK(nodeNamed(graph, "micro2.y"));
  // The batch output is the copies' rows concatenated; the share and the
  // gradient the copies' sums, under their own names.
  const GraphNode *y = nodeNamed(graph, "y");
  REQUIRE(y);
  CHECK(y->op == "cat");
  CHECK(y->inputs == std::vector<std::string>{"micro1.y", "micro2.y", "micro3.y"});
  const GraphNode *grad = nodeNamed(graph, "grad.w");
  REQUIRE(grad);
  CHECK(grad->op == "add");
  CHECK(nodeNamed(graph, "loss")->op == "add");
  CHECK(graph.outputs == std::vector<std::string>{"y", "loss", "grad.w"});
  // The gradient is summed where each copy completes it: the renames at
  // the joint graph's end are not copied.
  CHECK_FALSE(nodeNamed(graph, "micro1.grad.w"));
  CHECK(grad->inputs[1] == "micro3.g");
}

TEST_CASE("accumulatedStepGraph keeps its copies' names apart from the graph's",
          "[gradient-accumulation]") {
  // A value already named micro1.* moves the copies to another prefix.
  const Graph graph = accumulatedStepGraph(
      microStep(R"({"name": "micro1.z", "op": "relu", "inputs": ["x"]},)"), 2, {});
  CHECK(nodeNamed(graph, "micro_1.micro1.z"));
  CHECK(nodeNamed(graph, "micro_2.y"));
}

TEST_CASE("accumulatedStepGraph refuses what cannot be split", "[gradient-accumulation]") {
  CHECK_THROWS_WITH(accumulatedStepGraph(microStep(), 0, {}),
                    Catch::Contains("at least 1 micro-step"));
  CHECK(accumulatedStepGraph(microStep(), 1, {}).nodes.size() == microStep().nodes.size());
  CHECK_THROWS_WITH(accumulatedStepGraph(microStep(), 2, {"y"}),
                    Catch::Contains("'y' is not a count summed over ranks"));
}
