//===- AttentionGradients.cpp - attention and rotary embedding rules ------===//
//
// scaled_dot_product_attention's backward recomputes the probabilities from
// q and k (as FlashAttention's backward does) rather than keeping the
// [B, H, T, S] matrix of every layer alive from forward to backward: the
// joint graph then saves only q, k and v per layer. On long sequences the
// recomputation itself goes a block of queries at a time (sdpa_backward).
//
//===----------------------------------------------------------------------===//
#include "compiler/GradientRuleSets.h"

#include <cmath>
#include <limits>

namespace shardc::compiler::gradients {
namespace {

std::string swapLast(GradientBuilder &b, const std::string &x) {
  return b.op("transpose", {x}, {{"dim0", -2}, {"dim1", -1}});
}

/// k or v with Hkv heads read by H = G * Hkv query heads: [B, Hkv, S, E]
/// repeated to [B, H, S, E] (head h reads head h / G).
std::string repeatHeads(GradientBuilder &b, const std::string &x,
                        int64_t groups) {
  if (groups == 1)
    return x;
  const Shape &s = b.shape(x);
  std::string wide = b.expandTo(b.reshape(x, {s[0], s[1], 1, s[2], s[3]}),
                                {s[0], s[1], groups, s[2], s[3]});
  return b.reshape(wide, {s[0], s[1] * groups, s[2], s[3]});
}

/// The gradient of repeatHeads: each shared head sums its G readers'.
std::string sumHeads(GradientBuilder &b, const std::string &g, int64_t groups) {
  if (groups == 1)
    return g;
  const Shape &s = b.shape(g);
  std::string split = b.reshape(g, {s[0], s[1] / groups, groups, s[2], s[3]});
  return b.reshape(b.sumKeep(split, {2}), {s[0], s[1] / groups, s[2], s[3]});
}

/// Attention whose [B, H, T, S] probabilities reach this many elements (64
/// MiB in float32: 4,096 queries and keys of one head) is differentiated
/// by sdpa_backward, a block of queries at a time, instead of the graph ops
/// below, which hold up to three such tensors at once: the same bits
/// (runtime/cpu/AttentionBackwardKernels.cpp), for a few more GEMMs.
constexpr int64_t kBlockwiseAttentionElements = int64_t{1} << 24;

Grads sdpaRule(GradientBuilder &b, const GradientStep &s) {
  const std::string &q = s.input(0), &k = s.input(1), &v = s.input(2);
  const Shape &qs = b.shape(q), &ks = b.shape(k);
  const int64_t T = qs[2], S = ks[2], groups = qs[1] / ks[1];
  const double scale = s.node.number("scale");
  const plan::DType dt = b.dtype(q);
  const bool masked = s.node.inputs.size() > 3;
  // A mask's own gradient (a learned bias) is the scores' gradient summed
  // to its shape: the graph ops below make it; sdpa_backward does not.
  if (!(masked && s.wanted[3]) &&
      qs[0] * qs[1] * T * S >= kBlockwiseAttentionElements) {
    Grads out(s.node.inputs.size());
    std::vector<std::string> operands = {q, k, v, s.grad()};
    if (masked)
      operands.push_back(s.input(3));
    static const char *const kOperands[] = {"q", "k", "v"};
    for (size_t i = 0; i < 3; ++i)
      if (s.wanted[i])
        out[i] = b.op("sdpa_backward", operands,
                      {{"wrt", kOperands[i]},
                       {"scale", scale},
                       {"causal", int64_t{s.node.causal ? 1 : 0}}});
    return out;
  }
  std::string kx = repeatHeads(b, k, groups), vx = repeatHeads(b, v, groups);
  std::string scores = b.scale(b.op("matmul", {q, swapLast(b, kx)}), scale);
  if (masked)
    scores = b.add(scores, s.input(3));
  if (s.node.causal) { // key j is seen by query i when j <= i (top left)
    std::string rows = b.reshape(b.arange(T, plan::DType::F32), {T, 1});
    std::string cols = b.reshape(b.arange(S, plan::DType::F32), {1, S});
    const double hidden =
        -std::numeric_limits<double>::infinity(); // as the kernel
    scores =
        b.op("where", {b.op("ge", {rows, cols}), scores, b.scalar(hidden, dt)});
  }
  std::string probs = b.op("softmax", {scores}, {{"dim", -1}});
  if (masked) {
    // A query whose keys are all masked (-inf) attends to nothing: the
    // kernel gives it zeros (torch's safe softmax), softmax gives NaN. Its
    // row max is -inf, the one value whose difference with itself is NaN.
    std::string top = b.op("amax", {scores},
                           {{"dims", std::vector<int64_t>{3}}, {"keepdim", 1}});
    std::string spread = b.sub(top, top);
    std::string none = b.op("ne", {spread, spread});
    probs = b.op("where", {none, b.scalar(0.0, dt), probs});
  }
  const std::string &g = s.grad();
  Grads out(s.node.inputs.size());
  if (s.wanted[2])
    out[2] = sumHeads(b, b.op("matmul", {swapLast(b, probs), g}), groups);
  if (!(s.wanted[0] || s.wanted[1] || (masked && s.wanted[3])))
    return out;
  std::string dprobs = b.op("matmul", {g, swapLast(b, vx)});
  std::string dscores =
      b.mul(probs, b.sub(dprobs, b.sumKeep(b.mul(dprobs, probs), {3})));
  if (s.wanted[0])
    out[0] = b.scale(b.op("matmul", {dscores, kx}), scale);
  if (s.wanted[1])
    out[1] = sumHeads(
        b, b.scale(b.op("matmul", {swapLast(b, dscores), q}), scale), groups);
  if (masked && s.wanted[3])
    out[3] = b.reduceTo(dscores, b.shape(s.input(3)));
  return out;
}

/// rotary_embedding rotates each pair (x[i], x[i + D/2]) by its position's
/// angle; the gradient rotates back. A rotation back is the rotation itself
/// between two swaps of the halves (P R P = R^T), so the rule reuses the
/// forward op and its exact angle tables.
Grads ropeRule(GradientBuilder &b, const GradientStep &s) {
  const Shape &shape = b.shape(s.input(0));
  const int64_t D = shape.back(), half = D / 2,
                last = static_cast<int64_t>(shape.size()) - 1;
  auto swapHalves = [&](const std::string &x) {
    std::string low =
        b.op("slice", {x}, {{"dim", last}, {"start", 0}, {"end", half}});
    std::string high =
        b.op("slice", {x}, {{"dim", last}, {"start", half}, {"end", D}});
    return b.op("cat", {high, low}, {{"dim", last}});
  };
  json attributes = json::object();
  if (auto theta = s.node.numbers.find("theta"); theta != s.node.numbers.end())
    attributes["theta"] = theta->second;
  return pointwise(s, swapHalves(b.op("rotary_embedding",
                                      {swapHalves(s.grad())}, attributes)));
}

} // namespace

RuleTable attentionRules() {
  return {{"scaled_dot_product_attention", sdpaRule},
          {"rotary_embedding", ropeRule}};
}

} // namespace shardc::compiler::gradients
