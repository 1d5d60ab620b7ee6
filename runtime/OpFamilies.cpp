// The shape rules of the op families (runtime/OpFamilies.h): torch's own
// rules (aten/src/ATen/native/ConvUtils.h, Pool.h, AdaptivePooling.h,
// Normalization.cpp, ReduceOpsUtils.h), with torch's words where a user may
// know them, so the compiler and every backend accept and reject the same
// shapes.
#include "runtime/OpFamilies.h"

#include "runtime/AttentionShapes.h"
#include "runtime/ForwardChecks.h"
#include "runtime/RuntimeError.h"

#include <string>

namespace shardc::runtime {
using checks::fail;

namespace {

std::string str(int64_t v) { return std::to_string(v); }

/// "(a x b)" as torch prints spatial sizes.
std::string sizes(const std::vector<int64_t> &v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? " x " : "") + str(v[i]);
  return s + ")";
}

/// Every per-dimension parameter vector has `dims` entries, each >= `min`.
void expectParam(const char *op, const char *what, const std::vector<int64_t> &v, int dims,
                 int64_t min) {
  if (static_cast<int>(v.size()) != dims)
    fail(op, std::string(what) + " has " + str(static_cast<int64_t>(v.size())) +
                 " entries, expected " + str(dims) + " (one per spatial dim)");
  for (int64_t e : v)
    if (e < min)
      fail(op, std::string(what) + " " + shapeToString(v) + " must be " +
                   (min == 0 ? "non-negative" : "positive"));
}

void expectSpatialDims(const char *op, int dims) {
  if (dims < 1 || dims > 3)
    fail(op, "spatialDims is " + str(dims) + ", only 1, 2 and 3 are supported");
}

/// Batched ([N, C, *spatial]) or unbatched ([C, *spatial]) pooling input.
void expectPoolInput(const char *op, const Shape &x, int dims) {
  const size_t r = x.size();
  if (r != static_cast<size_t>(dims) + 1 && r != static_cast<size_t>(dims) + 2)
    fail(op, "expected a " + str(dims + 1) + "-d or " + str(dims + 2) +
                 "-d input (unbatched or batched), got " + shapeToString(x));
  for (size_t d = r - dims; d < r; ++d)
    if (x[d] <= 0)
      fail(op, "expected input " + shapeToString(x) + " to have non-zero size for spatial dims");
  // torch allows an empty batch but not empty channels (non-batch dims).
  if (x[r - dims - 1] <= 0)
    fail(op, "expected input " + shapeToString(x) + " to have non-zero size for non-batch dims");
}

/// torch's pooling_output_shape_pad_lr with equal padding on both sides.
int64_t poolOutputSize(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil,
                       bool ceilMode) {
  const int64_t span = in + 2 * pad - dil * (k - 1) - 1 + (ceilMode ? stride - 1 : 0);
  // div_rtn: division rounding toward negative infinity.
  int64_t q = span / stride;
  if (span % stride != 0 && span < 0) --q;
  int64_t out = q + 1;
  // The last window must start inside the input or the left padding.
  if (ceilMode && (out - 1) * stride >= in + pad) --out;
  return out;
}

}  // namespace

// ---- convolution -----------------------------------------------------------

