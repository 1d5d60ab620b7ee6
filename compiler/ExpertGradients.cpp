//===- ExpertGradients.cpp - mixture-of-experts gradient rules ------------===//
//
// A mixture of experts routes each token through k of E experts: a router
// (softmax, topk, gather of the chosen probabilities) and the experts
// themselves (moe_experts). topk's indices are int64 and carry no gradient;
// the chosen probabilities reach the router's weights through gather, and
// the experts' weights and the tokens through moe_experts_backward, one op
// per operand (docs/training.md, "Mixtures of experts").
//
//===----------------------------------------------------------------------===//
#include "compiler/GradientRuleSets.h"

namespace shardc::compiler::gradients {
namespace {

/// gather(x, dim, index): x's gradient adds g[i] at the element each y[i]
/// was read from. Its flat position in x, sum over m != dim of i_m
/// stride_m plus index[i] stride_dim, is computed in int64 and the sum is
/// embedding_backward's: each element's reads summed in order, in double
/// (rows of one value), so repeated indices add up as torch's scatter_add.
Grads gatherRule(GradientBuilder &b, const GradientStep &s) {
  Grads out(2);
  if (!s.wanted[0])
    return out;
  const Shape &x = b.shape(s.input(0)), &index = b.shape(s.input(1));
  const size_t rank = x.size();
  const int64_t dim = normalizedDim(intAttr(s.node, "dim", 0), rank);
  std::vector<int64_t> stride(rank, 1);
  for (size_t m = rank; m-- > 1;)
    stride[m - 1] = stride[m] * x[m];
  auto times = [&](const std::string &v, int64_t factor) {
    return factor == 1 ? v
                       : b.mul(v, b.scalar(double(factor), plan::DType::I64));
  };
  std::string flat = times(s.input(1), stride[size_t(dim)]);
  for (size_t m = 0; m < rank; ++m) {
    if (int64_t(m) == dim || index[m] == 1)
      continue;
    if (index[m] > (int64_t(1) << 24))
      unsupported(s, "needs the positions along a dim of " +
                         std::to_string(index[m]) +
                         " entries, past float32's exact integers (2^24)");
    Shape along(rank, 1);
    along[m] = index[m];
    // arange in float32 (exact below 2^24; int64 constants are fills or
    // loads only), cast to int64.
    std::string positions = b.op("cast", {b.arange(index[m], plan::DType::F32)},
                                 {{"dtype", "int64"}});
    flat = b.add(flat, times(b.reshape(positions, along), stride[m]));
  }
  const int64_t reads = elementCount(index), elements = elementCount(x);
  std::string summed =
      b.op("embedding_backward",
           {b.reshape(s.grad(), {reads, 1}), b.reshape(flat, {reads})},
           {{"rows", elements}});
  out[0] = b.reshape(summed, x);
  return out;
}

/// moe_experts(x, index, weights, gate_up, down): one moe_experts_backward
/// per wanted operand (index is int64: none). Where two or more are wanted
/// they share one moe_experts_hidden (each routed row's [gate; up], the
/// GEMM each would otherwise recompute), and where two or more of x,
/// weights and gate_up are wanted one moe_experts_gated_grad (each routed
/// row's da' = g down[e], the GEMM those three would each recompute):
/// transient, [T, k, 2I] and [T, k, I], from the first backward op to the
/// last. Only in float32, where the stored rows are the recomputed bits;
/// 16-bit ones would round them.
Grads moeExpertsRule(GradientBuilder &b, const GradientStep &s) {
  static const char *const kOperands[] = {"x", "", "weights", "gate_up",
                                          "down"};
  Grads out(s.node.inputs.size());
  json attributes = json::object();
  if (const plan::AttrValue *act = attr(s.node, "activation"))
    attributes["activation"] = std::get<std::string>(*act);
  std::vector<std::string> operands = s.node.inputs;
  operands.push_back(s.grad());
  int wanted = 0, readingGatedGrad = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    wanted += i != 1 && s.wanted[i];
    readingGatedGrad += (i == 0 || i == 2 || i == 3) && s.wanted[i];
  }
  std::string gatedGrad;
  if (wanted >= 2 && b.dtype(s.input(0)) == plan::DType::F32) {
    operands.push_back(
        b.op("moe_experts_hidden", {s.input(0), s.input(1), s.input(3)}));
    if (readingGatedGrad >= 2)
      gatedGrad =
          b.op("moe_experts_gated_grad", {s.grad(), s.input(1), s.input(4)});
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (i == 1 || !s.wanted[i])
      continue;
    json withWrt = attributes;
    withWrt["wrt"] = kOperands[i];
    // down's gradient does not read da' (so it does not hold it alive).
    std::vector<std::string> these = operands;
    if (!gatedGrad.empty() && i != 4)
      these.push_back(gatedGrad);
    out[i] = b.op("moe_experts_backward", these, withWrt);
  }
  return out;
}

} // namespace

RuleTable expertRules() {
  return {{"gather", gatherRule}, {"moe_experts", moeExpertsRule}};
}

} // namespace shardc::compiler::gradients
