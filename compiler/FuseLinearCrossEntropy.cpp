//===- FuseLinearCrossEntropy.cpp - a head and its loss as one op ---------===//
#include "compiler/FuseLinearCrossEntropy.h"

#include "compiler/GraphWriter.h"

#include <map>
#include <set>
#include <variant>

namespace shardc::compiler {
namespace {

using Shape = std::vector<int64_t>;

int64_t elements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Where each value comes from and how often it is read.
struct Values {
  std::map<std::string, size_t> producer; // node index
  std::map<std::string, Shape> shapes;
  std::map<std::string, int> reads; // node inputs, outputs, buffer updates
  std::set<std::string> names;

  explicit Values(const Graph &graph) {
    for (const GraphParam &param : graph.params) {
      shapes[param.name] = param.shape;
      names.insert(param.name);
    }
    for (const GraphInput &input : graph.inputs) {
      shapes[input.name] = input.shape;
      names.insert(input.name);
    }
    for (size_t k = 0; k < graph.nodes.size(); ++k) {
      const GraphNode &node = graph.nodes[k];
      for (size_t r = 0; r < node.names.size(); ++r) {
        producer[node.names[r]] = k;
        shapes[node.names[r]] = node.shapes[r];
        names.insert(node.names[r]);
      }
      for (const std::string &input : node.inputs)
        ++reads[input];
    }
    for (const std::string &output : graph.outputs)
      ++reads[output];
    for (const BufferUpdate &update : graph.updates)
      ++reads[update.value];
  }

  const GraphNode *producedBy(const Graph &graph, const std::string &value,
                              size_t &index) const {
    auto it = producer.find(value);
    if (it == producer.end())
      return nullptr;
    index = it->second;
    return &graph.nodes[index];
  }

  std::string fresh(const std::string &stem) {
    return freshValueName(names, stem);
  }
};

/// The pieces of one fusable cross_entropy, or the reason it is not one.
struct Match {
  size_t loss = 0, linear = 0;
  std::vector<size_t> between; // reshapes and at most one cast
  std::string why;             // empty: fusable
};

Match match(const Graph &graph, const Values &values, size_t lossIndex) {
  const GraphNode &loss = graph.nodes[lossIndex];
  Match m;
  m.loss = lossIndex;
  const std::string where = "cross_entropy '" + loss.names[0] + "'";
  std::string value = loss.inputs[0];
  const Shape logits = values.shapes.at(value);
  const GraphNode *node = nullptr;
  size_t index = 0;
  int casts = 0;
  while (true) {
    node = values.producedBy(graph, value, index);
    if (values.reads.at(value) != 1) {
      m.why = where + ": its logits pass through '" + value +
              "', which something else reads too";
      return m;
    }
    // A bfloat16 model's logits.float() (Hugging Face's loss): the fused op
    // casts them the same way (logits_dtype).
    const bool cast = node && node->op == "cast" && casts++ == 0;
    if (!node || (node->op != "reshape" && !cast))
      break;
    m.between.push_back(index);
    value = node->inputs[0];
  }
  if (!node || node->op != "linear") {
    m.why = where + ": its logits '" + value + "' come from " +
            (node ? node->op : std::string("the graph's inputs")) +
            ", not a linear";
    return m;
  }
  if (node->inputs.size() > 2) {
    m.why = where + ": its linear '" + value + "' has a bias";
    return m;
  }
  const Shape &weight = values.shapes.at(node->inputs[1]);
  if (weight.size() != 2 || logits.size() != 2 || logits[1] != weight[0]) {
    m.why = where + ": its logits " + std::to_string(logits.size()) +
            "-d do not keep the linear's output features as their last dim";
    return m;
  }
  m.linear = index;
  return m;
}

} // namespace

int fuseLinearCrossEntropy(Graph &graph, std::string &whyNot) {
  Values values(graph);
  std::vector<Match> matches;
  for (size_t k = 0; k < graph.nodes.size(); ++k) {
    if (graph.nodes[k].op != "cross_entropy")
      continue;
    Match m = match(graph, values, k);
    if (m.why.empty())
      matches.push_back(std::move(m));
    else if (whyNot.empty())
      whyNot = m.why;
  }
  if (matches.empty())
    return 0;

  std::set<size_t> removed;
  std::map<size_t, std::vector<GraphNode>> replacement; // at a loss's index
  for (const Match &m : matches) {
    const GraphNode &linear = graph.nodes[m.linear];
    // The casts it may pass through are to a float dtype (the rule checks
    // it again): the loss's dtype is the logits'.
    const GraphNode &loss = graph.nodes[m.loss];
    removed.insert(m.linear);
    removed.insert(m.between.begin(), m.between.end());
    const std::string &x = linear.inputs[0];
    const Shape &xShape = values.shapes.at(x);
    const int64_t H = xShape.empty() ? 1 : xShape.back();
    const Shape rows = {H ? elements(xShape) / H : 0, H};
    std::vector<GraphNode> nodes;
    std::string input = x;
    if (xShape != rows) { // the tokens as rows: [B, T, H] -> [B * T, H]
      GraphNode reshape;
      reshape.names = {values.fresh(x + ".rows")};
      reshape.op = "reshape";
      reshape.inputs = {x};
      reshape.ints = rows;
      reshape.shapes = {rows};
      reshape.dtype = linear.dtype;
      reshape.path = linear.path;
      input = reshape.names[0];
      nodes.push_back(std::move(reshape));
    }
    GraphNode fused;
    fused.names = loss.names;
    fused.op = "linear_cross_entropy";
    fused.familyOp = true;
    fused.inputs = {input, loss.inputs[1], linear.inputs[1]};
    fused.shapes = loss.shapes;
    fused.dtype = loss.dtype;
    fused.path = loss.path;
    if (loss.dtype != linear.dtype)
      fused.attrs["logits_dtype"] = std::string(plan::dtypeName(loss.dtype));
    if (const int64_t ignored = ignoredTarget(loss); ignored != -100)
      fused.attrs["ignore_index"] = ignored;
    nodes.push_back(std::move(fused));
    replacement[m.loss] = std::move(nodes);
  }
  std::vector<GraphNode> nodes;
  for (size_t k = 0; k < graph.nodes.size(); ++k) {
    if (auto it = replacement.find(k); it != replacement.end())
      for (GraphNode &node : it->second)
        nodes.push_back(std::move(node));
    else if (!removed.count(k))
      nodes.push_back(std::move(graph.nodes[k]));
  }
  graph.nodes = std::move(nodes);
  return static_cast<int>(matches.size());
}

std::string fusedLossGraphText(const std::string &text,
                               const std::string &sourceName,
                               const std::string &what) {
  Graph graph = parseGraph(text, sourceName);
  std::string whyNot;
  if (!fuseLinearCrossEntropy(graph, whyNot))
    throw GraphError(
        sourceName + ": " + what + ": nothing to fuse: " +
        (whyNot.empty() ? "the graph has no cross_entropy" : whyNot));
  return rewrittenGraphText(text, graph);
}

} // namespace shardc::compiler
