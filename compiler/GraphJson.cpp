//===- GraphJson.cpp - parse and validate a graph file --------------------===//
//
// Every rejection names the file, the JSON path and the reason, e.g.
//   seed.json: parameters[0].shape[1]: must be a non-negative integer
//
//===----------------------------------------------------------------------===//
#include "compiler/Graph.h"
#include "dialects/tc/Device.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

using json = nlohmann::json;

namespace shardc::compiler {
namespace {

/// Walks a JSON document, keeping the path of the value being read.
class GraphReader {
public:
  explicit GraphReader(std::string sourceName)
      : sourceName_(std::move(sourceName)) {}

  [[noreturn]] void fail(const std::string &path,
                         const std::string &reason) const {
    throw GraphError(sourceName_ + ": " + (path.empty() ? "(root)" : path) +
                     ": " + reason);
  }

  const json &member(const json &object, const std::string &path,
                     const char *key) const {
    auto it = object.find(key);
    if (it == object.end())
      fail(path, std::string("missing required key \"") + key + "\"");
    return *it;
  }

  std::string string(const json &value, const std::string &path) const {
    if (!value.is_string())
      fail(path, "must be a string, got " + std::string(value.type_name()));
    return value.get<std::string>();
  }

  std::string name(const json &object, const std::string &path) const {
    std::string result = string(member(object, path, "name"), path + ".name");
    if (result.empty())
      fail(path + ".name", "must not be empty");
    return result;
  }

  const json &array(const json &value, const std::string &path) const {
    if (!value.is_array())
      fail(path, "must be an array, got " + std::string(value.type_name()));
    return value;
  }

  /// An optional array member; absent means empty.
  const json &optionalArray(const json &object, const std::string &path,
                            const char *key) const {
    static const json empty = json::array();
    auto it = object.find(key);
    if (it == object.end())
      return empty;
    return array(*it, path + "." + key);
  }

  void requireObject(const json &value, const std::string &path) const {
    if (!value.is_object())
      fail(path, "must be an object, got " + std::string(value.type_name()));
  }

  std::vector<int64_t> shape(const json &object,
                             const std::string &path) const {
    std::string shapePath = path + ".shape";
    const json &dims = array(member(object, path, "shape"), shapePath);
    std::vector<int64_t> result;
    int64_t elements = 1;
    for (size_t i = 0; i < dims.size(); ++i) {
      std::string dimPath = shapePath + "[" + std::to_string(i) + "]";
      const json &dim = dims[i];
      if (!dim.is_number_integer() ||
          (dim.is_number_integer() && !dim.is_number_unsigned() &&
           dim.get<int64_t>() < 0))
        fail(dimPath, "must be a non-negative integer, got " + dim.dump());
      if (dim.is_number_unsigned() &&
          dim.get<uint64_t>() >
              static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail(dimPath, "dimension " + dim.dump() + " exceeds 2^63-1");
      int64_t size = dim.get<int64_t>();
      if (size != 0 && elements > std::numeric_limits<int64_t>::max() / 8 / size)
        fail(shapePath, "element count overflows: the tensor would have more "
                        "than 2^60 elements");
      elements *= size;
      result.push_back(size);
    }
    return result;
  }

  plan::DType dtype(const json &object, const std::string &path) const {
    std::string text = string(member(object, path, "dtype"), path + ".dtype");
    if (auto parsed = plan::parseDType(text))
      return *parsed;
    fail(path + ".dtype", "unknown dtype \"" + text +
                              "\"; expected float32, float64, float16 or "
                              "bfloat16");
  }

  const std::string &sourceName() const { return sourceName_; }

private:
  std::string sourceName_;
};

std::string indexed(const std::string &path, size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

std::vector<InitStep> readInitChain(const GraphReader &reader,
                                    const json &param,
                                    const std::string &path) {
  std::string chainPath = path + ".init";
  const json &chain = reader.array(reader.member(param, path, "init"), chainPath);
  if (chain.empty())
    reader.fail(chainPath, "an init chain needs at least one op (a generator)");
  std::vector<InitStep> steps;
  for (size_t i = 0; i < chain.size(); ++i) {
    std::string stepPath = indexed(chainPath, i);
    reader.requireObject(chain[i], stepPath);
    InitStep step;
    step.path = stepPath;
    step.op = reader.string(reader.member(chain[i], stepPath, "op"),
                            stepPath + ".op");
    if (step.op == "fill") {
      const json &value = reader.member(chain[i], stepPath, "value");
      if (!value.is_number())
        reader.fail(stepPath + ".value",
                    "must be a number, got " + value.dump());
      step.value = value.get<double>();
    } else if (step.op == "zeros") {
      step.value = 0.0;
    } else if (step.op == "ones") {
      step.value = 1.0;
    } else {
      reader.fail(stepPath + ".op", "unknown init op \"" + step.op +
                                        "\"; expected fill, zeros or ones");
    }
    if (i > 0)
      reader.fail(stepPath, "init op \"" + step.op +
                                "\" follows a generator; only single-generator "
                                "init chains are supported");
    steps.push_back(step);
  }
  return steps;
}

GraphParam readParam(const GraphReader &reader, const json &value,
                     const std::string &path, bool isBuffer) {
  reader.requireObject(value, path);
  GraphParam param;
  param.path = path;
  param.isBuffer = isBuffer;
  param.name = reader.name(value, path);
  param.shape = reader.shape(value, path);
  param.dtype = reader.dtype(value, path);
  param.device = reader.string(reader.member(value, path, "device"),
                               path + ".device");
  if (!mlir::tc::isValidDeviceString(param.device))
    reader.fail(path + ".device",
                "device \"" + param.device +
                    "\" does not parse; expected cpu, meta, cuda, cpu:N or "
                    "cuda:N");
  if (auto unit = value.find("unit"); unit != value.end())
    param.unit = reader.string(*unit, path + ".unit");
  param.init = readInitChain(reader, value, path);
  return param;
}

/// numpy broadcasting of two shapes; false if they do not broadcast.
bool broadcastShapes(const std::vector<int64_t> &a,
                     const std::vector<int64_t> &b,
                     std::vector<int64_t> &result) {
  size_t rank = std::max(a.size(), b.size());
  result.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      return false;
    result[rank - 1 - i] = da == 1 ? db : da;
  }
  return true;
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

} // namespace

Graph parseGraph(const std::string &text, const std::string &sourceName) {
  GraphReader reader(sourceName);
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error &error) {
    reader.fail("", std::string("not valid JSON: ") + error.what());
  }
  reader.requireObject(root, "");
  std::string format = reader.string(reader.member(root, "", "format"), "format");
  if (format != "shardc-graph")
    reader.fail("format", "expected \"shardc-graph\", got \"" + format + "\"");
  const json &version = reader.member(root, "", "version");
  if (!version.is_number_integer() || version.get<int64_t>() != kGraphFormatVersion)
    reader.fail("version", "unsupported graph format version " + version.dump() +
                               "; this shardc reads version " +
                               std::to_string(kGraphFormatVersion));