Shape convShape(const ConvParams &p, const Shape &x, const Shape &w, const Shape *b) {
  const char *op = p.transposed ? "conv_transpose" : "convolution";
  expectSpatialDims(op, p.spatialDims);
  const int dims = p.spatialDims;
  expectParam(op, "stride", p.stride, dims, 1);
  expectParam(op, "padding", p.padding, dims, 0);
  expectParam(op, "dilation", p.dilation, dims, 1);
  if (p.groups < 1) fail(op, "groups must be positive, got " + str(p.groups));
  if (p.transposed) {
    expectParam(op, "output_padding", p.outputPadding, dims, 0);
    for (int d = 0; d < dims; ++d)
      if (p.outputPadding[d] >= p.stride[d] && p.outputPadding[d] >= p.dilation[d])
        fail(op, "output padding must be smaller than either stride or dilation, but got "
                 "output_padding " + shapeToString(p.outputPadding) + ", stride " +
                     shapeToString(p.stride) + " and dilation " + shapeToString(p.dilation));
  } else if (!p.outputPadding.empty()) {
    for (int64_t e : p.outputPadding)
      if (e != 0) fail(op, "output_padding is only for transposed convolution");
  }
  const size_t rank = static_cast<size_t>(dims) + 2;
  if (x.size() != rank)
    fail(op, "expected " + str(static_cast<int64_t>(rank)) + "-d input [N, C, " +
                 (dims == 1 ? "L" : dims == 2 ? "H, W" : "D, H, W") + "], got " +
                 shapeToString(x));
  if (w.size() != rank)
    fail(op, "expected " + str(static_cast<int64_t>(rank)) + "-d weight, got " +
                 shapeToString(w));
  for (size_t d = 0; d < rank; ++d)
    if (w[d] <= 0) fail(op, "weight " + shapeToString(w) + " has an empty dim");
  const int64_t cin = x[1];
  int64_t cout;
  if (!p.transposed) {
    if (w[0] % p.groups != 0)
      fail(op, "weight " + shapeToString(w) + ": out channels " + str(w[0]) +
                   " are not divisible by groups=" + str(p.groups));
    if (w[1] * p.groups != cin)
      fail(op, "Given groups=" + str(p.groups) + ", weight of size " + shapeToString(w) +
                   ", expected input" + shapeToString(x) + " to have " + str(w[1] * p.groups) +
                   " channels, but got " + str(cin) + " channels instead");
    cout = w[0];
  } else {
    if (w[0] != cin)
      fail(op, "Given transposed=1, weight of size " + shapeToString(w) + ", expected input" +
                   shapeToString(x) + " to have " + str(w[0]) + " channels, but got " +
                   str(cin) + " channels instead");
    if (cin % p.groups != 0)
      fail(op, "in channels " + str(cin) + " are not divisible by groups=" + str(p.groups));
    cout = w[1] * p.groups;
  }
  if (b && (b->size() != 1 || (*b)[0] != cout))
    fail(op, "Given weight of size " + shapeToString(w) + ", expected bias to be 1-dimensional "
             "with " + str(cout) + " elements, but got bias of size " + shapeToString(*b) +
                 " instead");
  Shape y = {x[0], cout};
  std::vector<int64_t> padded, kernel;
  bool tooSmall = false;
  for (int d = 0; d < dims; ++d) {
    const int64_t in = x[2 + d], k = w[2 + d];
    const int64_t s = p.stride[d], pad = p.padding[d], dil = p.dilation[d];
    if (in <= 0) fail(op, "input " + shapeToString(x) + " has an empty spatial dim");
    int64_t out;
    if (!p.transposed) {
      padded.push_back(in + 2 * pad);
      kernel.push_back(dil * (k - 1) + 1);
      if (in + 2 * pad < dil * (k - 1) + 1) tooSmall = true;
      out = (in + 2 * pad - dil * (k - 1) - 1) / s + 1;
    } else {
      out = (in - 1) * s - 2 * pad + dil * (k - 1) + p.outputPadding[d] + 1;
      if (out <= 0)
        fail(op, "output size " + str(out) + " of spatial dim " + str(d) +
                     " is not positive (input " + shapeToString(x) + ", weight " +
                     shapeToString(w) + ")");
    }
    y.push_back(out);
  }
  if (tooSmall)
    fail(op, "Calculated padded input size per channel: " + sizes(padded) +
                 ". Kernel size: " + sizes(kernel) +
                 ". Kernel size can't be greater than actual input size");
  return y;
}

Shape convWeightGradShape(const ConvParams &p, const Shape &x, const Shape &grad,
                          const std::vector<int64_t> &kernel) {
  const char *op = "conv_weight_grad";
  expectSpatialDims(op, p.spatialDims);
  if (p.transposed) fail(op, "takes the gradient of a convolution that is not transposed");
  const size_t rank = static_cast<size_t>(p.spatialDims) + 2;
  expectParam(op, "kernel", kernel, p.spatialDims, 1);
  expectParam(op, "stride", p.stride, p.spatialDims, 1);
  expectParam(op, "padding", p.padding, p.spatialDims, 0);
  expectParam(op, "dilation", p.dilation, p.spatialDims, 1);
  if (x.size() != rank || grad.size() != rank)
    fail(op, "expected " + str(static_cast<int64_t>(rank)) + "-d input and gradient, got " +
                 shapeToString(x) + " and " + shapeToString(grad));
  if (p.groups < 1) fail(op, "groups must be positive, got " + str(p.groups));
  if (x[1] % p.groups != 0 || grad[1] % p.groups != 0)
    fail(op, "channels " + str(x[1]) + " in and " + str(grad[1]) +
                 " out are not both divisible by groups=" + str(p.groups));
  Shape w = {grad[1], x[1] / p.groups};
  w.insert(w.end(), kernel.begin(), kernel.end());
  // The gradient is the convolution's output for such a weight, or the
  // sums would pair the wrong pixels.
  const Shape y = convShape(p, x, w, nullptr);
  if (y != grad)
    fail(op, "gradient " + shapeToString(grad) + " is not the convolution's output " +
                 shapeToString(y) + " for input " + shapeToString(x) + " and weight " +
                 shapeToString(w));
  return w;
}

