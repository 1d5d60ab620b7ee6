// Master weights (compiler/MasterWeights.h, docs/graph-format.md): the
// expansion of "master_dtype" into a stored parameter and one cast that
// every reader reads, checked on the graph parseGraph gives.
#include "compiler/MasterWeights.h"
#include "compiler/Graph.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

using namespace shardc;
using namespace shardc::compiler;

namespace {

/// w [4, 3] read by a linear and a matmul; v, read by nothing; a node
/// already named "w.compute", so the cast takes the next name.
const char *kGraph = R"({"format": "shardc-graph", "version": 1,
 "parameters": [
  {"name": "w", "shape": [4, 3], "dtype": "bfloat16", "master_dtype": "float32",
   "device": "cpu", "init": [{"op": "normal", "std": 0.02}]},
  {"name": "v", "shape": [2], "dtype": "bfloat16", "master_dtype": "float32",
   "device": "cpu", "init": [{"op": "zeros"}]}],
 "inputs": [{"name": "x", "shape": [2, 3], "dtype": "bfloat16"}],
 "nodes": [
  {"name": "w.compute", "op": "linear", "inputs": ["x", "w"]},
  {"name": "y", "op": "matmul", "inputs": ["w.compute", "w"]}],
 "outputs": ["y", "w"]})";

const GraphNode &node(const Graph &graph, const std::string &name) {
  auto it = std::find_if(graph.nodes.begin(), graph.nodes.end(),
                         [&](const GraphNode &n) { return n.names[0] == name; });
  REQUIRE(it != graph.nodes.end());
  return *it;
}

}  // namespace

TEST_CASE("master weights: stored in the master dtype, every reader reads one cast",
          "[graph][master]") {
  const Graph graph = parseGraph(kGraph, "master.json");
  REQUIRE(graph.params.size() == 2);
  CHECK(graph.params[0].dtype == plan::DType::F32);
  CHECK(graph.params[1].dtype == plan::DType::F32);
  // One cast, first, named clear of the file's own "w.compute"; none for v.
  REQUIRE(graph.nodes.size() == 3);
  const GraphNode &cast = graph.nodes[0];
  CHECK(cast.names[0] == "w.compute2");
  CHECK(cast.op == "cast");
  CHECK(cast.inputs == std::vector<std::string>{"w"});
  CHECK(cast.dtype == plan::DType::BF16);
  CHECK(node(graph, "w.compute").inputs == std::vector<std::string>{"x", "w.compute2"});
  CHECK(node(graph, "y").inputs == std::vector<std::string>{"w.compute", "w.compute2"});
  // An output naming the parameter returns its stored value.
  CHECK(graph.outputs == std::vector<std::string>{"y", "w"});
}

TEST_CASE("master weights: the expanded text is a plain graph, expanded once", "[graph][master]") {
  const std::string once = expandMasterWeights(kGraph, "master.json");
  CHECK(once.find("master_dtype") == std::string::npos);
  CHECK(expandMasterWeights(once, "master.json") == once);
  const Graph a = parseGraph(kGraph, "a.json"), b = parseGraph(once, "b.json");
  REQUIRE(a.nodes.size() == b.nodes.size());
  for (size_t i = 0; i < a.nodes.size(); ++i) CHECK(a.nodes[i].inputs == b.nodes[i].inputs);
  // Text without master weights is returned as it is, byte for byte.
  const std::string plain = R"({"format": "shardc-graph", "version": 1})";
  CHECK(expandMasterWeights(plain, "plain.json") == plain);
}

TEST_CASE("master weights: bad master dtypes name their place", "[graph][master]") {
  std::string text = kGraph;
  text.replace(text.find("\"master_dtype\": \"float32\""), 25, "\"master_dtype\": \"int64\"");
  CHECK_THROWS_WITH(parseGraph(text, "bad.json"),
                    Catch::Contains("parameters[0].master_dtype: \"int64\": a master dtype must "
                                    "be float32, float64, float16 or bfloat16"));
  std::string intParam = kGraph;
  intParam.replace(intParam.find("\"dtype\": \"bfloat16\""), 19, "\"dtype\": \"int64\"");
  CHECK_THROWS_WITH(parseGraph(intParam, "int.json"),
                    Catch::Contains("parameters[0].dtype: \"int64\": the dtype of a parameter "
                                    "with master weights must be float32"));
}

TEST_CASE("master weights: --master-dtype marks every 16-bit parameter without its own",
          "[graph][master]") {
  // a bfloat16 and b float16 get float32; c (float32) and d (its own
  // float64) keep theirs; a buffer never gets one.
  const char *graph = R"({"format": "shardc-graph", "version": 1,
   "parameters": [
    {"name": "a", "shape": [2], "dtype": "bfloat16", "device": "cpu", "init": [{"op": "ones"}]},
    {"name": "b", "shape": [2], "dtype": "float16", "device": "cpu", "init": [{"op": "ones"}]},
    {"name": "c", "shape": [2], "dtype": "float32", "device": "cpu", "init": [{"op": "ones"}]},
    {"name": "d", "shape": [2], "dtype": "bfloat16", "master_dtype": "float64",
     "device": "cpu", "init": [{"op": "ones"}]}],
   "buffers": [{"name": "s", "shape": [2], "dtype": "bfloat16", "device": "cpu",
                "init": [{"op": "ones"}]}],
   "inputs": [{"name": "x", "shape": [2], "dtype": "bfloat16"}],
   "nodes": [{"name": "y", "op": "add", "inputs": ["x", "a"]},
             {"name": "z", "op": "mul", "inputs": ["y", "d"]},
             {"name": "u", "op": "add", "inputs": ["z", "s"]}],
   "outputs": ["u", "b", "c"]})";
  const std::string marked = withMasterDtype(graph, "float32", "g.json");
  const Graph parsed = parseGraph(marked, "g.json");
  REQUIRE(parsed.params.size() == 5);
  std::map<std::string, plan::DType> stored;
  for (const GraphParam &p : parsed.params) stored[p.name] = p.dtype;
  CHECK(stored["a"] == plan::DType::F32);
  CHECK(stored["b"] == plan::DType::F32);
  CHECK(stored["c"] == plan::DType::F32);
  CHECK(stored["d"] == plan::DType::F64);
  CHECK(stored["s"] == plan::DType::BF16);
  // Readers read a and d through their casts to bfloat16.
  CHECK(node(parsed, "y").inputs == std::vector<std::string>{"x", "a.compute"});
  CHECK(node(parsed, "z").inputs == std::vector<std::string>{"y", "d.compute"});
  // No option, or no JSON: the text as it is.
  CHECK(withMasterDtype(graph, "", "g.json") == graph);
  CHECK(withMasterDtype("not json", "float32", "g.json") == "not json");
  CHECK_THROWS_WITH(withMasterDtype(graph, "bfloat16", "g.json"),
                    Catch::Contains("g.json: master dtype \"bfloat16\": master weights are "
                                    "float32 or float64"));
}
