//===- GradientRules.h - each graph op's gradient, as graph nodes -*- C++
//-*-===//
//
// A gradient rule writes the vector-Jacobian product of one op: given the
// gradients of the node's results, the gradients of its inputs, as graph
// nodes emitted through a GradientBuilder. Rules compose existing forward
// ops (no backward kernels), so every backend that runs the forward runs
// the backward, and the memory model predicts it like any forward.
//
// docs/training.md lists the ops that have a rule; an op without one on the
// path from a parameter to the loss is an error naming the node.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "compiler/GradientBuilder.h"

#include <functional>
#include <string>
#include <vector>

namespace shardc::compiler {

/// The inputs of one node's backward step.
struct GradientStep {
  const GraphNode &node;
  /// One per result of the node: the gradient's name, "" when no gradient
  /// reaches that result (a split piece the loss does not read).
  std::vector<std::string> resultGrads;
  /// One per input: whether the caller needs that input's gradient (it
  /// leads back to a parameter).
  std::vector<bool> wanted;

  const std::string &input(size_t i) const { return node.inputs.at(i); }
  const std::string &result() const { return node.names.at(0); }
  const std::string &grad() const { return resultGrads.at(0); }
};

/// Returns one gradient name per input ("" where not wanted or none).
using GradientRule = std::function<std::vector<std::string>(
    GradientBuilder &, const GradientStep &)>;

/// The rule of graph op `op`, or nullptr.
const GradientRule *findGradientRule(const std::string &op);

/// The graph ops that have a rule, sorted (for messages and the docs test).
std::vector<std::string> opsWithGradients();

} // namespace shardc::compiler