// ---- pooling ---------------------------------------------------------------

Shape poolShape(const PoolParams &p, const Shape &x) {
  const char *op = p.kind == PoolKind::Max ? "max_pool" : "avg_pool";
  expectSpatialDims(op, p.spatialDims);
  const int dims = p.spatialDims;
  expectParam(op, "kernel_size", p.kernel, dims, 1);
  // torch: an empty stride means stride = kernel_size.
  const std::vector<int64_t> stride = p.stride.empty() ? p.kernel : p.stride;
  expectParam(op, "stride", stride, dims, 1);
  expectParam(op, "padding", p.padding, dims, 0);
  std::vector<int64_t> dilation = p.dilation.empty() ? std::vector<int64_t>(dims, 1) : p.dilation;
  expectParam(op, "dilation", dilation, dims, 1);
  if (p.kind == PoolKind::Avg) {
    for (int64_t d : dilation)
      if (d != 1) fail(op, "dilation is only for max pooling");
    if (p.divisorOverride < 0)
      fail(op, "divisor_override must be positive, got " + str(p.divisorOverride));
  }
  for (int d = 0; d < dims; ++d)
    if (p.padding[d] > p.kernel[d] / 2)
      fail(op, "pad should be at most half of effective kernel size, but got pad=" +
                   str(p.padding[d]) + ", kernel_size=" + str(p.kernel[d]) +
                   " and dilation=" + str(dilation[d]));
  expectPoolInput(op, x, dims);
  Shape y(x.begin(), x.end() - dims);
  const size_t first = x.size() - dims;
  bool tooSmall = false;
  for (int d = 0; d < dims; ++d) {
    const int64_t out = poolOutputSize(x[first + d], p.kernel[d], p.padding[d], stride[d],
                                       dilation[d], p.ceilMode);
    if (out < 1) tooSmall = true;
    y.push_back(out);
  }
  if (tooSmall)
    fail(op, "Given input size: " + shapeToString(x) + ". Calculated output size: " +
                 shapeToString(y) + ". Output size is too small");
  return y;
}

Shape maxPoolBackwardShape(const PoolParams &p, const Shape &x, const Shape &grad) {
  const Shape y = poolShape(p, x);
  if (grad != y)
    fail("max_pool_backward", "the gradient has shape " + shapeToString(grad) + ", max_pool of x " +
                                  shapeToString(x) + " gives " + shapeToString(y));
  return x;
}

Shape adaptivePoolShape(PoolKind kind, const std::vector<int64_t> &outputSize, const Shape &x) {
  const char *op = kind == PoolKind::Max ? "adaptive_max_pool" : "adaptive_avg_pool";
  const int dims = static_cast<int>(outputSize.size());
  expectSpatialDims(op, dims);
  for (int64_t o : outputSize)
    if (o < 0) fail(op, "output_size " + shapeToString(outputSize) + " must be non-negative");
  expectPoolInput(op, x, dims);
  Shape y(x.begin(), x.end() - dims);
  y.insert(y.end(), outputSize.begin(), outputSize.end());
  return y;
}

// ---- normalization over channels -------------------------------------------

Shape batchNormShape(const Shape &x, const Shape &mean, const Shape &var, const Shape *w,
                     const Shape *b) {
  const char *op = "batch_norm";
  if (x.size() < 2) fail(op, "expected input with at least 2 dims [N, C, *], got " + shapeToString(x));
  const int64_t c = x[1];
  auto expectC = [&](const char *what, const Shape &s) {
    if (s.size() != 1 || s[0] != c)
      fail(op, std::string(what) + " should contain " + str(c) + " elements (channels of " +
                   shapeToString(x) + "), got shape " + shapeToString(s));
  };
  expectC("running_mean", mean);
  expectC("running_var", var);
  if (w) expectC("weight", *w);
  if (b) expectC("bias", *b);
  return x;
}

