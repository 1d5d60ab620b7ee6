//===- GraphWriter.cpp - a rewritten graph back to the file format --------===//
#include "compiler/GraphWriter.h"
#include "compiler/MasterWeights.h"

#include <cmath>
#include <set>
#include <variant>

namespace shardc::compiler {

using json = nlohmann::json;

json floatJson(double value) {
  if (std::isnan(value))
    return "nan";
  if (std::isinf(value))
    return value > 0 ? "inf" : "-inf";
  return value;
}

namespace {

json attrJson(const plan::AttrValue &value) {
  return std::visit(
      [](const auto &v) -> json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, double>)
          return floatJson(v);
        else
          return v;
      },
      value);
}

/// The key of a core op's integer list (GraphNodes.cpp reads it there).
const char *intsKey(const std::string &op) {
  if (op == "reshape")
    return "shape";
  if (op == "permute")
    return "dims";
  if (op == "split")
    return "sizes";
  return nullptr;
}

json inputJson(const Graph &graph, const GraphInput &input) {
  if (!input.value.empty() && static_cast<int64_t>(input.value.size()) !=
                                  plan::numElements(input.shape))
    throw GraphError(
        graph.sourceName + ": " + input.path + ": input '" + input.name +
        "' was specialised at export on values of its whole shape; a "
        "rewrite that changes its shape cannot keep them");
  json value = {{"name", input.name},
                {"shape", input.shape},
                {"dtype", plan::dtypeName(input.dtype)}};
  if (input.high > 0)
    value["high"] = input.high;
  if (!input.value.empty())
    value["value"] = input.value;
  if (!input.valueReadAt.empty())
    value["value_read_at"] = input.valueReadAt;
  return value;
}

/// A constant the rewrite added: a non-persistent buffer of one fill.
json constantJson(const GraphParam &param) {
  if (!param.isBuffer || param.persistent || param.init.size() != 1 ||
      param.init[0].op != "fill")
    throw GraphError(param.name + ": internal error: a rewritten graph adds "
                                  "only constant buffers (one fill)");
  return {
      {"name", param.name},
      {"shape", param.shape},
      {"dtype", plan::dtypeName(param.dtype)},
      {"device", param.device},
      {"persistent", false},
      {"init",
       json::array({{{"op", "fill"},
                     {"value", floatJson(param.init[0].number("value"))}}})}};
}

} // namespace

json nodeJson(const GraphNode &node) {
  json value = json::object();
  if (node.op == "split")
    value["names"] = node.names;
  else
    value["name"] = node.names.at(0);
  value["op"] = node.op;
  value["inputs"] = node.inputs;
  if (node.familyOp) {
    for (const auto &[key, attr] : node.attrs)
      value[key] = attrJson(attr);
    return value;
  }
  // Core ops: the reader filled in defaults (normalized dims, a slice's
  // clamped bounds), which read back to themselves.
  for (const auto &[key, number] : node.numbers)
    value[key] = floatJson(number);
  for (const auto &[key, text] : node.strings)
    value[key] = text;
  if (node.causal)
    value["causal"] = true;
  if (const char *key = intsKey(node.op))
    value[key] = node.ints;
  return value;
}

std::string rewrittenGraphText(const std::string &originalText,
                               const Graph &graph) {
  json document =
      json::parse(originalText, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded() || !document.is_object())
    throw GraphError(graph.sourceName + ": not a graph file's JSON object");
  // As parseGraph read it: master weights expanded (docs/graph-format.md).
  expandMasterWeights(document, GraphReader(graph.sourceName));
  std::set<std::string> known;
  for (const char *key : {"parameters", "buffers"})
    if (auto list = document.find(key);
        list != document.end() && list->is_array())
      for (const json &param : *list)
        if (param.is_object() && param.contains("name") &&
            param["name"].is_string())
          known.insert(param["name"].get<std::string>());
  for (const GraphParam &param : graph.params)
    if (!known.count(param.name))
      document["buffers"].push_back(constantJson(param));
  json inputs = json::array();
  for (const GraphInput &input : graph.inputs)
    inputs.push_back(inputJson(graph, input));
  document["inputs"] = std::move(inputs);
  json nodes = json::array();
  for (const GraphNode &node : graph.nodes)
    nodes.push_back(nodeJson(node));
  document["nodes"] = std::move(nodes);
  document["outputs"] = graph.outputs;
  document.erase("updates");
  if (!graph.updates.empty()) {
    json updates = json::array();
    for (const BufferUpdate &update : graph.updates)
      updates.push_back({{"buffer", update.buffer}, {"value", update.value}});
    document["updates"] = std::move(updates);
  }
  return document.dump(1);
}

} // namespace shardc::compiler