  Graph graph;
  graph.sourceName = sourceName;
  if (auto name = root.find("name"); name != root.end())
    graph.name = reader.string(*name, "name");

  // Every name (parameter, buffer, input, node) lives in one namespace.
  std::map<std::string, std::string> definedAt;
  std::map<std::string, std::pair<std::vector<int64_t>, plan::DType>> typeOf;
  auto define = [&](const std::string &name, const std::string &path,
                    const std::vector<int64_t> &shape, plan::DType dtype) {
    auto [it, inserted] = definedAt.emplace(name, path);
    if (!inserted)
      reader.fail(path + ".name", "duplicate name \"" + name +
                                      "\" (first defined at " + it->second +
                                      ")");
    typeOf[name] = {shape, dtype};
  };

  for (const char *key : {"parameters", "buffers"}) {
    const json &list = reader.optionalArray(root, "", key);
    bool isBuffer = std::string(key) == "buffers";
    for (size_t i = 0; i < list.size(); ++i) {
      GraphParam param = readParam(reader, list[i], indexed(key, i), isBuffer);
      define(param.name, param.path, param.shape, param.dtype);
      graph.params.push_back(std::move(param));
    }
  }

  const json &inputs = reader.optionalArray(root, "", "inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string path = indexed("inputs", i);
    reader.requireObject(inputs[i], path);
    GraphInput input{reader.name(inputs[i], path), reader.shape(inputs[i], path),
                     reader.dtype(inputs[i], path), path};
    define(input.name, path, input.shape, input.dtype);
    graph.inputs.push_back(std::move(input));
  }

  const json &nodes = reader.optionalArray(root, "", "nodes");
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::string path = indexed("nodes", i);
    reader.requireObject(nodes[i], path);
    GraphNode node;
    node.path = path;
    node.name = reader.name(nodes[i], path);
    node.op = reader.string(reader.member(nodes[i], path, "op"), path + ".op");
    if (node.op != "add")
      reader.fail(path + ".op", "unknown op \"" + node.op + "\"; expected add");
    const json &operands =
        reader.array(reader.member(nodes[i], path, "inputs"), path + ".inputs");
    if (operands.size() != 2)
      reader.fail(path + ".inputs", "add takes 2 inputs, got " +
                                        std::to_string(operands.size()));
    for (size_t j = 0; j < operands.size(); ++j) {
      std::string operandPath = indexed(path + ".inputs", j);
      std::string operand = reader.string(operands[j], operandPath);
      if (operand == node.name)
        reader.fail(operandPath, "node \"" + node.name +
                                     "\" uses its own result (a cycle)");
      if (!definedAt.count(operand))
        reader.fail(operandPath,
                    "\"" + operand +
                        "\" is not a parameter, buffer, input or earlier node "
                        "(nodes must be listed in topological order)");
      node.inputs.push_back(operand);
    }
    const auto &[lhsShape, lhsType] = typeOf[node.inputs[0]];
    const auto &[rhsShape, rhsType] = typeOf[node.inputs[1]];
    if (lhsType != rhsType)
      reader.fail(path, std::string("add of ") + plan::dtypeName(lhsType) +
                            " and " + plan::dtypeName(rhsType) +
                            ": operand dtypes must match");
    if (!broadcastShapes(lhsShape, rhsShape, node.shape))
      reader.fail(path, "shapes " + shapeString(lhsShape) + " and " +
                            shapeString(rhsShape) + " do not broadcast");
    node.dtype = lhsType;
    define(node.name, path, node.shape, node.dtype);
    graph.nodes.push_back(std::move(node));
  }

  const json &outputs = reader.optionalArray(root, "", "outputs");
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string path = indexed("outputs", i);
    std::string output = reader.string(outputs[i], path);
    if (!definedAt.count(output))
      reader.fail(path, "\"" + output + "\" is not defined");
    graph.outputs.push_back(output);
  }
  if (graph.outputs.empty() && !graph.nodes.empty())
    reader.fail("outputs", "a graph with nodes must name at least one output");
  return graph;
}

Graph loadGraph(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    throw GraphError(path + ": cannot open the graph file");
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad())
    throw GraphError(path + ": read error");
  return parseGraph(text.str(), path);
}

} // namespace shardc::compiler