Shape groupNormShape(const Shape &x, int64_t groups, const Shape *w, const Shape *b) {
  const char *op = "group_norm";
  if (x.size() < 2) fail(op, "expected input with at least 2 dims [N, C, *], got " + shapeToString(x));
  if (groups < 1) fail(op, "num_groups must be positive, got " + str(groups));
  const int64_t c = x[1];
  if (c % groups != 0)
    fail(op, "Expected number of channels in input to be divisible by num_groups, but got "
             "input of shape " + shapeToString(x) + " and num_groups=" + str(groups));
  for (const Shape *s : {w, b})
    if (s && (s->size() != 1 || (*s)[0] != c))
      fail(op, std::string(s == w ? "weight" : "bias") + " should have " + str(c) +
                   " elements (channels of " + shapeToString(x) + "), got shape " +
                   shapeToString(*s));
  return x;
}

// ---- reductions ------------------------------------------------------------

const char *reduceKindName(ReduceKind kind) {
  switch (kind) {
  case ReduceKind::Sum: return "sum";
  case ReduceKind::Mean: return "mean";
  case ReduceKind::Amax: return "amax";
  case ReduceKind::Amin: return "amin";
  case ReduceKind::Var: return "var";
  case ReduceKind::Argmax: return "argmax";
  case ReduceKind::Argmin: return "argmin";
  }
  return "reduce";
}

Shape reduceShape(ReduceKind kind, const Shape &x, const std::vector<int64_t> &dims,
                  bool keepdim) {
  const char *op = reduceKindName(kind);
  const int64_t rank = static_cast<int64_t>(x.size());
  const bool arg = kind == ReduceKind::Argmax || kind == ReduceKind::Argmin;
  if (arg && dims.size() > 1)
    fail(op, "takes one dim or none, got " + str(static_cast<int64_t>(dims.size())));
  // A 0-d tensor takes dim 0 or -1 (torch wraps scalars as one dim).
  const int64_t wrapRank = std::max<int64_t>(rank, 1);
  std::vector<bool> reduced(static_cast<size_t>(rank), dims.empty());
  for (int64_t d : dims) {
    if (d < -wrapRank || d >= wrapRank)
      fail(op, "Dimension out of range (expected to be in range of [" + str(-wrapRank) + ", " +
                   str(wrapRank - 1) + "], but got " + str(d) + ")");
    const int64_t pos = d < 0 ? d + wrapRank : d;
    if (rank == 0) continue;
    if (reduced[pos]) fail(op, "dim " + str(pos) + " appears multiple times in the list of dims");
    reduced[pos] = true;
  }
  // amax/amin/argmax/argmin have no identity: an empty reduced extent is an error.
  if (kind != ReduceKind::Sum && kind != ReduceKind::Mean && kind != ReduceKind::Var) {
    if (dims.empty() && plan::numElements(x) == 0)
      fail(op, "Expected reduction dim to be specified for input.numel() == 0");
    for (int64_t d = 0; d < rank; ++d)
      if (reduced[d] && x[d] == 0)
        fail(op, "Expected reduction dim " + str(d) + " to have non-zero size");
  }
  Shape y;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d]) y.push_back(x[d]);
    else if (keepdim) y.push_back(1);
  }
  return y;
}

// ---- elementwise -------------------------------------------------------------

const char *unaryOpName(UnaryOp op) {
  switch (op) {
  case UnaryOp::Sigmoid: return "sigmoid";
  case UnaryOp::Tanh: return "tanh";
  case UnaryOp::Exp: return "exp";
  case UnaryOp::Log: return "log";
  case UnaryOp::Sqrt: return "sqrt";
  case UnaryOp::Rsqrt: return "rsqrt";
  case UnaryOp::Neg: return "neg";
  case UnaryOp::Abs: return "abs";
  case UnaryOp::Erf: return "erf";
  case UnaryOp::Sin: return "sin";
  case UnaryOp::Cos: return "cos";
  case UnaryOp::Reciprocal: return "reciprocal";
  case UnaryOp::Hardswish: return "hardswish";
  case UnaryOp::Hardsigmoid: return "hardsigmoid";
  case UnaryOp::Mish: return "mish";
  case UnaryOp::Clamp: return "clamp";
  case UnaryOp::LeakyRelu: return "leaky_relu";
  case UnaryOp::Elu: return "elu";
  case UnaryOp::PowScalar: return "pow";
  case UnaryOp::Softplus: return "softplus";
  }
  return "unary";
}

// ---- views and copies ----------------------------------------------------------

