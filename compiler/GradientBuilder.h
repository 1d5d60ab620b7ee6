//===- GradientBuilder.h - emitting backward nodes into a graph -*- C++ -*-===//
//
// The gradient rules (GradientRules.cpp) write the backward pass as ordinary
// graph nodes, the same JSON a graph file holds. Each node is read back by
// the graph reader as it is emitted (readNode: its shape inferred, its
// operands checked), so a rule can never produce a graph the rest of the
// pipeline has not validated, and the joint graph is sharded, gathered and
// predicted exactly like any forward.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "compiler/GraphNodes.h"

#include <map>
#include <string>
#include <vector>

namespace shardc::compiler {

using Shape = std::vector<int64_t>;

class GradientBuilder {
public:
  /// Appends to `document`'s "nodes" and "buffers"; `types` holds the type of
  /// every value defined so far and grows with each emitted node.
  GradientBuilder(json &document, const GraphReader &reader, ValueTypes &types,
                  std::string device);

  /// Sets where the nodes emitted next come from, for their paths
  /// ("gradient of nodes[7]") in messages.
  void setOrigin(std::string origin) { origin_ = std::move(origin); }

  /// Emits `{"op": op, "inputs": inputs, ...attributes}` and returns the name
  /// of its (single) result.
  std::string op(const std::string &op, const std::vector<std::string> &inputs,
                 json attributes = json::object());
  /// The same with an explicit result name.
  std::string named(const std::string &name, const std::string &op,
                    const std::vector<std::string> &inputs,
                    json attributes = json::object());

  const Shape &shape(const std::string &value) const;
  plan::DType dtype(const std::string &value) const;
  bool defined(const std::string &value) const {
    return types_.count(value) != 0;
  }

  // ---- constants: non-persistent buffers, one per (value, dtype, shape) ----
  /// A 0-d tensor holding `value`.
  std::string scalar(double value, plan::DType dtype);
  /// A tensor of `shape` filled with zeros.
  std::string zeros(const Shape &shape, plan::DType dtype);
  /// A tensor of `shape` filled with `value`.
  std::string filled(const Shape &shape, plan::DType dtype, double value);
  /// [n] holding 0, 1, ..., n - 1 (exact in float32 below 2^24).
  std::string arange(int64_t n, plan::DType dtype);
  /// The [n, n] identity.
  std::string identity(int64_t n, plan::DType dtype);

  // ---- shape helpers ----
  std::string reshape(const std::string &x, const Shape &shape);
  /// Sums `g` over the dims numpy broadcasting added or stretched, so the
  /// result has `target`'s shape (the gradient of a broadcast operand).
  std::string reduceTo(const std::string &g, const Shape &target);
  /// Broadcasts `x` (same rank as `target`, 1 where it is stretched) to
  /// `target`: a stride-0 as_strided copy.
  std::string expandTo(const std::string &x, const Shape &target);

  // ---- arithmetic ----
  std::string add(const std::string &a, const std::string &b) {
    return op("add", {a, b});
  }
  /// `existing + contribution`, two gradients of one value summed. When the
  /// contribution is an embedding_backward nothing reads yet and `existing`
  /// was defined before it, `existing` becomes its acc operand instead (the
  /// same bits as the add; the lowering then sums a tied embedding's two
  /// gradients in one [V, D] buffer, not two).
  std::string accumulate(const std::string &existing,
                         const std::string &contribution);
  std::string sub(const std::string &a, const std::string &b) {
    return op("sub", {a, b});
  }
  std::string mul(const std::string &a, const std::string &b) {
    return op("mul", {a, b});
  }
  std::string div(const std::string &a, const std::string &b) {
    return op("div", {a, b});
  }
  /// x * value, with value as a 0-d constant of x's dtype.
  std::string scale(const std::string &x, double value);
  /// 1 - x.
  std::string oneMinus(const std::string &x) {
    return sub(scalar(1.0, dtype(x)), x);
  }
  /// x + value.
  std::string shift(const std::string &x, double value);
  /// Sums (or means) x over `dims`, keeping them as 1.
  std::string sumKeep(const std::string &x, const std::vector<int64_t> &dims);
  std::string meanKeep(const std::string &x, const std::vector<int64_t> &dims);
  /// A 0/1 comparison result (int64) as x's floating dtype.
  std::string asFloat(const std::string &mask, plan::DType dtype);

private:
  std::string fresh(const std::string &stem);
  std::string constant(const std::string &key, const Shape &shape,
                       plan::DType dtype, json init);

  json &document_;
  const GraphReader &reader_;
  ValueTypes &types_;
  std::string device_;
  std::string origin_;
  std::map<std::string, std::string> constants_;
  int64_t counter_ = 0;
};

/// Row-major element count.
int64_t elementCount(const Shape &shape);

} // namespace shardc::compiler
