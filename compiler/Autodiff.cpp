//===- Autodiff.cpp - a graph's backward pass, as more graph nodes --------===//
#include "compiler/Autodiff.h"
#include "compiler/FuseLinearCrossEntropy.h"
#include "compiler/GradientRules.h"
#include "compiler/GraphWriter.h"
#include "compiler/MasterWeights.h"

#include <map>
#include <set>

namespace shardc::compiler {
namespace {

bool isFloating(plan::DType dtype) { return dtype != plan::DType::I64; }

std::string joined(const std::vector<std::string> &names) {
  std::string text;
  for (const std::string &name : names)
    text += (text.empty() ? "" : ", ") + name;
  return text;
}

/// Which values carry a gradient: those computed in floating point from a
/// parameter (buffers and inputs are constants to the loss), not through a
/// `detach` (torch's x.detach(): a constant too, so nothing computed from
/// it alone needs a gradient, or a rule).
std::set<std::string> dependOnParameters(const Graph &graph) {
  std::set<std::string> result;
  for (const GraphParam &param : graph.params)
    if (!param.isBuffer && isFloating(param.dtype))
      result.insert(param.name);
  for (const GraphNode &node : graph.nodes) {
    if (node.op == "detach")
      continue;
    bool depends = false;
    for (const std::string &input : node.inputs)
      depends |= result.count(input) != 0;
    if (depends && isFloating(node.dtype))
      for (const std::string &name : node.names)
        result.insert(name);
  }
  return result;
}

/// Which values the loss is computed from (itself included).
std::set<std::string> feedLoss(const Graph &graph, const std::string &loss) {
  std::set<std::string> result = {loss};
  for (auto node = graph.nodes.rbegin(); node != graph.nodes.rend(); ++node) {
    bool feeds = false;
    for (const std::string &name : node->names)
      feeds |= result.count(name) != 0;
    if (feeds)
      result.insert(node->inputs.begin(), node->inputs.end());
  }
  return result;
}

} // namespace

JointGraph withGradients(const std::string &fileText,
                         const std::string &sourceName, const std::string &loss,
                         bool fuseLinearCrossEntropy) {
  // The joint graph extends the file's own JSON, which must be the graph
  // parseGraph reads: master weights expanded (a no-op when already done).
  std::string graphText = expandMasterWeights(fileText, sourceName);
  if (fuseLinearCrossEntropy)
    graphText =
        fusedLossGraphText(graphText, sourceName,
                           "--grad " + loss + ": --fuse-linear-cross-entropy");
  Graph graph = parseGraph(graphText, sourceName);
  GraphReader reader(sourceName);
  const std::string where = sourceName + ": --grad " + loss + ": ";

  ValueTypes types;
  for (const GraphParam &param : graph.params)
    types[param.name] = {param.shape, param.dtype};
  for (const GraphInput &input : graph.inputs)
    types[input.name] = {input.shape, input.dtype};
  for (const GraphNode &node : graph.nodes)
    for (size_t r = 0; r < node.names.size(); ++r)
      types[node.names[r]] = {node.shapes[r], node.dtype};

  auto lossType = types.find(loss);
  if (lossType == types.end())
    throw GraphError(where + "not a value of the graph (its outputs: " +
                     joined(graph.outputs) + ")");
  if (!lossType->second.first.empty() || !isFloating(lossType->second.second))
    throw GraphError(where + "the loss must be a 0-d floating tensor, got " +
                     plan::dtypeName(lossType->second.second) + " " +
                     std::to_string(lossType->second.first.size()) +
                     "-d (reduce it first, e.g. with a mean)");

  const std::set<std::string> carries = dependOnParameters(graph);
  const std::set<std::string> feeds = feedLoss(graph, loss);
  if (!carries.count(loss))
    throw GraphError(where + "the loss does not depend on any parameter");

  // The nodes the backward pass runs through, checked before anything is
  // emitted so that one message lists every op still missing a rule.
  std::vector<const GraphNode *> active;
  std::map<std::string, std::vector<const GraphNode *>> missing; // by op
  for (const GraphNode &node : graph.nodes) {
    bool on = false;
    for (const std::string &name : node.names)
      on |= feeds.count(name) && carries.count(name);
    if (!on)
      continue;
    active.push_back(&node);
    if (!findGradientRule(node.op))
      missing[node.op].push_back(&node);
  }
  if (!missing.empty()) {
    std::vector<std::string> parts;
    for (const auto &[op, nodes] : missing)
      parts.push_back(
          op + " (" + nodes.front()->path + " '" +
          nodes.front()->names.front() + "'" +
          (nodes.size() > 1
               ? " and " + std::to_string(nodes.size() - 1) + " more"
               : "") +
          ")");
    throw GraphError(
        where + "no gradient rule yet for op " + joined(parts) +
        " on the way from the parameters to the loss (ops with one: " +
        joined(opsWithGradients()) + "; docs/training.md)");
  }

  json document = json::parse(graphText);
  std::string device =
      graph.params.empty() ? "cpu" : graph.params.front().device;
  GradientBuilder builder(document, reader, types, device);

  std::map<std::string, std::string> grads;
  grads[loss] = builder.scalar(1.0, lossType->second.second);
  for (auto it = active.rbegin(); it != active.rend(); ++it) {
    const GraphNode &node = **it;
    GradientStep step{node, {}, {}};
    bool reached = false;
    for (const std::string &name : node.names) {
      auto grad = grads.find(name);
      step.resultGrads.push_back(grad == grads.end() ? "" : grad->second);
      reached |= grad != grads.end();
    }
    if (!reached)
      continue;
    for (const std::string &input : node.inputs)
      step.wanted.push_back(carries.count(input) && feeds.count(input));
    builder.setOrigin(node.path);
    std::vector<std::string> inputGrads;
    try {
      inputGrads = (*findGradientRule(node.op))(builder, step);
    } catch (const GraphError &error) {
      // A rule that refuses this node's attributes (gradients.unsupported)
      // names the node; the file and the loss come first, as everywhere.
      std::string what = error.what();
      if (what.rfind(sourceName + ":", 0) == 0)
        throw;
      throw GraphError(where + what);
    } catch (const std::exception &error) {
      // A rule's own bug (an attribute it misread) names the node and
      // exits like any graph error, never as a crash.
      throw GraphError(where + "internal error in the gradient rule of " +
                       node.op + " at " + node.path + ": " + error.what());
    }
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (i >= inputGrads.size() || inputGrads[i].empty() || !step.wanted[i])
        continue;
      const std::string &input = node.inputs[i];
      if (builder.shape(inputGrads[i]) != types.at(input).first)
        throw GraphError(where + "internal error: the gradient rule of " +
                         node.op + " at " + node.path + " gave input " +
                         std::to_string(i) + " a gradient of another shape");
      auto [existing, fresh] = grads.emplace(input, inputGrads[i]);
      if (!fresh)
        existing->second = builder.accumulate(existing->second, inputGrads[i]);
    }
  }

  JointGraph joint;
  json &outputs = document["outputs"];
  if (std::find(graph.outputs.begin(), graph.outputs.end(), loss) ==
      graph.outputs.end())
    outputs.push_back(loss);
  for (const GraphParam &param : graph.params) {
    if (param.isBuffer)
      continue;
    auto grad = grads.find(param.name);
    if (grad == grads.end()) {
      joint.withoutGradient.push_back(param.name);
      continue;
    }
    const std::string name = kGradientPrefix + param.name;
    if (types.count(name))
      throw GraphError(where + "the graph already defines \"" + name +
                       "\", the name of " + param.name + "'s gradient");
    // A reshape to its own shape names the gradient "grad.NAME" in the
    // outputs: the lowering makes it an alias, no copy.
    builder.setOrigin("the gradient of " + param.path);
    builder.named(name, "reshape", {grad->second}, {{"shape", param.shape}});
    outputs.push_back(name);
  }
  // Every emitted node was read as it was made; callers parse the joint
  // graph from the top, as any graph file.
  joint.text = document.dump(1);
  return joint;
}

} // namespace shardc::compiler