Shape asStridedShape(const Shape &x, const std::vector<int64_t> &size,
                     const std::vector<int64_t> &stride, int64_t offset) {
  const char *op = "as_strided";
  if (size.size() != stride.size())
    fail(op, "mismatch in length of strides and shape: size " + shapeToString(size) +
                 ", stride " + shapeToString(stride));
  for (int64_t n : size)
    if (n < 0) fail(op, "size " + shapeToString(size) + " must be non-negative");
  if (offset < 0) fail(op, "negative storage offset " + str(offset));
  int64_t numel = 1, xNumel = 1;
  for (int64_t n : size) numel *= n;
  for (int64_t n : x) xNumel *= n;
  if (numel == 0) return size;
  // Lowest and highest element read, in 128 bits (no overflow).
  __int128 lo = offset, hi = offset;
  for (size_t d = 0; d < size.size(); ++d) {
    const __int128 span = static_cast<__int128>(size[d] - 1) * stride[d];
    (span < 0 ? lo : hi) += span;
  }
  if (lo < 0 || hi >= xNumel)
    fail(op, "size " + shapeToString(size) + ", stride " + shapeToString(stride) +
                 " and offset " + str(offset) + " read outside the input " + shapeToString(x) +
                 " (" + str(xNumel) + " elements)");
  return size;
}

// ---- indexing by values and by computed indices --------------------------------

int64_t wrapDim(const char *op, int64_t dim, size_t rank) {
  const int64_t wrapRank = std::max<int64_t>(static_cast<int64_t>(rank), 1);
  if (dim < -wrapRank || dim >= wrapRank)
    fail(op, "Dimension out of range (expected to be in range of [" + str(-wrapRank) + ", " +
                 str(wrapRank - 1) + "], but got " + str(dim) + ")");
  return dim < 0 ? dim + wrapRank : dim;
}

Shape topkShape(const Shape &x, const IndexParams &p) {
  const int64_t d = wrapDim("topk", p.dim, x.size());
  const int64_t extent = x.empty() ? 1 : x[static_cast<size_t>(d)];
  if (p.k < 0 || p.k > extent)
    fail("topk", "k (" + str(p.k) + ") is out of range for dim " + str(d) + " of size " +
                     str(extent));
  Shape y = x;
  if (!y.empty()) y[static_cast<size_t>(d)] = p.k;
  return y;
}

Shape gatherShape(const Shape &x, const Shape &index, const IndexParams &p) {
  const int64_t d = wrapDim("gather", p.dim, x.size());
  if (index.size() != x.size())
    fail("gather", "Index tensor must have the same number of dimensions as input tensor "
                   "(index " + shapeToString(index) + ", input " + shapeToString(x) + ")");
  for (size_t i = 0; i < x.size(); ++i)
    if (static_cast<int64_t>(i) != d && index[i] > x[i])
      fail("gather", "Size does not match at dimension " + str(static_cast<int64_t>(i)) +
                         " expected index " + shapeToString(index) +
                         " to be no larger than self " + shapeToString(x) +
                         " apart from dimension " + str(d));
  if (!x.empty() && x[static_cast<size_t>(d)] == 0 && plan::numElements(index) > 0)
    fail("gather", "cannot gather from an empty dim " + str(d) + " of " + shapeToString(x));
  return index;
}

Shape embeddingBackwardShape(const Shape &src, const Shape &index, const IndexParams &p,
                             const Shape *acc) {
  const char *op = "embedding_backward";
  if (src.size() != 2 || index.size() != 1 || index[0] != src[0])
    fail(op, "takes src [M, D] and index [M], got src " + shapeToString(src) + " and index " +
                 shapeToString(index));
  if (p.rows < 0) fail(op, "rows must be non-negative, got " + str(p.rows));
  if (p.paddingIdx < -1 || p.paddingIdx >= p.rows)
    fail(op, "padding_idx must be a row (0.." + str(p.rows - 1) + ") or -1, got " +
                 str(p.paddingIdx));
  Shape y{p.rows, src[1]};
  if (acc && *acc != y)
    fail(op,
         "acc must have the result's shape " + shapeToString(y) + ", got " + shapeToString(*acc));
  return y;
}

Shape crossEntropyBackwardShape(const Shape &x, const Shape &target) {
  if (x.size() != 2 || target.size() != 1 || target[0] != x[0])
    fail("cross_entropy_backward", "takes logits [N, C] and target [N], got logits " +
                                       shapeToString(x) + " and target " + shapeToString(target));
  return x;
}

// ---- integer values, comparisons and dtype conversion ---------------------------

