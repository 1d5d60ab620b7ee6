//===- GradientRules.cpp - each graph op's gradient, as graph nodes -------===//
//
// The formulas are torch's (tools/autograd/derivatives.yaml), written with
// the graph's forward ops. Where torch saves an intermediate (layer norm's
// mean and rstd) the rule recomputes it from the saved input: the joint
// graph keeps forward values alive until their last backward use, and a
// recomputation keeps fewer of them.
//
//===----------------------------------------------------------------------===//
#include "compiler/GradientRuleSets.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace shardc::compiler {
namespace {

using namespace gradients;

/// A family reduction's dims, normalized; absent means every dim.
std::vector<int64_t> reducedDims(const GraphNode &node, size_t rank) {
  std::vector<int64_t> dims;
  const plan::AttrValue *value = attr(node, "dims");
  if (value && std::holds_alternative<std::vector<int64_t>>(*value) &&
      !std::get<std::vector<int64_t>>(*value).empty()) {
    for (int64_t d : std::get<std::vector<int64_t>>(*value))
      dims.push_back(normalizedDim(d, rank));
  } else {
    dims.resize(rank);
    std::iota(dims.begin(), dims.end(), 0);
  }
  std::sort(dims.begin(), dims.end());
  return dims;
}

/// The gradient of a reduction's input: g with the reduced dims put back as
/// 1, broadcast to the input's shape.
std::string unreduce(GradientBuilder &b, const std::string &g,
                     const Shape &input, const std::vector<int64_t> &dims) {
  Shape kept = input;
  for (int64_t d : dims)
    kept[static_cast<size_t>(d)] = 1;
  return b.expandTo(b.reshape(g, kept), input);
}

Grads addRule(GradientBuilder &b, const GradientStep &s, bool subtract) {
  Grads out(2);
  if (s.wanted[0])
    out[0] = b.reduceTo(s.grad(), b.shape(s.input(0)));
  if (s.wanted[1]) {
    std::string g = subtract ? b.op("neg_out", {s.grad()}) : s.grad();
    out[1] = b.reduceTo(g, b.shape(s.input(1)));
  }
  return out;
}

Grads mulRule(GradientBuilder &b, const GradientStep &s) {
  Grads out(2);
  if (s.wanted[0])
    out[0] = b.reduceTo(b.mul(s.grad(), s.input(1)), b.shape(s.input(0)));
  if (s.wanted[1])
    out[1] = b.reduceTo(b.mul(s.grad(), s.input(0)), b.shape(s.input(1)));
  return out;
}

Grads divRule(GradientBuilder &b, const GradientStep &s) {
  Grads out(2);
  if (s.wanted[0])
    out[0] = b.reduceTo(b.div(s.grad(), s.input(1)), b.shape(s.input(0)));
  if (s.wanted[1]) { // d(a/b)/db = -(a/b)/b
    std::string g =
        b.op("neg_out", {b.div(b.mul(s.grad(), s.result()), s.input(1))});
    out[1] = b.reduceTo(g, b.shape(s.input(1)));
  }
  return out;
}

/// linear(x [..., K], W [N, K], bias [N]) = x W^T + bias, over M rows.
Grads linearRule(GradientBuilder &b, const GradientStep &s) {
  const Shape &x = b.shape(s.input(0)), &w = b.shape(s.input(1));
  const int64_t N = w[0], K = w[1],
                M = elementCount(x) / std::max<int64_t>(K, 1);
  std::string g2 = b.reshape(s.grad(), {M, N});
  Grads out(s.node.inputs.size());
  if (s.wanted[0])
    out[0] = b.reshape(b.op("matmul", {g2, s.input(1)}), x);
  if (s.wanted[1]) {
    std::string gT = b.op("transpose", {g2}, {{"dim0", 0}, {"dim1", 1}});
    out[1] = b.op("matmul", {gT, b.reshape(s.input(0), {M, K})});
  }
  if (s.node.inputs.size() > 2 && s.wanted[2])
    out[2] = b.reshape(b.sumKeep(g2, {0}), {N});
  return out;
}

/// matmul(a [..., M, K], b [..., K, N]) with broadcast batch dims.
Grads matmulRule(GradientBuilder &b, const GradientStep &s) {
  const Shape &a = b.shape(s.input(0)), &c = b.shape(s.input(1));
  if (a.size() < 2 || c.size() < 2)
    unsupported(s, "takes operands of at least 2 dims, got " +
                       std::to_string(a.size()) + " and " +
                       std::to_string(c.size()));
  auto swapLast = [&](const std::string &v) {
    return b.op("transpose", {v}, {{"dim0", -2}, {"dim1", -1}});
  };
  Grads out(2);
  if (s.wanted[0])
    out[0] = b.reduceTo(b.op("matmul", {s.grad(), swapLast(s.input(1))}), a);
  if (s.wanted[1]) {
    auto batchOf = [](const Shape &x) {
      return elementCount(Shape(x.begin(), x.end() - 2));
    };
    if (batchOf(c) == 1 && batchOf(a) > 1) {
      // One b for every batch of a (x [..., M, K] @ W [K, N]): its gradient
      // is one GEMM over all rows, a^T g as [K, rows] x [rows, N], not a
      // [batch, K, N] product per batch summed afterwards (nn.Transformer's
      // cross-attention key/value projection: 64 GEMMs of 2 rows into 32 MB).
      const int64_t rows = batchOf(a) * a[a.size() - 2], K = a.back(),
                    N = c.back();
      std::string flat =
          b.op("matmul", {swapLast(b.reshape(s.input(0), {rows, K})),
                          b.reshape(s.grad(), {rows, N})});
      out[1] = b.reshape(flat, c);
    } else {
      out[1] = b.reduceTo(b.op("matmul", {swapLast(s.input(0)), s.grad()}), c);
    }
  }
  return out;
}

Grads softmaxRule(GradientBuilder &b, const GradientStep &s) {
  const std::string &y = s.result();
  int64_t dim = normalizedDim(s.node.integer("dim"), b.shape(y).size());
  std::string dot = b.sumKeep(b.mul(s.grad(), y), {dim});
  return pointwise(s, b.mul(y, b.sub(s.grad(), dot)));
}

/// layer_norm over the last dim: x̂ = (x - mean) rstd, y = x̂ w + bias.
Grads layerNormRule(GradientBuilder &b, const GradientStep &s) {
  const std::string &x = s.input(0);
  const Shape &shape = b.shape(x);
  const int64_t last = static_cast<int64_t>(shape.size()) - 1, D = shape.back();
  std::string mean = b.meanKeep(x, {last});
  std::string var = b.op("var", {x},
                         {{"dims", std::vector<int64_t>{last}},
                          {"keepdim", 1},
                          {"correction", 0}});
  std::string rstd = b.op("rsqrt", {b.shift(var, s.node.number("eps"))});
  std::string xhat = b.mul(b.sub(x, mean), rstd);
  const bool affine = s.node.inputs.size() > 1;
  Grads out(s.node.inputs.size());
  if (s.wanted[0]) {
    std::string gxhat = affine ? b.mul(s.grad(), s.input(1)) : s.grad();
    std::string m1 = b.meanKeep(gxhat, {last});
    std::string m2 = b.meanKeep(b.mul(gxhat, xhat), {last});
    out[0] = b.mul(rstd, b.sub(b.sub(gxhat, m1), b.mul(xhat, m2)));
  }
  if (affine && s.wanted[1])
    out[1] = b.reduceTo(b.mul(s.grad(), xhat), {D});
  if (s.node.inputs.size() > 2 && s.wanted[2])
    out[2] = b.reduceTo(s.grad(), {D});
  return out;
}

/// rms_norm over the last dim: r = rsqrt(mean(x^2) + eps), y = x r w.
Grads rmsNormRule(GradientBuilder &b, const GradientStep &s) {
  const std::string &x = s.input(0);
  const Shape &shape = b.shape(x);
  const int64_t last = static_cast<int64_t>(shape.size()) - 1, D = shape.back();
  std::string r =
      b.op("rsqrt",
           {b.shift(b.meanKeep(b.mul(x, x), {last}), s.node.number("eps"))});
  const bool affine = s.node.inputs.size() > 1;
  Grads out(s.node.inputs.size());
  if (s.wanted[0]) {
    std::string gn = affine ? b.mul(s.grad(), s.input(1)) : s.grad();
    std::string m = b.meanKeep(b.mul(gn, x), {last});
    out[0] = b.mul(r, b.sub(gn, b.mul(x, b.mul(b.mul(r, r), m))));
  }
  if (affine && s.wanted[1])
    out[1] = b.reduceTo(b.mul(s.grad(), b.mul(x, r)), {D});
  return out;
}

/// The gradient of a mean cross entropy over targets [N] at each row's
/// term, [N, 1] of dtype `dt`: g over the number of targets other than
/// `ignored` (torch's ignore_index), 0 at an ignored row.
std::string crossEntropyRowScale(GradientBuilder &b, const std::string &targets,
                                 int64_t ignored, plan::DType dt,
                                 const std::string &g) {
  const int64_t N = b.shape(targets)[0];
  std::string column = b.reshape(targets, {N, 1});
  std::string counted = b.asFloat(
      b.op("ne", {column}, {{"value", static_cast<double>(ignored)}}), dt);
  // No counted target (every one ignored): no gradient rather than 0 / 0
  // (a data-parallel rank's rows may all be ignored; Rebatch.cpp).
  std::string count =
      b.op("clamp_out", {b.op("sum", {counted})}, {{"min", 1.0}});
  return b.div(b.mul(counted, g), count);
}

/// cross_entropy(logits [N, C], targets [N]): the mean over targets other
/// than its ignore_index (torch's, -100 by default) of
/// -log softmax(logits)[target]. Its
/// gradient is softmax minus a one-hot, scaled per row; the
/// cross_entropy_backward op makes it in one [N, C] tensor (a language
/// model's vocabulary wide) without the one-hot's own [N, C] int64 and
/// float tensors.
Grads crossEntropyRule(GradientBuilder &b, const GradientStep &s) {
  const std::string &logits = s.input(0), &targets = s.input(1);
  if (!s.wanted[0])
    return {"", ""};
  const int64_t ignored = ignoredTarget(s.node);
  std::string perRow =
      crossEntropyRowScale(b, targets, ignored, b.dtype(logits), s.grad());
  json attributes = json::object();
  if (ignored != -100)
    attributes["ignore_index"] = ignored;
  return {b.mul(b.op("cross_entropy_backward", {logits, targets}, attributes),
                perRow),
          ""};
}

/// linear_cross_entropy(x [N, H], targets, weight [V, H]): cross_entropy of
/// linear(x, weight), fused (compiler/FuseLinearCrossEntropy.h). Its
/// gradients are those of the two ops it replaces, made by
/// linear_cross_entropy_backward from the same per-row scale, each
/// recomputing the logits a block of rows at a time: no [N, V] tensor is
/// held between forward and backward or made in backward.
Grads linearCrossEntropyRule(GradientBuilder &b, const GradientStep &s) {
  const std::string &x = s.input(0), &targets = s.input(1),
                    &weight = s.input(2);
  Grads out(3);
  if (!s.wanted[0] && !s.wanted[2])
    return out;
  // The scale in the loss's dtype (the logits', after a cast if any).
  const int64_t ignored = ignoredTarget(s.node);
  std::string perRow =
      crossEntropyRowScale(b, targets, ignored, s.node.dtype, s.grad());
  json attributes = json::object();
  if (ignored != -100)
    attributes["ignore_index"] = ignored;
  if (const plan::AttrValue *dtype = attr(s.node, "logits_dtype"))
    attributes["logits_dtype"] = std::get<std::string>(*dtype);
  for (size_t i : {size_t{0}, size_t{2}})
    if (s.wanted[i]) {
      attributes["wrt"] = i == 0 ? "input" : "weight";
      out[i] = b.op("linear_cross_entropy_backward",
                    {x, targets, weight, perRow}, attributes);
    }
  return out;
}

/// embedding(weight [V, D], ids): row v's gradient sums g over the ids equal
/// to v (embedding_backward: the rows of g summed in order, in double); the
/// row padding_idx gets none.
Grads embeddingRule(GradientBuilder &b, const GradientStep &s) {
  const Shape &weight = b.shape(s.input(0));
  const int64_t V = weight[0], D = weight[1];
  const int64_t M = elementCount(b.shape(s.input(1)));
  json attributes = {{"rows", V}};
  if (s.node.integer("padding_idx") >= 0)
    attributes["padding_idx"] = s.node.integer("padding_idx");
  Grads out(2);
  if (s.wanted[0])
    out[0] = b.op("embedding_backward",
                  {b.reshape(s.grad(), {M, D}), b.reshape(s.input(1), {M})},
                  attributes);
  return out;
}

Grads sliceRule(GradientBuilder &b, const GradientStep &s) {
  const Shape &x = b.shape(s.input(0));
  const int64_t dim = s.node.integer("dim"), start = s.node.integer("start");
  const int64_t step = s.node.integer("step");
  const size_t d = static_cast<size_t>(dim);
  const plan::DType dt = b.dtype(s.grad());
  std::string g = s.grad();
  if (step > 1) { // zeros between the elements read: [.., n, 1, ..] + [.., n,
                  // step-1, ..]
    Shape gs = b.shape(g), one = gs;
    one.insert(one.begin() + dim + 1, 1);
    Shape gap = one;
    gap[d + 1] = step - 1;
    Shape spread = gs;
    spread[d] = gs[d] * step;
    g = b.reshape(
        b.op("cat", {b.reshape(g, one), b.zeros(gap, dt)}, {{"dim", dim + 1}}),
        spread);
    const int64_t room = x[d] - start;
    if (spread[d] > room)
      g = b.op("slice", {g}, {{"dim", dim}, {"start", 0}, {"end", room}});
  }
  const int64_t end = start + b.shape(g)[d];
  std::vector<std::string> pieces;
  if (start > 0) {
    Shape before = x;
    before[d] = start;
    pieces.push_back(b.zeros(before, dt));
  }
  pieces.push_back(g);
  if (end < x[d]) {
    Shape after = x;
    after[d] = x[d] - end;
    pieces.push_back(b.zeros(after, dt));
  }
  return pointwise(s, pieces.size() == 1 ? pieces[0]
                                         : b.op("cat", pieces, {{"dim", dim}}));
}

Grads splitRule(GradientBuilder &b, const GradientStep &s) {
  const int64_t dim = s.node.integer("dim");
  std::vector<std::string> pieces;
  for (size_t i = 0; i < s.resultGrads.size(); ++i)
    pieces.push_back(!s.resultGrads[i].empty()
                         ? s.resultGrads[i]
                         : b.zeros(s.node.shapes[i], s.node.dtype));
  return pointwise(s, b.op("cat", pieces, {{"dim", dim}}));
}

Grads catRule(GradientBuilder &b, const GradientStep &s) {
  const int64_t dim = s.node.integer("dim");
  Grads out(s.node.inputs.size());
  int64_t offset = 0;
  for (size_t i = 0; i < s.node.inputs.size(); ++i) {
    const int64_t size = b.shape(s.input(i))[static_cast<size_t>(dim)];
    if (s.wanted[i])
      out[i] = b.op("slice", {s.grad()},
                    {{"dim", dim}, {"start", offset}, {"end", offset + size}});
    offset += size;
  }
  return out;
}

Grads reduceRule(GradientBuilder &b, const GradientStep &s, bool mean) {
  const Shape &x = b.shape(s.input(0));
  std::vector<int64_t> dims = reducedDims(s.node, x.size());
  std::string g = s.grad();
  if (mean) {
    int64_t count = 1;
    for (int64_t d : dims)
      count *= x[static_cast<size_t>(d)];
    g = b.scale(g, 1.0 / static_cast<double>(std::max<int64_t>(count, 1)));
  }
  return pointwise(s, unreduce(b, g, x, dims));
}

/// amax / amin: the gradient splits evenly among the elements that equal
/// the extreme (torch's rule for ties).
Grads extremeRule(GradientBuilder &b, const GradientStep &s) {
  const std::string &x = s.input(0);
  const Shape &xs = b.shape(x);
  std::vector<int64_t> dims = reducedDims(s.node, xs.size());
  const plan::DType dt = b.dtype(x);
  std::string hit =
      b.asFloat(b.op("eq", {x, unreduce(b, s.result(), xs, dims)}), dt);
  std::string share = b.div(unreduce(b, s.grad(), xs, dims),
                            unreduce(b, b.sumKeep(hit, dims), xs, dims));
  return pointwise(s, b.mul(hit, share));
}

/// var(dims, correction): 2 (x - mean) / (n - correction).
Grads varRule(GradientBuilder &b, const GradientStep &s) {
  const std::string &x = s.input(0);
  const Shape &xs = b.shape(x);
  std::vector<int64_t> dims = reducedDims(s.node, xs.size());
  int64_t count = 1;
  for (int64_t d : dims)
    count *= xs[static_cast<size_t>(d)];
  const double denominator =
      static_cast<double>(count - intAttr(s.node, "correction", 1));
  std::string centered = b.sub(x, b.meanKeep(x, dims));
  return pointwise(s, b.mul(unreduce(b, s.grad(), xs, dims),
                            b.scale(centered, 2.0 / denominator)));
}

/// where(cond, a, b): the gradient goes to a where cond holds, else to b.
Grads whereRule(GradientBuilder &b, const GradientStep &s) {
  const plan::DType dt = b.dtype(s.grad());
  std::string keep = b.asFloat(s.input(0), dt);
  Grads out(3);
  if (s.wanted[1])
    out[1] = b.reduceTo(b.mul(s.grad(), keep), b.shape(s.input(1)));
  if (s.wanted[2])
    out[2] = b.reduceTo(b.mul(s.grad(), b.oneMinus(keep)), b.shape(s.input(2)));
  return out;
}

/// as_strided: y[i] = x_flat[offset + sum_k i_k stride_k]; each element of x
/// collects the gradients of the outputs that read it. The trailing dims
/// that read whole aligned blocks of L elements (a row of a table) are kept
/// together: the gradient's [Y/L, L] rows summed into x's [X/L, L] rows by
/// the block each read (embedding_backward). The block numbers are computed
/// by the forward op itself on x's positions, in float32: exact below 2^24.
Grads asStridedRule(GradientBuilder &b, const GradientStep &s) {
  const Shape &xs = b.shape(s.input(0));
  const int64_t X = elementCount(xs), Y = elementCount(b.shape(s.result()));
  if (X > (int64_t{1} << 24))
    unsupported(s, "numbers the " + std::to_string(X) +
                       " elements of its input in float32, exact up to 2^24");
  const std::vector<int64_t> size = intsAttr(s.node, "size"),
                             stride = intsAttr(s.node, "stride");
  const int64_t offset = intAttr(s.node, "offset", 0);
  size_t inner = size.size();
  int64_t L = 1;
  for (size_t k = size.size(), run = 1; k-- > 0;) {
    if (stride[k] != static_cast<int64_t>(run) && size[k] != 1)
      break;
    run *= static_cast<size_t>(size[k]);
    bool aligned = X % static_cast<int64_t>(run) == 0 &&
                   offset % static_cast<int64_t>(run) == 0;
    for (size_t j = 0; j < k; ++j)
      aligned &= stride[j] % static_cast<int64_t>(run) == 0;
    if (aligned)
      inner = k, L = static_cast<int64_t>(run);
  }
  const int64_t rows = X / L, reads = Y / L;
  std::vector<int64_t> outerSize(size.begin(), size.begin() + inner);
  std::vector<int64_t> outerStride(stride.begin(), stride.begin() + inner);
  if (outerSize.empty())
    outerSize = {1}, outerStride = {1};
  std::string starts =
      b.op("as_strided", {b.reshape(b.arange(X, plan::DType::F32), xs)},
           {{"size", outerSize}, {"stride", outerStride}, {"offset", offset}});
  std::string block =
      b.op("cast",
           {b.scale(b.reshape(starts, {reads}), 1.0 / static_cast<double>(L))},
           {{"dtype", "int64"}});
  std::string summed =
      b.op("embedding_backward", {b.reshape(s.grad(), {reads, L}), block},
           {{"rows", rows}});
  return pointwise(s, b.reshape(summed, xs));
}

/// embedding_backward(src [M, D], index [M]): src row m went into row
/// index[m], so its gradient is that row of g: an `embedding` of g by
/// index (nn.EmbeddingBag's bag sums over ragged bags); rows at
/// padding_idx were left out, so they get none. An acc operand was added
/// as is: its gradient is g.
Grads embeddingBackwardRule(GradientBuilder &b, const GradientStep &s) {
  Grads out(s.node.inputs.size());
  if (out.size() == 3 && s.wanted[2])
    out[2] = s.grad();
  if (!s.wanted[0])
    return out;
  std::string rows = b.op("embedding", {s.grad(), s.input(1)});
  const int64_t padding = intAttr(s.node, "padding_idx", -1);
  if (padding >= 0) {
    const int64_t M = b.shape(s.input(1))[0];
    std::string kept =
        b.op("ne", {s.input(1)}, {{"value", static_cast<double>(padding)}});
    rows = b.mul(rows, b.reshape(b.asFloat(kept, b.dtype(rows)), {M, 1}));
  }
  out[0] = rows;
  return out;
}

RuleTable basicRules() {
  using B = GradientBuilder;
  using S = GradientStep;
  return {
      {"add", [](B &b, const S &s) { return addRule(b, s, false); }},
      {"sub", [](B &b, const S &s) { return addRule(b, s, true); }},
      {"mul", mulRule},
      {"div", divRule},
      {"linear", linearRule},
      {"matmul", matmulRule},
      {"softmax", softmaxRule},
      {"layer_norm", layerNormRule},
      {"rms_norm", rmsNormRule},
      {"cross_entropy", crossEntropyRule},
      {"linear_cross_entropy", linearCrossEntropyRule},
      {"embedding", embeddingRule},
      {"embedding_backward", embeddingBackwardRule},
      {"reshape",
       [](B &b, const S &s) {
         return pointwise(s, b.reshape(s.grad(), b.shape(s.input(0))));
       }},
      {"detach", // torch's: the gradient stops here
       [](B &, const S &) { return Grads{""}; }},
      {"transpose",
       [](B &b, const S &s) {
         return pointwise(s, b.op("transpose", {s.grad()},
                                  {{"dim0", s.node.integer("dim0")},
                                   {"dim1", s.node.integer("dim1")}}));
       }},
      {"permute",
       [](B &b, const S &s) {
         std::vector<int64_t> inverse(s.node.ints.size());
         for (size_t k = 0; k < s.node.ints.size(); ++k)
           inverse[static_cast<size_t>(normalizedDim(
               s.node.ints[k], inverse.size()))] = static_cast<int64_t>(k);
         return pointwise(s, b.op("permute", {s.grad()}, {{"dims", inverse}}));
       }},
      {"slice", sliceRule},
      {"split", splitRule},
      {"cat", catRule},
      {"amax", extremeRule},
      {"amin", extremeRule},
      {"var", varRule},
      {"where", whereRule},
      {"as_strided", asStridedRule},
      {"sum", [](B &b, const S &s) { return reduceRule(b, s, false); }},
      {"mean", [](B &b, const S &s) { return reduceRule(b, s, true); }},
      {"cumsum", // each x[i] is in y[i..n-1]: the reverse running sum of g
       [](B &b, const S &s) {
         const bool reverse = intAttr(s.node, "reverse", 0) != 0;
         return pointwise(s, b.op("cumsum", {s.grad()},
                                  {{"dim", intAttr(s.node, "dim", 0)},
                                   {"reverse", int64_t{reverse ? 0 : 1}}}));
       }},

  };
}

const RuleTable &rules() {
  static const RuleTable table = [] {
    RuleTable all = basicRules();
    for (RuleTable part :
         {pointwiseRules(), attentionRules(), imageRules(), expertRules()})
      all.merge(part);
    return all;
  }();
  return table;
}

} // namespace

const GradientRule *findGradientRule(const std::string &op) {
  auto it = rules().find(op);
  return it == rules().end() ? nullptr : &it->second;
}

std::vector<std::string> opsWithGradients() {
  std::vector<std::string> names;
  for (const auto &[name, rule] : rules())
    names.push_back(name);
  return names;
}

} // namespace shardc::compiler
