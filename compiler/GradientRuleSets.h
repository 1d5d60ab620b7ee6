//===- GradientRuleSets.h - the gradient rules, by family -------*- C++ -*-===//
//
// Internal to the gradient rules: each file contributes the rules of one
// family of ops (GradientRules.cpp: arithmetic, linear algebra, shapes,
// norms over the last dim, losses; PointwiseGradients.cpp: the elementwise
// functions; AttentionGradients.cpp: attention and
// rotary embeddings; ImageGradients.cpp: convolution, pooling and the
// image norms; ExpertGradients.cpp: mixtures of experts' routers and
// experts) and GradientRules.cpp joins them into one table.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "compiler/GradientRules.h"

#include <map>
#include <variant>

namespace shardc::compiler::gradients {

using Grads = std::vector<std::string>;
using RuleTable = std::map<std::string, GradientRule>;

RuleTable pointwiseRules();
RuleTable attentionRules();
RuleTable imageRules();
RuleTable expertRules();

inline int64_t normalizedDim(int64_t dim, size_t rank) {
  return dim < 0 ? dim + static_cast<int64_t>(rank) : dim;
}

/// A family op's attribute, or nullptr.
inline const plan::AttrValue *attr(const GraphNode &node, const char *key) {
  auto it = node.attrs.find(key);
  return it == node.attrs.end() ? nullptr : &it->second;
}

/// A family op's attribute of kind T (int64_t, double, an int list), or
/// `fallback` when absent.
template <typename T>
T attrOr(const GraphNode &node, const char *key, T fallback) {
  const plan::AttrValue *value = attr(node, key);
  if (!value || !std::holds_alternative<T>(*value))
    return fallback;
  return std::get<T>(*value);
}

inline std::vector<int64_t> intsAttr(const GraphNode &node, const char *key,
                                     std::vector<int64_t> fallback = {}) {
  return attrOr(node, key, std::move(fallback));
}
inline int64_t intAttr(const GraphNode &node, const char *key,
                       int64_t fallback) {
  return attrOr(node, key, fallback);
}
inline double floatAttr(const GraphNode &node, const char *key,
                        double fallback) {
  return attrOr(node, key, fallback);
}

/// A one-input op: {gx} if the input's gradient is wanted.
inline Grads pointwise(const GradientStep &s, const std::string &gx) {
  Grads out(s.node.inputs.size());
  if (s.wanted[0])
    out[0] = gx;
  return out;
}

/// A rule that cannot handle this node's attributes: the message names the
/// op and why; Autodiff adds the file, the loss and the node.
[[noreturn]] inline void unsupported(const GradientStep &s,
                                     const std::string &why) {
  throw GraphError("the gradient rule of " + s.node.op + " at " + s.node.path +
                   " ('" + s.node.names.front() + "') " + why);
}

} // namespace shardc::compiler::gradients