const char *compareOpName(CompareOp op) {
  switch (op) {
  case CompareOp::Eq: return "eq";
  case CompareOp::Ne: return "ne";
  case CompareOp::Lt: return "lt";
  case CompareOp::Le: return "le";
  case CompareOp::Gt: return "gt";
  case CompareOp::Ge: return "ge";
  }
  return "?";
}

Shape compareShape(CompareOp op, const Shape &a, const Shape *b) {
  if (!b) return a;
  auto shape = broadcastShapes(a, *b);
  if (!shape)
    fail(compareOpName(op), "shapes " + shapeToString(a) + " and " + shapeToString(*b) +
                                " do not broadcast");
  return *shape;
}

Shape whereShape(const Shape &cond, const Shape &a, const Shape &b) {
  auto ab = broadcastShapes(a, b);
  auto all = ab ? broadcastShapes(cond, *ab) : std::nullopt;
  if (!all)
    fail("where", "shapes " + shapeToString(cond) + ", " + shapeToString(a) + " and " +
                      shapeToString(b) + " do not broadcast");
  return *all;
}

plan::DType castDTypeNamed(const std::string &name) {
  if (auto dtype = plan::parseDType(name)) return *dtype;
  fail("cast", "dtype must be float32, float64, bfloat16, float16 or int64, got \"" + name +
                   "\"");
}

Shape gridSampleShape(const Shape &x, const Shape &grid) {
  if (x.size() != 4)
    fail("grid_sample", "x must be 4-d [N, C, H, W], got " + shapeToString(x));
  if (grid.size() != 4 || grid[0] != x[0] || grid[3] != 2)
    fail("grid_sample", "grid must be [N, Ho, Wo, 2] with x's N = " + std::to_string(x[0]) +
                            ", got " + shapeToString(grid));
  return {x[0], x[1], grid[1], grid[2]};
}

Shape gridSampleBackwardShape(const Shape &x, const Shape &grid, const Shape &grad,
                              SampleGrad wrt) {
  const Shape forward = gridSampleShape(x, grid);
  if (grad != forward)
    fail("grid_sample_backward", "grad must have grid_sample's shape " + shapeToString(forward) +
                                     ", got " + shapeToString(grad));
  return wrt == SampleGrad::Input ? x : grid;
}

Shape dropoutShape(const Shape &x, const Shape &step, const DropoutParams &p) {
  if (!step.empty())
    checks::fail("dropout", "the step counter (operand 1) must be 0-d, got " + shapeToString(step));
  if (!(p.p >= 0.0 && p.p <= 1.0))
    checks::fail("dropout", "p must lie in [0, 1], got " + std::to_string(p.p));
  if (p.globalRows < 0 || p.rowElements < 0 || p.rowOffset < 0)
    checks::fail("dropout", "global_rows, row_elements and row_offset must not be negative");
  return x;
}

Shape cumsumShape(const Shape &x, const ScanParams &p) {
  wrapDim("cumsum", p.dim, x.size());
  return x;
}

// ---- a mixture of experts' experts -----------------------------------------------

GateActivation gateActivationNamed(const std::string &name) {
  if (name == "silu") return GateActivation::Silu;
  if (name == "gelu") return GateActivation::Gelu;
  if (name == "gelu_tanh") return GateActivation::GeluTanh;
  if (name == "relu") return GateActivation::Relu;
  fail("moe_experts", "activation must be silu, gelu, gelu_tanh or relu, got \"" + name + "\"");
}

MoeOperand moeOperandNamed(const std::string &name) {
  if (name == "x") return MoeOperand::X;
  if (name == "weights") return MoeOperand::Weights;
  if (name == "gate_up") return MoeOperand::GateUp;
  if (name == "down") return MoeOperand::Down;
  fail("moe_experts_backward", "wrt must be x, weights, gate_up or down, got \"" + name + "\"");
}

Shape moeExpertsShape(const Shape &x, const Shape &index, const Shape &weights,
                      const Shape &gateUp, const Shape &down) {
  const char *op = "moe_experts";
  if (x.size() != 2) fail(op, "x must be [T, H], got " + shapeToString(x));
  if (index.size() != 2 || index[0] != x[0])
    fail(op, "index must be [T, k] with T = " + str(x[0]) + ", got " + shapeToString(index));
  if (weights != index)
    fail(op, "weights " + shapeToString(weights) + " must have index's shape " +
                 shapeToString(index));
  if (gateUp.size() != 3 || gateUp[2] != x[1] || gateUp[1] % 2 != 0)
    fail(op, "gate_up must be [E, 2I, H] with H = " + str(x[1]) + ", got " +
                 shapeToString(gateUp));
  const int64_t E = gateUp[0], I = gateUp[1] / 2;
  if (down != Shape{E, x[1], I})
    fail(op, "down must be [E, H, I] = " + shapeToString({E, x[1], I}) + ", got " +
                 shapeToString(down));
  if (E == 0 && index[1] > 0 && x[0] > 0) fail(op, "no experts (E = 0) to route tokens to");
  return x;
}

