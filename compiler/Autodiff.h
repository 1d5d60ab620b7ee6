//===- Autodiff.h - a graph's backward pass, as more graph nodes -*- C++
//-*-===//
//
// Reverse-mode differentiation on the graph format: the joint graph runs
// forward, then the gradient rules (GradientRules.h) of every node between
// the parameters and the loss in reverse order, and returns each
// parameter's gradient as an output "grad.NAME". The joint graph is an
// ordinary graph: the FSDP pass gathers a unit again around its backward
// use (its runs, passes/FsdpSharding.cpp), forward values live until their
// last backward use, and the memory model predicts it all exactly
// (docs/training.md).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

namespace shardc::compiler {

inline constexpr const char *kGradientPrefix = "grad.";

struct JointGraph {
  /// The graph file's text with the backward nodes, the constants they use
  /// (non-persistent buffers) and the outputs added: the loss (unless it is
  /// one already), then "grad.NAME" per parameter the loss depends on, in
  /// the parameters' order.
  std::string text;
  /// Parameters the loss does not depend on (they get no gradient, as
  /// torch leaves their .grad None).
  std::vector<std::string> withoutGradient;
};

/// Differentiates the 0-d floating value `loss` of the graph `graphText`
/// with respect to every parameter (buffers are constants). Throws
/// GraphError naming the file and the reason: a loss that is not a 0-d
/// floating value, or does not depend on any parameter; ops without a
/// gradient rule on the way (all of them, each with its node).
/// fuseLinearCrossEntropy: first make each cross_entropy of a linear's
/// logits one linear_cross_entropy op (FuseLinearCrossEntropy.h: the same
/// bits, no [tokens, vocabulary] logits); a graph with none to fuse is a
/// GraphError saying why.
JointGraph withGradients(const std::string &graphText,
                         const std::string &sourceName, const std::string &loss,
                         bool fuseLinearCrossEntropy = false);

} // namespace shardc::compiler
