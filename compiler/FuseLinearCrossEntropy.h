//===- FuseLinearCrossEntropy.h - a head and its loss as one op -*- C++ -*-===//
//
// A language model's loss is cross_entropy(linear(h, W), targets): logits
// [tokens, vocabulary] that the joint graph keeps from forward until the
// loss's backward and then turns into their gradient of the same size
// (GPT-2's 50,257 columns over 2,048 tokens: 412 MB in float32; Llama 3's
// 128,256 over 4,096 tokens: 1 GB in bfloat16). The rewrite here makes that
// pair one linear_cross_entropy op, whose kernels make the logits 256 rows
// at a time in forward and again in backward (linear_cross_entropy_backward,
// the gradient rule's op): the loss and every gradient keep their bits
// (runtime/cpu/LossHeadKernels.cpp says why), the head's GEMM runs twice
// more, and no [tokens, vocabulary] tensor exists (docs/training.md).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "compiler/Graph.h"

#include <string>

namespace shardc::compiler {

/// `graph` with every cross_entropy(reshape*(linear(x, W)), targets) fused
/// into linear_cross_entropy(reshape(x, [N, H]), targets, W): the linear
/// has no bias, its output and the reshapes between (and at most one cast,
/// a bfloat16 model's logits.float(): the op's logits_dtype) are read by
/// nothing else (and are not outputs), the logits keep the vocabulary as
/// their last dim (the fused op keeps the loss's ignore_index). Returns
/// how many it fused; `whyNot` gets, for the first cross_entropy it could not
/// fuse, the reason (e.g. "its logits 'out' come from add, not a linear").
int fuseLinearCrossEntropy(Graph &graph, std::string &whyNot);

/// The graph file text `text` with its losses fused as above (the rest of
/// the document kept: compiler/GraphWriter.h). Nothing to fuse is a
/// GraphError that names `sourceName`, `what` (the option, e.g. "--grad
/// loss: --fuse-linear-cross-entropy") and the reason.
std::string fusedLossGraphText(const std::string &text,
                               const std::string &sourceName,
                               const std::string &what);

} // namespace shardc::compiler