int64_t moeExpertsWorkBytes(int64_t tokens, int64_t k, int64_t hidden, int64_t inner,
                            plan::DType dtype) {
  const int64_t rows = std::min(kMoeBlockRows, tokens * k);
  const int64_t block = rows * (2 * hidden + 2 * inner);
  const int64_t accumulator = dtype == plan::DType::F32 ? 0 : tokens * hidden;
  return (block + accumulator) * 4;
}

Shape moeExpertsBackwardShape(MoeOperand wrt, const Shape &x, const Shape &index,
                              const Shape &weights, const Shape &gateUp, const Shape &down,
                              const Shape &grad, const Shape *hidden, const Shape *gatedGrad) {
  // The forward's rule first, its messages naming the forward's op.
  try {
    moeExpertsShape(x, index, weights, gateUp, down);
  } catch (const RuntimeError &e) {
    const std::string what = e.what(), forward = "moe_experts: ";
    fail("moe_experts_backward", what.rfind(forward, 0) == 0 ? what.substr(forward.size()) : what);
  }
  if (grad != x)
    fail("moe_experts_backward", "grad " + shapeToString(grad) +
                                     " must have the shape of the forward's output " +
                                     shapeToString(x));
  if (hidden && *hidden != Shape{x[0], index[1], gateUp[1]})
    fail("moe_experts_backward", "hidden " + shapeToString(*hidden) +
                                     " must be moe_experts_hidden's [T, k, 2I] = " +
                                     shapeToString({x[0], index[1], gateUp[1]}));
  if (gatedGrad && !hidden)
    fail("moe_experts_backward",
         "gated_grad (operand 7) needs hidden (operand 6): moe_experts_hidden's [T, k, 2I]");
  if (gatedGrad && *gatedGrad != Shape{x[0], index[1], gateUp[1] / 2})
    fail("moe_experts_backward", "gated_grad " + shapeToString(*gatedGrad) +
                                     " must be moe_experts_gated_grad's [T, k, I] = " +
                                     shapeToString({x[0], index[1], gateUp[1] / 2}));
  switch (wrt) {
  case MoeOperand::X: return x;
  case MoeOperand::Weights: return weights;
  case MoeOperand::GateUp: return gateUp;
  case MoeOperand::Down: return down;
  }
  return x;
}

Shape moeExpertsHiddenShape(const Shape &x, const Shape &index, const Shape &gateUp) {
  const char *op = "moe_experts_hidden";
  if (x.size() != 2) fail(op, "x must be [T, H], got " + shapeToString(x));
  if (index.size() != 2 || index[0] != x[0])
    fail(op, "index must be [T, k] with T = " + str(x[0]) + ", got " + shapeToString(index));
  if (gateUp.size() != 3 || gateUp[2] != x[1] || gateUp[1] % 2 != 0)
    fail(op, "gate_up must be [E, 2I, H] with H = " + str(x[1]) + ", got " + shapeToString(gateUp));
  return {x[0], index[1], gateUp[1]};
}

int64_t moeExpertsHiddenWorkBytes(int64_t tokens, int64_t k, int64_t hidden, int64_t inner) {
  return std::min(kMoeBlockRows, tokens * k) * (hidden + 2 * inner) * 4;
}

Shape moeExpertsGatedGradShape(const Shape &grad, const Shape &index, const Shape &down) {
  const char *op = "moe_experts_gated_grad";
  if (grad.size() != 2) fail(op, "grad must be [T, H], got " + shapeToString(grad));
  if (index.size() != 2 || index[0] != grad[0])
    fail(op, "index must be [T, k] with T = " + str(grad[0]) + ", got " + shapeToString(index));
  if (down.size() != 3 || down[1] != grad[1])
    fail(op, "down must be [E, H, I] with H = " + str(grad[1]) + ", got " + shapeToString(down));
  return {grad[0], index[1], down[2]};
}

int64_t moeExpertsGatedGradWorkBytes(int64_t tokens, int64_t k, int64_t hidden, int64_t inner) {
  return std::min(kMoeBlockRows, tokens * k) * (hidden + inner) * 4;
}

