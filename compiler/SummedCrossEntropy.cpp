//===- SummedCrossEntropy.cpp - a loss summed over the counted targets ----===//
//
// findSummedCrossEntropies: the exporter's form of cross_entropy with
// reduction='sum' (SummedCrossEntropy.h), matched node by node.
//
//===----------------------------------------------------------------------===//
#include "compiler/SummedCrossEntropy.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace shardc::compiler {

namespace {

/// A number attribute (`value` of ne), as the parser keeps it.
std::optional<double> numberAttr(const GraphNode &node,
                                 const std::string &key) {
  if (auto it = node.numbers.find(key); it != node.numbers.end())
    return it->second;
  if (auto it = node.attrs.find(key); it != node.attrs.end()) {
    if (const double *value = std::get_if<double>(&it->second))
      return *value;
    if (const int64_t *value = std::get_if<int64_t>(&it->second))
      return static_cast<double>(*value);
  }
  return std::nullopt;
}

class Matcher {
public:
  explicit Matcher(const Graph &graph) {
    for (const GraphNode &node : graph.nodes) {
      for (const std::string &name : node.names)
        producer_[name] = &node;
      for (const std::string &in : node.inputs)
        ++readers_[in];
    }
    for (const std::string &output : graph.outputs)
      readers_[output] += 2; // read by the caller too: never single-use
    for (const GraphParam &param : graph.params)
      if (param.isBuffer && !param.persistent && param.shape.empty() &&
          param.init.size() == 1 &&
          ((param.init[0].op == "fill" &&
            param.init[0].numbers.count("value") &&
            param.init[0].number("value") == 0.0) ||
           param.init[0].op == "zeros"))
        zeros_.insert(param.name);
  }

  /// The summed cross_entropy whose guard is `where` node `summed`.
  std::optional<SummedCrossEntropy> match(const GraphNode &summed) const {
    if (summed.op != "where" || summed.inputs.size() != 3 ||
        !zeros_.count(summed.inputs[2]) || summed.names.size() != 1)
      return std::nullopt;
    const GraphNode *any = node(summed.inputs[0], "ne");
    const GraphNode *product = node(summed.inputs[1], "mul");
    if (!any || !product || !singleUse(summed.inputs[0]) ||
        !singleUse(summed.inputs[1]) || numberAttr(*any, "value") != 0.0 ||
        product->inputs.size() != 2)
      return std::nullopt;
    const std::string &count = any->inputs[0];
    const auto counted =
        std::find(product->inputs.begin(), product->inputs.end(), count);
    if (counted == product->inputs.end())
      return std::nullopt;
    const std::string &loss =
        product->inputs[counted == product->inputs.begin() ? 1 : 0];
    const GraphNode *mean = producer(loss);
    if (!mean || !singleUse(loss) || mean->inputs.size() < 2 ||
        (mean->op != "cross_entropy" && mean->op != "linear_cross_entropy") ||
        !countsTargets(count, mean->inputs[1], ignoredTarget(*mean)))
      return std::nullopt;
    return SummedCrossEntropy{loss, count, product->names[0], any->names[0],
                              summed.names[0]};
  }

private:
  const GraphNode *producer(const std::string &name) const {
    auto it = producer_.find(name);
    return it == producer_.end() ? nullptr : it->second;
  }

  const GraphNode *node(const std::string &name, const char *op) const {
    const GraphNode *found = producer(name);
    return found && found->op == op && found->names.size() == 1 ? found
                                                                : nullptr;
  }

  bool singleUse(const std::string &name) const {
    auto it = readers_.find(name);
    return it != readers_.end() && it->second == 1;
  }

  /// Whether `count` is sum([cast](ne(targets, ignored))) over every dim.
  bool countsTargets(const std::string &count, const std::string &targets,
                     int64_t ignored) const {
    const GraphNode *sum = node(count, "sum");
    if (!sum || sum->inputs.size() != 1 || sum->attrs.count("dims") ||
        (!sum->shapes.empty() && !sum->shapes[0].empty()))
      return false;
    const GraphNode *kept = producer(sum->inputs[0]);
    if (kept && kept->op == "cast" && kept->inputs.size() == 1)
      kept = producer(kept->inputs[0]);
    return kept && kept->op == "ne" && kept->inputs.size() == 1 &&
           kept->inputs[0] == targets &&
           numberAttr(*kept, "value") == static_cast<double>(ignored);
  }

  std::map<std::string, const GraphNode *> producer_;
  std::map<std::string, int> readers_;
  std::set<std::string> zeros_;
};

} // namespace

std::vector<SummedCrossEntropy> findSummedCrossEntropies(const Graph &graph) {
  const Matcher matcher(graph);
  std::vector<SummedCrossEntropy> found;
  for (const GraphNode &node : graph.nodes)
    if (auto summed = matcher.match(node))
      found.push_back(*summed);
  return found;
}

} // namespace shardc::compiler
