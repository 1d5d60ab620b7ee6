//===- Graph.h - an exported model graph, validated -------------*- C++ -*-===//
//
// The in-memory form of a graph file (docs/graph-format.md) after every
// check a file can fail: names resolve, shapes are valid and consistent,
// devices parse. Building tc IR from a Graph cannot fail.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Plan.h"

#include <cstdint>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardc::compiler {

inline constexpr int kGraphFormatVersion = 1;

/// A rejected graph file. The message reads "FILE: JSON.PATH: reason".
class GraphError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// What an init op does to its tensor (docs/graph-format.md lists them).
enum class InitStepKind { Generator, Pointwise, View };

/// One step of a parameter's init chain, e.g. {"op": "uniform", "a": -0.1,
/// "b": 0.1}. Numeric arguments are filled in with torch's defaults.
struct InitStep {
  std::string op;
  InitStepKind kind = InitStepKind::Generator;
  std::map<std::string, double> numbers; // value, a, b, mean, std, gain...
  std::string mode = "fan_in";           // kaiming
  std::string nonlinearity = "leaky_relu";
  std::vector<int64_t> ints;   // reshape shape, permute dims
  std::vector<int64_t> shape;  // the tensor this step produces
  std::string file;    // load: the checkpoint ("" = the one given by --load)
  std::string tensor;  // load: the tensor's name in it (default: the param's)
  std::string path; // JSON path, e.g. "parameters[0].init[0]"

  double number(const std::string &key) const { return numbers.at(key); }
};

/// A parameter (sharded by FSDP) or a buffer (replicated state).
struct GraphParam {
  std::string name;
  std::vector<int64_t> shape;
  plan::DType dtype = plan::DType::F32;
  std::string device;
  std::string unit;
  bool isBuffer = false;
  /// Buffers only: part of the model's state (torch's state_dict); false
  /// for torch's persistent=False buffers and exporter constants, which
  /// checkpoints never save.
  bool persistent = true;
  /// Parameters only: the other state_dict names of this tensor (tied
  /// weights); a checkpoint saves it under each of them too.
  std::vector<std::string> tiedNames;
  std::vector<InitStep> init;
  std::string path;
};

struct GraphInput {
  std::string name;
  std::vector<int64_t> shape;
  plan::DType dtype = plan::DType::F32;
  std::string path;
  int64_t high = 0; // int64 inputs: generated values lie in [0, high)
  // Specialised (int64 inputs only): forward's Python control flow read this
  // input's values at export, so the graph holds for exactly these values
  // (row-major); valueReadAt names the source line. Empty: any values.
  std::vector<int64_t> value;
  std::string valueReadAt;
};

/// A forward op with its results' inferred shapes (docs/graph-format.md).
struct GraphNode {
  std::vector<std::string> names; // its results: one, or one per split piece
  std::string op;
  std::vector<std::string> inputs;
  std::map<std::string, double> numbers;      // eps, scale, theta, dim, ...
  std::map<std::string, std::string> strings; // approximate
  bool causal = false;
  std::vector<int64_t> ints; // reshape shape, permute dims, split sizes
  /// A family op of the op table (runtime/OpTable.def's SHARDC_FAMILY_OP):
  /// its attributes as the table's kinds, read generically; built as tc.op.
  bool familyOp = false;
  std::map<std::string, plan::AttrValue> attrs;
  std::vector<std::vector<int64_t>> shapes; // one per result, inferred
  plan::DType dtype = plan::DType::F32;      // of the results, inferred
  std::string path;

  double number(const std::string &key) const { return numbers.at(key); }
  int64_t integer(const std::string &key) const {
    return static_cast<int64_t>(numbers.at(key));
  }
};
/// A buffer that forward overwrites (docs/graph-format.md, "Buffer
/// updates"): after forward, `buffer` holds the value `value` computed, as
/// torch's `running_mean` after a training-mode batch norm.
struct BufferUpdate {
  std::string buffer;
  std::string value;
  std::string path; // e.g. "updates[0]"
};

struct Graph {
  std::string sourceName; // the file, for messages and locations
  std::string name;
  std::vector<GraphParam> params; // parameters first, then buffers
  std::vector<GraphInput> inputs;
  std::vector<GraphNode> nodes;
  std::vector<std::string> outputs;
  std::vector<BufferUpdate> updates; // applied after forward, in this order
};

/// A 0-d constant a rewrite adds (a data-parallel share scale, gradient
/// accumulation's step count): a non-persistent buffer whose init is one
/// fill of `value`, which rewrittenGraphText writes back (GraphWriter.h).
inline GraphParam fillConstant(const std::string &name, double value,
                               plan::DType dtype, const std::string &device,
                               const std::string &path) {
  GraphParam param;
  param.name = name;
  param.dtype = dtype;
  param.device = device;
  param.isBuffer = true;
  param.persistent = false;
  InitStep fill;
  fill.op = "fill";
  fill.numbers["value"] = value;
  param.init = {fill};
  param.path = path;
  return param;
}

/// A name for a value a rewrite adds: `stem`, else the first of stem.1,
/// stem.2, ... not in `taken`, which then holds it.
inline std::string freshValueName(std::set<std::string> &taken,
                                  const std::string &stem) {
  std::string name = stem;
  for (int k = 1; taken.count(name); ++k)
    name = stem + "." + std::to_string(k);
  taken.insert(name);
  return name;
}

/// The target a cross_entropy or linear_cross_entropy leaves out of its
/// mean: torch's ignore_index, -100 unless the node says otherwise.
inline int64_t ignoredTarget(const GraphNode &loss) {
  if (auto it = loss.numbers.find("ignore_index"); it != loss.numbers.end())
    return static_cast<int64_t>(it->second);
  if (auto it = loss.attrs.find("ignore_index"); it != loss.attrs.end())
    return std::get<int64_t>(it->second);
  return -100;
}

/// Parses and validates a graph file's text; throws GraphError.
Graph parseGraph(const std::string &text, const std::string &sourceName);

/// The default limit on a graph file's size (--max-graph-mib).
inline constexpr int64_t kDefaultMaxGraphBytes = int64_t{256} << 20;

/// The bound `high` of every int64 input that has one (token ids lie in
/// [0, high)): what runtime::makeDeterministicInputs needs to generate valid
/// ids, as `shardc run` does without --inputs.
inline std::map<std::string, int64_t> inputBounds(const Graph &graph) {
  std::map<std::string, int64_t> bounds;
  for (const GraphInput &input : graph.inputs)
    if (input.high > 0) bounds[input.name] = input.high;
  return bounds;
}

/// Reads a graph file's text, its master weights expanded
/// (compiler/MasterWeights.h), every 16-bit parameter given `masterDtype`
/// first when it is not empty; throws GraphError when unreadable or larger
/// than `maxBytes`.
std::string readGraphText(const std::string &path,
                          int64_t maxBytes = kDefaultMaxGraphBytes,
                          const std::string &masterDtype = {});

/// Reads and parses a graph file; throws GraphError (also when unreadable
/// or larger than `maxBytes`).
Graph loadGraph(const std::string &path,
                int64_t maxBytes = kDefaultMaxGraphBytes,
                const std::string &masterDtype = {});

} // namespace shardc::compiler