int64_t moeExpertsBackwardWorkBytes(MoeOperand wrt, int64_t tokens, int64_t k, int64_t hidden,
                                    int64_t inner, plan::DType dtype) {
  const int64_t rows = std::min(kMoeBlockRows, tokens * k);
  // the rows, then one row's activation slopes and their scratch
  const int64_t block = rows * (3 * hidden + 6 * inner) + 2 * inner;
  int64_t accumulator = 0;
  if (dtype != plan::DType::F32) switch (wrt) {
    case MoeOperand::X: accumulator = tokens * hidden; break;
    case MoeOperand::GateUp: accumulator = 2 * inner * hidden; break;
    case MoeOperand::Down: accumulator = hidden * inner; break;
    case MoeOperand::Weights: break;
    }
  return (block + accumulator) * 4;
}

// ---- a language model's head and loss, fused -------------------------------------

Shape linearCrossEntropyShape(const Shape &x, const Shape &target, const Shape &weight) {
  if (x.size() != 2 || target.size() != 1 || target[0] != x[0] || weight.size() != 2 ||
      weight[1] != x[1])
    fail("linear_cross_entropy", "takes x [N, H], target [N] and weight [V, H], got x " +
                                     shapeToString(x) + ", target " + shapeToString(target) +
                                     " and weight " + shapeToString(weight));
  return {};
}

Shape linearCrossEntropyBackwardShape(LossHeadOperand wrt, const Shape &x, const Shape &target,
                                      const Shape &weight, const Shape &scale) {
  // The forward's rule first, its message naming the forward's op.
  linearCrossEntropyShape(x, target, weight);
  if (scale != Shape{x[0], 1})
    fail("linear_cross_entropy_backward",
         "scale must be [N, 1] = " + shapeToString({x[0], 1}) + ", got " + shapeToString(scale));
  return wrt == LossHeadOperand::Input ? x : weight;
}

int64_t linearCrossEntropyWorkBytes(LossHeadKind kind, LossHeadOperand wrt, int64_t tokens,
                                    int64_t vocab, int64_t hidden, plan::DType dtype) {
  const int64_t rows = std::min(kLossHeadRows, tokens);
  const int64_t logits = rows * vocab * 4;
  if (kind == LossHeadKind::Forward || wrt == LossHeadOperand::Input || dtype == plan::DType::F32)
    return logits;
  const int64_t columns = std::min(kLossHeadColumns, vocab);
  return logits + tokens * (4 + 8) + rows * columns * 4 + columns * hidden * 4;
}

// ---- attention's gradient, blockwise ---------------------------------------------

Shape sdpaBackwardShape(AttentionOperand wrt, const Shape &q, const Shape &k, const Shape &v,
                        const Shape &g, const Shape *mask) {
  if (!attentionShapesFit(q, k, v) || g.size() != 4 || g[0] != q[0] || g[1] != q[1] ||
      g[2] != q[2] || g[3] != v[3])
    fail("sdpa_backward", "takes q [B, H, T, E], k [B, Hkv, S, E], v [B, Hkv, S, Ev] and g [B, "
                          "H, T, Ev], got q " +
                              shapeToString(q) + ", k " + shapeToString(k) + ", v " +
                              shapeToString(v) + " and g " + shapeToString(g));
  if (const Shape scores{q[0], q[1], q[2], k[2]}; mask && !attentionMaskFits(*mask, scores))
    fail("sdpa_backward", "mask " + shapeToString(*mask) + " does not broadcast to the scores " +
                              shapeToString(scores) + " (4-d, each dim 1 or the scores')");
  return wrt == AttentionOperand::Q ? q : wrt == AttentionOperand::K ? k : v;
}

int64_t sdpaBackwardWorkBytes(AttentionOperand wrt, int64_t heads, int64_t kvHeads, int64_t queries,
                              int64_t keys, int64_t headDim, plan::DType dtype) {
  const int64_t rows = std::min(kAttentionRows, queries), item = plan::dtypeSize(dtype);
  // one block's probabilities, their gradient and its product with them
  // ([rows, S] each) and its row sums, in the dtype
  const int64_t blocks = rows * (3 * keys + 1) * item;
  if (wrt == AttentionOperand::Q) return blocks;
  const int64_t readers = kvHeads > 0 ? heads / kvHeads : 1;
  return blocks + keys * headDim * 4 + (readers > 1 ? readers * keys * headDim * item : 0);
}

}  // namespace shardc::runtime
