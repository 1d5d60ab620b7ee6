//===- ImageGradients.cpp - convolution, pooling and image norm rules -----===//
//
// The convolution's input gradient is the transposed convolution with the
// same weight; its weight gradient is conv_weight_grad of the input and the
// output gradient (the op table's own op: a convolution of the permuted
// operands computes it too, but as thin matrix products and two copies).
// A transposed convolution is the adjoint of the plain one with its weight,
// so the roles swap: its input gradient is the plain convolution of the
// output gradient, its weight gradient conv_weight_grad of the output
// gradient and the input.
// Average pooling scatters its gradient back with a transposed convolution
// by a one-hot kernel (col2im); max pooling's is the op table's
// max_pool_backward, grid sampling's grid_sample_backward.
//
//===----------------------------------------------------------------------===//
#include "compiler/GradientRuleSets.h"

#include "runtime/OpFamilies.h"

#include <limits>
#include <numeric>

namespace shardc::compiler::gradients {
namespace {

/// The dims of x [N, C, spatial...] other than the channel dim.
std::vector<int64_t> allButChannels(size_t rank) {
  std::vector<int64_t> dims = {0};
  for (size_t d = 2; d < rank; ++d)
    dims.push_back(static_cast<int64_t>(d));
  return dims;
}

/// A per-channel [C] tensor as [1, C, 1, ...] against x of `rank` dims.
std::string perChannel(GradientBuilder &b, const std::string &v, size_t rank) {
  Shape shape(rank, 1);
  shape[1] = b.shape(v)[0];
  return b.reshape(v, shape);
}

/// The output padding that makes a transposed convolution's output `want`
/// long; -1 when none can (the window then misses trailing input, whose
/// gradient is zero: the caller pads with zeros).
int64_t outputPadding(int64_t want, int64_t in, int64_t stride, int64_t pad,
                      int64_t dilation, int64_t kernel) {
  return want - ((in - 1) * stride - 2 * pad + dilation * (kernel - 1) + 1);
}

/// `v` [N, C, spatial...] cut or zero-padded at the end of each spatial dim
/// to `want`'s sizes.
std::string fitSpatial(GradientBuilder &b, std::string v, const Shape &want) {
  for (size_t d = 2; d < want.size(); ++d) {
    const int64_t have = b.shape(v)[d], dim = static_cast<int64_t>(d);
    if (have > want[d]) {
      v = b.op("slice", {v}, {{"dim", dim}, {"start", 0}, {"end", want[d]}});
    } else if (have < want[d]) {
      Shape zeros = b.shape(v);
      zeros[d] = want[d] - have;
      v = b.op("cat", {v, b.zeros(zeros, b.dtype(v))}, {{"dim", dim}});
    }
  }
  return v;
}

/// The transposed convolution of g by `weight`, grown to `want`'s spatial
/// sizes: output_padding where it fits the kernel's rule (< stride or <
/// dilation), zeros appended past it otherwise.
std::string transposedConv(GradientBuilder &b, const std::string &g,
                           const std::string &weight,
                           const std::vector<int64_t> &stride,
                           const std::vector<int64_t> &pad,
                           const std::vector<int64_t> &dilation, int64_t groups,
                           const Shape &want) {
  const Shape &gs = b.shape(g), &ws = b.shape(weight);
  const size_t spatial = stride.size();
  std::vector<int64_t> outPad(spatial, 0);
  for (size_t d = 0; d < spatial; ++d) {
    int64_t p = outputPadding(want[2 + d], gs[2 + d], stride[d], pad[d],
                              dilation[d], ws[2 + d]);
    if (p >= 0 && (p < stride[d] || p < dilation[d]))
      outPad[d] = p; // else fitted below: < 0 windows past the end
                     // (ceil_mode) cut, > 0 zeros appended
  }
  return fitSpatial(b,
                    b.op("conv", {g, weight},
                         {{"stride", stride},
                          {"padding", pad},
                          {"dilation", dilation},
                          {"groups", groups},
                          {"transposed", 1},
                          {"output_padding", outPad}}),
                    want);
}

/// y = conv_transpose(x, w): w [Cin, Cout/groups, kernel...] is also the
/// weight of the plain convolution from y's space back to x's (the one whose
/// input gradient this convolution is). An output_padding of a stride or
/// more (allowed below the dilation) gives that convolution more outputs
/// than x has: cut off (x's side has no such pixel).
Grads transposedConvRule(GradientBuilder &b, const GradientStep &s,
                         const std::vector<int64_t> &stride,
                         const std::vector<int64_t> &pad,
                         const std::vector<int64_t> &dilation, int64_t G) {
  const std::string &x = s.input(0), &w = s.input(1), &g = s.grad();
  const Shape &xs = b.shape(x), &ws = b.shape(w);
  const json plain = {{"stride", stride},
                      {"padding", pad},
                      {"dilation", dilation},
                      {"groups", G}};
  Grads out(s.node.inputs.size());
  if (s.wanted[0])
    out[0] = fitSpatial(b, b.op("conv", {g, w}, plain), xs);
  if (s.wanted[1]) {
    // conv_weight_grad(g, x) pairs each x pixel with the window of g it
    // reads; x is padded with zeros where that convolution has more pixels
    // (its output shape by the conv family's own rule).
    runtime::ConvParams params;
    params.spatialDims = static_cast<int>(stride.size());
    params.stride = stride;
    params.padding = pad;
    params.dilation = dilation;
    params.groups = G;
    const Shape reach = runtime::convShape(params, b.shape(g), ws, nullptr);
    json attrs = plain;
    attrs["kernel"] = std::vector<int64_t>(ws.begin() + 2, ws.end());
    out[1] = b.op("conv_weight_grad", {g, fitSpatial(b, x, reach)}, attrs);
  }
  if (s.node.inputs.size() > 2 && s.wanted[2])
    out[2] = b.reshape(b.sumKeep(g, allButChannels(xs.size())), {ws[1] * G});
  return out;
}

Grads convRule(GradientBuilder &b, const GradientStep &s) {
  const std::string &x = s.input(0), &w = s.input(1), &g = s.grad();
  const Shape &xs = b.shape(x), &ws = b.shape(w);
  const size_t rank = xs.size();
  const std::vector<int64_t> stride = intsAttr(s.node, "stride"),
                             pad = intsAttr(s.node, "padding"),
                             dilation = intsAttr(s.node, "dilation");
  const int64_t G = intAttr(s.node, "groups", 1), Cout = ws[0];
  if (intAttr(s.node, "transposed", 0))
    return transposedConvRule(b, s, stride, pad, dilation, G);
  Grads out(s.node.inputs.size());
  if (s.wanted[0])
    out[0] = transposedConv(b, g, w, stride, pad, dilation, G, xs);
  if (s.wanted[1]) {
    // One op: conv_weight_grad sums over the samples and output pixels
    // directly, with neither operand permuted.
    std::vector<int64_t> kernel(ws.begin() + 2, ws.end());
    out[1] = b.op("conv_weight_grad", {x, g},
                  {{"stride", stride},
                   {"padding", pad},
                   {"dilation", dilation},
                   {"groups", G},
                   {"kernel", kernel}});
  }
  if (s.node.inputs.size() > 2 && s.wanted[2])
    out[2] = b.reshape(b.sumKeep(g, allButChannels(rank)), {Cout});
  return out;
}

/// batch_norm with running statistics (eval): y = (x - mean) rstd w + bias.
Grads batchNormRule(GradientBuilder &b, const GradientStep &s) {
  const std::string &x = s.input(0), &g = s.grad();
  const size_t rank = b.shape(x).size();
  const bool affine = s.node.inputs.size() > 3;
  std::string rstd =
      b.op("rsqrt", {b.shift(s.input(2), floatAttr(s.node, "eps", 1e-5))});
  Grads out(s.node.inputs.size());
  if (s.wanted[0]) {
    std::string factor = affine ? b.mul(rstd, s.input(3)) : rstd;
    out[0] = b.mul(g, perChannel(b, factor, rank));
  }
  if (affine && s.wanted[3]) {
    std::string xhat = b.mul(b.sub(x, perChannel(b, s.input(1), rank)),
                             perChannel(b, rstd, rank));
    out[3] = b.reshape(b.sumKeep(b.mul(g, xhat), allButChannels(rank)),
                       b.shape(s.input(3)));
  }
  if (affine && s.wanted[4])
    out[4] = b.reshape(b.sumKeep(g, allButChannels(rank)), b.shape(s.input(4)));
  for (size_t i : {size_t{1}, size_t{2}})
    if (s.wanted[i])
      unsupported(s, "takes running statistics that are constants");
  return out;
}

/// group_norm: x [N, C, ...] normalized over each group's C/G channels and
/// spatial positions, then w and bias per channel.
Grads groupNormRule(GradientBuilder &b, const GradientStep &s) {
  const std::string &x = s.input(0), &g = s.grad();
  const Shape &xs = b.shape(x);
  const size_t rank = xs.size();
  const int64_t G = intAttr(s.node, "groups", 1), N = xs[0];
  const int64_t M = elementCount(xs) / N / G;
  std::string xg = b.reshape(x, {N, G, M});
  std::string mean = b.meanKeep(xg, {2});
  std::string var = b.op(
      "var", {xg},
      {{"dims", std::vector<int64_t>{2}}, {"keepdim", 1}, {"correction", 0}});
  std::string rstd =
      b.op("rsqrt", {b.shift(var, floatAttr(s.node, "eps", 1e-5))});
  std::string xhatg = b.mul(b.sub(xg, mean), rstd);
  const bool affine = s.node.inputs.size() > 1;
  Grads out(s.node.inputs.size());
  if (s.wanted[0]) {
    std::string gxhat = affine ? b.mul(g, perChannel(b, s.input(1), rank)) : g;
    std::string gg = b.reshape(gxhat, {N, G, M});
    std::string m1 = b.meanKeep(gg, {2}),
                m2 = b.meanKeep(b.mul(gg, xhatg), {2});
    out[0] = b.reshape(b.mul(rstd, b.sub(b.sub(gg, m1), b.mul(xhatg, m2))), xs);
  }
  if (affine && s.wanted[1])
    out[1] = b.reshape(
        b.sumKeep(b.mul(g, b.reshape(xhatg, xs)), allButChannels(rank)),
        b.shape(s.input(1)));
  if (s.node.inputs.size() > 2 && s.wanted[2])
    out[2] = b.reshape(b.sumKeep(g, allButChannels(rank)), b.shape(s.input(2)));
  return out;
}

/// Pooling windows of one op: kernel, stride, padding, dilation per spatial
/// dim.
struct Windows {
  std::vector<int64_t> kernel, stride, pad, dilation;
  int64_t count() const {
    return std::accumulate(kernel.begin(), kernel.end(), int64_t{1},
                           std::multiplies<>());
  }
};

Windows poolWindows(const GradientStep &s) {
  Windows w;
  w.kernel = intsAttr(s.node, "kernel");
  w.stride = intsAttr(s.node, "stride", w.kernel);
  if (w.stride.empty())
    w.stride = w.kernel;
  w.pad = intsAttr(s.node, "padding", std::vector<int64_t>(w.kernel.size(), 0));
  w.dilation =
      intsAttr(s.node, "dilation", std::vector<int64_t>(w.kernel.size(), 1));
  return w;
}

/// col2im: c [N, C, K, Y...] (K = one slice per window offset, row-major
/// over the kernel) summed back onto the input positions each offset read,
/// as x's shape: a transposed convolution of [N*C, K, Y...] by a one-hot
/// [K, 1, kernel...] kernel.
std::string scatterWindows(GradientBuilder &b, const std::string &c,
                           const Windows &w, const Shape &xs) {
  const Shape &cs = b.shape(c);
  const int64_t K = w.count();
  Shape flat = {cs[0] * cs[1], K};
  flat.insert(flat.end(), cs.begin() + 3, cs.end());
  Shape kernelShape = {K, 1};
  kernelShape.insert(kernelShape.end(), w.kernel.begin(), w.kernel.end());
  std::string oneHot = b.reshape(b.identity(K, b.dtype(c)), kernelShape);
  Shape want = {cs[0] * cs[1], 1};
  want.insert(want.end(), xs.begin() + 2, xs.end());
  return b.reshape(transposedConv(b, b.reshape(c, flat), oneHot, w.stride,
                                  w.pad, w.dilation, 1, want),
                   xs);
}

/// max_pool: each window's gradient goes to the first position (row-major
/// in the window) that holds its maximum, as torch's kernel picks it: one
/// max_pool_backward with the pool's own attributes. (It was a slice, a
/// comparison and five elementwise ops per window offset and a col2im,
/// with a [N, C, kernel, out...] intermediate: GoogLeNet's 3x3 pools made
/// 700 ops of its training step.)
Grads maxPoolRule(GradientBuilder &b, const GradientStep &s) {
  json attributes = json::object();
  for (const char *name :
       {"kernel", "stride", "padding", "dilation", "ceil_mode"})
    if (auto it = s.node.attrs.find(name); it != s.node.attrs.end())
      std::visit([&](const auto &value) { attributes[name] = value; },
                 it->second);
  return pointwise(
      s, b.op("max_pool_backward", {s.input(0), s.grad()}, attributes));
}

/// A constant [n] holding `values` (int64 counts, exact in any float
/// dtype), as one `cat` of fills, a fill per run of equal values: pooling
/// divisors differ only at the edges, so the runs are few.
std::string runsOf(GradientBuilder &b, const std::vector<int64_t> &values,
                   plan::DType dtype) {
  std::vector<std::string> runs;
  for (size_t start = 0, end; start < values.size(); start = end) {
    for (end = start; end < values.size() && values[end] == values[start];)
      ++end;
    runs.push_back(b.filled({static_cast<int64_t>(end - start)}, dtype,
                            static_cast<double>(values[start])));
  }
  return runs.size() == 1 ? runs[0] : b.op("cat", runs, {{"dim", int64_t{0}}});
}

/// avg_pool's divisor per output position, [out...] (torch's avg_pool
/// kernels): per dim the window's extent, clipped to the padded input (a
/// ceil_mode window overhangs it) and, without count_include_pad, to the
/// input itself; the product over the dims.
std::string poolDivisors(GradientBuilder &b, const GradientStep &s,
                         const Windows &w, const Shape &xs, const Shape &ys,
                         plan::DType dtype) {
  const bool countPad = intAttr(s.node, "count_include_pad", 1) != 0;
  const size_t dims = w.kernel.size();
  std::string divisor;
  for (size_t d = 0; d < dims; ++d) {
    const int64_t X = xs[2 + d], P = w.pad[d];
    std::vector<int64_t> counts;
    for (int64_t o = 0; o < ys[2 + d]; ++o) {
      const int64_t start = o * w.stride[d] - P;
      const int64_t end = std::min(start + w.kernel[d], X + P);
      counts.push_back(countPad
                           ? end - start
                           : std::min(end, X) - std::max(start, int64_t{0}));
    }
    Shape along(dims, 1);
    along[d] = ys[2 + d];
    std::string factor = b.reshape(runsOf(b, counts, dtype), along);
    divisor = divisor.empty() ? factor : b.mul(divisor, factor);
  }
  return divisor;
}

/// avg_pool: each window's gradient spread evenly over its positions: g
/// divided by the window's count (divisor_override, else one count for
/// windows of one size, else poolDivisors' per position), then col2im.
Grads avgPoolRule(GradientBuilder &b, const GradientStep &s) {
  const Shape &xs = b.shape(s.input(0)), &ys = b.shape(s.result());
  Windows w = poolWindows(s);
  w.dilation.assign(w.kernel.size(), 1);
  const int64_t divisor = intAttr(s.node, "divisor_override", 0);
  bool padded = false, ragged = false;
  for (size_t d = 0; d < w.kernel.size(); ++d) {
    padded |= w.pad[d] != 0;
    ragged |=
        (ys[2 + d] - 1) * w.stride[d] + w.kernel[d] > xs[2 + d] + 2 * w.pad[d];
  }
  std::string g;
  if (!divisor &&
      (ragged || (padded && !intAttr(s.node, "count_include_pad", 1))))
    g = b.div(s.grad(), poolDivisors(b, s, w, xs, ys, b.dtype(s.grad())));
  else
    g = b.scale(s.grad(),
                1.0 / static_cast<double>(divisor ? divisor : w.count()));
  Shape one = ys;
  one.insert(one.begin() + 2, 1);
  Shape all = one;
  all[2] = w.count();
  return pointwise(
      s, scatterWindows(b, b.expandTo(b.reshape(g, one), all), w, xs));
}

/// adaptive pooling's [out, in] averaging matrix along one dim (torch's
/// adaptive windows): row i is 1 / count over [floor(i in / out),
/// ceil((i + 1) in / out)) and 0 elsewhere. Built with graph ops from
/// aranges, in float64 (the bounds exact), then cast to `dtype`.
std::string averagingMatrix(GradientBuilder &b, int64_t in, int64_t out,
                            plan::DType dtype) {
  const plan::DType f64 = plan::DType::F64;
  auto floorOf = [&](const std::string &v) { // v >= 0: truncation is floor
    return b.op("cast", {b.op("cast", {v}, {{"dtype", "int64"}})},
                {{"dtype", "float64"}});
  };
  std::string i = b.reshape(b.arange(out, f64), {out, 1});
  std::string scaled = b.scale(i, static_cast<double>(in));
  std::string start =
      floorOf(b.div(scaled, b.scalar(static_cast<double>(out), f64)));
  std::string end =
      floorOf(b.div(b.shift(scaled, static_cast<double>(in + out - 1)),
                    b.scalar(static_cast<double>(out), f64)));
  std::string h = b.reshape(b.arange(in, f64), {1, in});
  std::string inside = b.mul(b.asFloat(b.op("ge", {h, start}), f64),
                             b.asFloat(b.op("lt", {h, end}), f64));
  std::string matrix = b.div(inside, b.sub(end, start));
  return dtype == f64
             ? matrix
             : b.op("cast", {matrix}, {{"dtype", plan::dtypeName(dtype)}});
}

/// adaptive_avg_pool: where every output cell averages an equal block (the
/// input a multiple of the output, global pooling among them), g / count
/// spread over the blocks; otherwise (blocks of different sizes, which may
/// overlap: AlexNet's 13 to 6) g contracted with each spatial dim's
/// averaging matrix in turn, [.., out] @ [out, in].
Grads adaptiveAvgPoolRule(GradientBuilder &b, const GradientStep &s) {
  const Shape &xs = b.shape(s.input(0)), &ys = b.shape(s.result());
  bool equal = true;
  for (size_t d = 2; d < xs.size(); ++d)
    equal &= xs[d] % ys[d] == 0;
  if (!equal) {
    const int64_t last = static_cast<int64_t>(xs.size()) - 1;
    std::string g = s.grad();
    for (int64_t d = last; d >= 2; --d) {
      std::string P = averagingMatrix(b, xs[d], ys[d], b.dtype(g));
      auto swapLast = [&](const std::string &v) {
        return d == last
                   ? v
                   : b.op("transpose", {v}, {{"dim0", d}, {"dim1", last}});
      };
      g = swapLast(b.op("matmul", {swapLast(g), P}));
    }
    return pointwise(s, g);
  }
  Shape blocks = {ys[0], ys[1]}, wide = blocks;
  int64_t count = 1;
  for (size_t d = 2; d < xs.size(); ++d) {
    const int64_t k = xs[d] / ys[d];
    blocks.insert(blocks.end(), {ys[d], 1});
    wide.insert(wide.end(), {ys[d], k});
    count *= k;
  }
  std::string g = b.scale(s.grad(), 1.0 / static_cast<double>(count));
  return pointwise(s, b.reshape(b.expandTo(b.reshape(g, blocks), wide), xs));
}

/// adaptive_max_pool where every output cell takes the max of an equal block
/// (the input a multiple of the output, global max pooling among them): the
/// max pool with the block as kernel and stride, so max_pool_backward (the
/// first position holding each block's max, as torch's adaptive kernel
/// picks it too).
Grads adaptiveMaxPoolRule(GradientBuilder &b, const GradientStep &s) {
  const Shape &xs = b.shape(s.input(0)), &ys = b.shape(s.result());
  std::vector<int64_t> kernel;
  for (size_t d = 2; d < xs.size(); ++d) {
    if (xs[d] % ys[d] != 0)
      unsupported(s, "takes an input a multiple of the output, got " +
                         std::to_string(xs[d]) + " to " +
                         std::to_string(ys[d]));
    kernel.push_back(xs[d] / ys[d]);
  }
  const json attributes = {
      {"kernel", kernel},
      {"stride", kernel},
      {"padding", std::vector<int64_t>(kernel.size(), 0)},
      {"dilation", std::vector<int64_t>(kernel.size(), 1)}};
  return pointwise(
      s, b.op("max_pool_backward", {s.input(0), s.grad()}, attributes));
}

/// grid_sample: grid_sample_backward with the sampling's own attributes,
/// once per wanted operand: the input's gradient (each output's gradient
/// scattered onto the taps it read) and the grid's (the bilinear mix's
/// slope; RAFT detaches its grid, a spatial transformer learns it).
Grads gridSampleRule(GradientBuilder &b, const GradientStep &s) {
  json attributes = json::object();
  for (const char *name : {"mode", "padding_mode", "align_corners"})
    if (auto it = s.node.attrs.find(name); it != s.node.attrs.end())
      std::visit([&](const auto &value) { attributes[name] = value; },
                 it->second);
  Grads out(2);
  const bool nearest = attributes.value("mode", "bilinear") == "nearest";
  for (size_t k = 0; k < 2; ++k) {
    if (!s.wanted[k])
      continue;
    if (k == 1 && nearest) { // a rounded position is flat in the grid
      out[k] = b.zeros(b.shape(s.input(1)), b.dtype(s.input(1)));
      continue;
    }
    attributes["wrt"] = k == 0 ? "input" : "grid";
    out[k] = b.op("grid_sample_backward", {s.input(0), s.input(1), s.grad()},
                  attributes);
  }
  return out;
}

} // namespace

RuleTable imageRules() {
  return {{"conv", convRule},
          {"batch_norm", batchNormRule},
          {"group_norm", groupNormRule},
          {"max_pool", maxPoolRule},
          {"avg_pool", avgPoolRule},
          {"adaptive_avg_pool", adaptiveAvgPoolRule},
          {"adaptive_max_pool", adaptiveMaxPoolRule},
          {"grid_sample", gridSampleRule}};
}

} // namespace shardc::compiler::gradients
