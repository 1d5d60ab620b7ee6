#include "runtime/OpRules.h"

#include "runtime/ForwardChecks.h"
#include "runtime/RuntimeError.h"

#include <cmath>
#include <limits>

namespace shardc::runtime {
namespace {

using plan::AttrValue;
using plan::OpFamily;
using plan::OpInfo;

// Attribute readers: kinds are checked before (table), absent = fallback.
int64_t intOr(const AttrMap &attrs, const char *name, int64_t fallback) {
  auto it = attrs.find(name);
  return it == attrs.end() ? fallback : std::get<int64_t>(it->second);
}
double floatOr(const AttrMap &attrs, const char *name, double fallback) {
  auto it = attrs.find(name);
  return it == attrs.end() ? fallback : std::get<double>(it->second);
}
std::vector<int64_t> listOr(const AttrMap &attrs, const char *name,
                            std::vector<int64_t> fallback) {
  auto it = attrs.find(name);
  return it == attrs.end() ? fallback : std::get<std::vector<int64_t>>(it->second);
}

/// A 0/1 flag attribute.
bool flag(const char *op, const AttrMap &attrs, const char *name, bool fallback) {
  int64_t value = intOr(attrs, name, fallback ? 1 : 0);
  if (value != 0 && value != 1)
    checks::fail(op, std::string(name) + " must be 0 or 1, got " + std::to_string(value));
  return value == 1;
}

/// A per-spatial-dim list of `dims` entries.
std::vector<int64_t> spatial(const char *op, const AttrMap &attrs, const char *name,
                             size_t dims, std::vector<int64_t> fallback) {
  std::vector<int64_t> list = listOr(attrs, name, std::move(fallback));
  if (list.size() != dims)
    checks::fail(op, std::string(name) + " needs " + std::to_string(dims) +
                         " entries (one per spatial dim), got " + std::to_string(list.size()));
  return list;
}

/// The integer-value families' operands: one dtype, int64 or floating
/// (cast: any dtype; where: an int64 condition, then two of one dtype).
void requireValues(const OpInfo &info, std::span<const TensorType> operands) {
  size_t first = 0;
  if (info.family == OpFamily::Where) {
    if (operands[0].dtype != plan::DType::I64)
      checks::fail(info.name, std::string("cond (operand 0) is ") +
                                  plan::dtypeName(operands[0].dtype) +
                                  "; expects int64 (a comparison's 1/0)");
    first = 1;
  }
  for (size_t i = first; i < operands.size(); ++i)
    if (operands[i].dtype != operands[first].dtype)
      checks::fail(info.name, std::string("operands differ in dtype: ") +
                                  plan::dtypeName(operands[first].dtype) + " and " +
                                  plan::dtypeName(operands[i].dtype));
}

/// Float operands of one dtype: float32, bfloat16, float16 (the unary ops
/// and reductions also float64, as their kernels).
void requireFloat(const OpInfo &info, std::span<const TensorType> operands) {
  if (info.family == OpFamily::Random) {  // dropout: x of any float dtype, a float32 counter
    if (!checks::isFloatStorage(operands[0].dtype) && operands[0].dtype != plan::DType::F64)
      checks::fail(info.name, std::string("operand 0 is ") + plan::dtypeName(operands[0].dtype) +
                                  "; expects float32, float64, bfloat16 or float16");
    if (operands.size() > 1 && operands[1].dtype != plan::DType::F32)
      checks::fail(info.name, std::string("the step counter (operand 1) is ") +
                                  plan::dtypeName(operands[1].dtype) + "; expects float32");
    return;
  }
  // cross_entropy_backward is the softmax kernel's rows: its dtypes.
  const bool f64 = (info.family == OpFamily::Unary || info.family == OpFamily::Reduce ||
                    info.family == OpFamily::View || info.family == OpFamily::Index ||
                    info.family == OpFamily::Sample || info.family == OpFamily::AllReduce) &&
                   info.code != plan::OpCode::CrossEntropyBackward;
  // gather's and moe_experts' operand 1 is an int64 index; the float rule
  // covers the others (errors keep the operands' own numbers).
  const bool indexOperand =
      (info.family == OpFamily::Index || info.family == OpFamily::Experts) && operands.size() > 1;
  if (indexOperand && operands[1].dtype != plan::DType::I64)
    checks::fail(info.name, std::string("index (operand 1) is ") +
                                plan::dtypeName(operands[1].dtype) + "; expects int64");
  // gather and as_strided copy elements: their x may also be int64
  // (RoBERTa's token type ids gathered at the position ids, an attention
  // mask's view)
  const bool copies = info.family == OpFamily::View ||
                      (info.family == OpFamily::Index &&
                       info.variant == static_cast<int>(IndexKind::Gather));
  if (copies && operands[0].dtype == plan::DType::I64) return;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (indexOperand && i == 1) continue;
    if (!checks::isFloatStorage(operands[i].dtype) &&
        !(f64 && operands[i].dtype == plan::DType::F64))
      checks::fail(info.name, "operand " + std::to_string(i) + " is " +
                                  plan::dtypeName(operands[i].dtype) + "; expects float32, " +
                                  (f64 ? "float64, " : "") + "bfloat16 or float16");
    if (operands[i].dtype != operands[0].dtype)
      checks::fail(info.name, std::string("operands differ in dtype: ") +
                                  plan::dtypeName(operands[0].dtype) + " and " +
                                  plan::dtypeName(operands[i].dtype));
  }
}

/// linear_cross_entropy(_backward): x and weight of one float dtype, int64
/// targets, scale of the logits' dtype. Returns the result's dtype: the
/// loss's (the logits'), or x's for a gradient.
plan::DType lossHeadDtype(const OpInfo &info, std::span<const TensorType> operands,
                          const AttrMap &attrs) {
  const plan::DType x = operands[0].dtype;
  const plan::DType logits = lossHeadParams(attrs).logitsDtype.value_or(x);
  auto require = [&](size_t i, plan::DType want, const char *what) {
    if (operands[i].dtype != want)
      checks::fail(info.name, std::string(what) + " (operand " + std::to_string(i) + ") is " +
                                  plan::dtypeName(operands[i].dtype) + "; expects " +
                                  plan::dtypeName(want));
  };
  if (!checks::isFloatStorage(x))
    checks::fail(info.name, std::string("x (operand 0) is ") + plan::dtypeName(x) +
                                "; expects float32, bfloat16 or float16");
  require(1, plan::DType::I64, "target");
  require(2, x, "weight");
  if (operands.size() > 3) {
    require(3, logits, "scale");
    return x;
  }
  return logits;
}

Shape shapeRule(const OpInfo &info, std::span<const TensorType> in, const AttrMap &attrs) {
  auto optional = [&](size_t i) { return i < in.size() ? &in[i].shape : nullptr; };
  switch (info.family) {
  case OpFamily::Conv:
    if (static_cast<ConvKind>(info.variant) == ConvKind::WeightGrad)
      return convWeightGradShape(convParams(attrs, in[0].shape.size()), in[0].shape, in[1].shape,
                                 std::get<std::vector<int64_t>>(attrs.at("kernel")));
    return convShape(convParams(attrs, in[0].shape.size()), in[0].shape, in[1].shape,
                     optional(2));
  case OpFamily::Pool:
    if (info.code == plan::OpCode::MaxPoolBackward)
      return maxPoolBackwardShape(poolParams(PoolKind::Max, attrs), in[0].shape, in[1].shape);
    return poolShape(poolParams(static_cast<PoolKind>(info.variant), attrs), in[0].shape);
  case OpFamily::AdaptivePool:
    return adaptivePoolShape(static_cast<PoolKind>(info.variant),
                             std::get<std::vector<int64_t>>(attrs.at("output_size")),
                             in[0].shape);
  case OpFamily::BatchNorm:
    // x, mean, var[, weight, bias]: both affine operands or neither.
    if (in.size() == 4) checks::fail(info.name, "takes weight and bias together (5 operands) or neither (3)");
    return batchNormShape(in[0].shape, in[1].shape, in[2].shape, optional(3), optional(4));
  case OpFamily::GroupNorm:
    return groupNormShape(in[0].shape, std::get<int64_t>(attrs.at("groups")), optional(1),
                          optional(2));
  case OpFamily::Reduce: {
    ReduceArgs args = reduceArgs(info, attrs);
    return reduceShape(static_cast<ReduceKind>(info.variant), in[0].shape, args.dims,
                       args.keepdim);
  }
  case OpFamily::Unary:
    unaryArgs(static_cast<UnaryOp>(info.variant), attrs);  // checks the values
    return in[0].shape;
  case OpFamily::View:
    return asStridedShape(in[0].shape, std::get<std::vector<int64_t>>(attrs.at("size")),
                          std::get<std::vector<int64_t>>(attrs.at("stride")),
                          intOr(attrs, "offset", 0));
  case OpFamily::Index: {
    const IndexKind kind = static_cast<IndexKind>(info.variant);
    const IndexParams p = indexParams(kind, attrs);
    if (kind == IndexKind::TopK) return topkShape(in[0].shape, p);
    if (kind == IndexKind::Gather) return gatherShape(in[0].shape, in[1].shape, p);
    if (kind == IndexKind::CrossEntropyBackward)
      return crossEntropyBackwardShape(in[0].shape, in[1].shape);
    return embeddingBackwardShape(in[0].shape, in[1].shape, p, optional(2));
  }
  case OpFamily::Experts: {
    const MoeParams p = moeParams(attrs);  // checks the names
    if (static_cast<ExpertsKind>(info.variant) == ExpertsKind::Hidden)
      return moeExpertsHiddenShape(in[0].shape, in[1].shape, in[2].shape);
    if (static_cast<ExpertsKind>(info.variant) == ExpertsKind::GatedGrad)
      return moeExpertsGatedGradShape(in[0].shape, in[1].shape, in[2].shape);
    if (static_cast<ExpertsKind>(info.variant) == ExpertsKind::Backward)
      return moeExpertsBackwardShape(p.wrt, in[0].shape, in[1].shape, in[2].shape, in[3].shape,
                                     in[4].shape, in[5].shape, optional(6), optional(7));
    return moeExpertsShape(in[0].shape, in[1].shape, in[2].shape, in[3].shape, in[4].shape);
  }
  case OpFamily::LossHead: {
    const LossHeadParams p = lossHeadParams(attrs);  // checks `wrt`
    if (static_cast<LossHeadKind>(info.variant) == LossHeadKind::Backward)
      return linearCrossEntropyBackwardShape(p.wrt, in[0].shape, in[1].shape, in[2].shape,
                                             in[3].shape);
    return linearCrossEntropyShape(in[0].shape, in[1].shape, in[2].shape);
  }
  case OpFamily::Attention:
    return sdpaBackwardShape(attentionGradParams(attrs).wrt, in[0].shape, in[1].shape, in[2].shape,
                             in[3].shape, in.size() > 4 ? &in[4].shape : nullptr);
  case OpFamily::Compare:
    compareValue(info, in.size(), attrs);  // one operand and a value, or two
    return compareShape(static_cast<CompareOp>(info.variant), in[0].shape, optional(1));
  case OpFamily::Where:
    return whereShape(in[0].shape, in[1].shape, in[2].shape);
  case OpFamily::Cast:
    castParams(attrs);  // checks the dtype's name
    return in[0].shape;
  case OpFamily::Scan:
    return cumsumShape(in[0].shape, scanParams(attrs));
  case OpFamily::Sample:
    sampleParams(attrs);  // checks the names
    if (info.code == plan::OpCode::GridSampleBackward)
      return gridSampleBackwardShape(in[0].shape, in[1].shape, in[2].shape, sampleGradWrt(attrs));
    return gridSampleShape(in[0].shape, in[1].shape);
  case OpFamily::Random: return dropoutShape(in[0].shape, in[1].shape, dropoutParams(attrs));
  case OpFamily::AllReduce: return in[0].shape;
  case OpFamily::None: break;
  }
  checks::fail(info.name, "is not a family op (no shape rule in the op table)");
}

}  // namespace

ConvParams convParams(const AttrMap &attrs, size_t inputRank) {
  if (inputRank < 3 || inputRank > 5)
    checks::fail("conv", "x must be [N, C, L], [N, C, H, W] or [N, C, D, H, W], got rank " +
                             std::to_string(inputRank));
  ConvParams p;
  p.spatialDims = static_cast<int>(inputRank) - 2;
  const size_t dims = static_cast<size_t>(p.spatialDims);
  p.stride = spatial("conv", attrs, "stride", dims, {});
  p.padding = spatial("conv", attrs, "padding", dims, {});
  p.dilation = spatial("conv", attrs, "dilation", dims, {});
  p.groups = intOr(attrs, "groups", 1);
  p.transposed = flag("conv", attrs, "transposed", false);
  p.outputPadding = spatial("conv", attrs, "output_padding", dims,
                            std::vector<int64_t>(dims, 0));
  return p;
}

PoolParams poolParams(PoolKind kind, const AttrMap &attrs) {
  const char *op = kind == PoolKind::Max ? "max_pool" : "avg_pool";
  PoolParams p;
  p.kind = kind;
  p.kernel = listOr(attrs, "kernel", {});
  if (p.kernel.empty() || p.kernel.size() > 3)
    checks::fail(op, "kernel needs 1, 2 or 3 entries, got " + std::to_string(p.kernel.size()));
  p.spatialDims = static_cast<int>(p.kernel.size());
  p.stride = spatial(op, attrs, "stride", p.kernel.size(), {});
  p.padding = spatial(op, attrs, "padding", p.kernel.size(), {});
  p.dilation = spatial(op, attrs, "dilation", p.kernel.size(),
                       std::vector<int64_t>(p.kernel.size(), 1));
  p.ceilMode = flag(op, attrs, "ceil_mode", false);
  p.countIncludePad = flag(op, attrs, "count_include_pad", true);
  p.divisorOverride = intOr(attrs, "divisor_override", 0);
  if (p.divisorOverride < 0)
    checks::fail(op, "divisor_override must be positive, got " +
                         std::to_string(p.divisorOverride));
  return p;
}

ReduceArgs reduceArgs(const OpInfo &info, const AttrMap &attrs) {
  ReduceArgs args;
  args.dims = listOr(attrs, "dims", {});
  args.keepdim = flag(info.name, attrs, "keepdim", false);
  args.correction = intOr(attrs, "correction", 1);
  if (args.correction < 0)
    checks::fail(info.name, "correction must be non-negative, got " +
                                std::to_string(args.correction));
  return args;
}

MoeParams moeParams(const AttrMap &attrs) {
  MoeParams p;
  if (auto it = attrs.find("activation"); it != attrs.end())
    p.activation = gateActivationNamed(std::get<std::string>(it->second));
  if (auto it = attrs.find("wrt"); it != attrs.end())
    p.wrt = moeOperandNamed(std::get<std::string>(it->second));
  return p;
}

AttentionGradParams attentionGradParams(const AttrMap &attrs) {
  AttentionGradParams p;
  const std::string wrt = std::get<std::string>(attrs.at("wrt"));
  if (wrt == "k")
    p.wrt = AttentionOperand::K;
  else if (wrt == "v")
    p.wrt = AttentionOperand::V;
  else if (wrt != "q")
    checks::fail("sdpa_backward", "wrt must be \"q\", \"k\" or \"v\", got \"" + wrt + "\"");
  p.causal = flag("sdpa_backward", attrs, "causal", false);
  p.scale = floatOr(attrs, "scale", 1.0);
  return p;
}

LossHeadParams lossHeadParams(const AttrMap &attrs) {
  LossHeadParams p;
  p.ignoreIndex = intOr(attrs, "ignore_index", -100);
  if (auto it = attrs.find("wrt"); it != attrs.end()) {
    const std::string &wrt = std::get<std::string>(it->second);
    if (wrt == "weight")
      p.wrt = LossHeadOperand::Weight;
    else if (wrt != "input")
      checks::fail("linear_cross_entropy_backward",
                   "wrt must be \"input\" or \"weight\", got \"" + wrt + "\"");
  }
  if (auto it = attrs.find("logits_dtype"); it != attrs.end()) {
    p.logitsDtype = castDTypeNamed(std::get<std::string>(it->second));
    if (!checks::isFloatStorage(*p.logitsDtype))
      checks::fail("linear_cross_entropy",
                   "logits_dtype must be float32, bfloat16 or float16, got " +
                       std::get<std::string>(it->second));
  }
  return p;
}

IndexParams indexParams(IndexKind kind, const AttrMap &attrs) {
  IndexParams p;
  p.dim = intOr(attrs, "dim", -1);
  if (kind == IndexKind::TopK) {
    p.k = intOr(attrs, "k", 0);
    p.largest = flag("topk", attrs, "largest", true);
  }
  if (kind == IndexKind::EmbeddingBackward) {
    p.rows = intOr(attrs, "rows", 0);
    p.paddingIdx = intOr(attrs, "padding_idx", -1);
  }
  if (kind == IndexKind::CrossEntropyBackward) p.ignoreIndex = intOr(attrs, "ignore_index", -100);
  return p;
}

std::optional<double> compareValue(const OpInfo &info, size_t operands, const AttrMap &attrs) {
  auto it = attrs.find("value");
  if (operands == 1 && it == attrs.end())
    checks::fail(info.name, "compares one operand with `value`, which is missing");
  if (operands == 2 && it != attrs.end())
    checks::fail(info.name, "compares two operands; `value` is for the one-operand form");
  if (it == attrs.end()) return std::nullopt;
  return std::get<double>(it->second);
}

CastParams castParams(const AttrMap &attrs) {
  return {castDTypeNamed(std::get<std::string>(attrs.at("dtype")))};
}

ScanParams scanParams(const AttrMap &attrs) {
  return {intOr(attrs, "dim", 0), intOr(attrs, "reverse", 0) != 0};
}

DropoutParams dropoutParams(const AttrMap &attrs) {
  const int64_t stream = std::get<int64_t>(attrs.at("stream"));
  if (stream < 0 || stream > 0xffffffffLL)
    checks::fail("dropout",
                 "stream must be a 32-bit unsigned integer, got " + std::to_string(stream));
  return {std::get<double>(attrs.at("p")), static_cast<uint32_t>(stream),
          intOr(attrs, "global_rows", 0), intOr(attrs, "row_elements", 0),
          intOr(attrs, "row_offset", 0)};
}

SampleParams sampleParams(const AttrMap &attrs) {
  auto name = [&](const char *key, const char *fallback) {
    auto it = attrs.find(key);
    return it == attrs.end() ? std::string(fallback) : std::get<std::string>(it->second);
  };
  SampleParams p;
  const std::string mode = name("mode", "bilinear"), padding = name("padding_mode", "zeros");
  if (mode == "nearest") p.mode = SampleMode::Nearest;
  else if (mode != "bilinear")
    checks::fail("grid_sample", "mode must be \"bilinear\" or \"nearest\", got \"" + mode +
                                    "\" (bicubic has no kernel)");
  if (padding == "border") p.padding = SamplePadding::Border;
  else if (padding == "reflection") p.padding = SamplePadding::Reflection;
  else if (padding != "zeros")
    checks::fail("grid_sample", "padding_mode must be \"zeros\", \"border\" or \"reflection\", "
                                "got \"" + padding + "\"");
  p.alignCorners = flag("grid_sample", attrs, "align_corners", false);
  return p;
}

SampleGrad sampleGradWrt(const AttrMap &attrs) {
  auto it = attrs.find("wrt");
  const std::string wrt = it == attrs.end() ? "" : std::get<std::string>(it->second);
  if (wrt == "input") return SampleGrad::Input;
  if (wrt == "grid") return SampleGrad::Grid;
  checks::fail("grid_sample_backward", "wrt must be \"input\" or \"grid\", got \"" + wrt + "\"");
}

UnaryArgs unaryArgs(UnaryOp op, const AttrMap &attrs) {
  const double inf = std::numeric_limits<double>::infinity();
  switch (op) {
  case UnaryOp::Clamp: {
    UnaryArgs args{floatOr(attrs, "min", -inf), floatOr(attrs, "max", inf)};
    if (std::isnan(args.a) || std::isnan(args.b))
      checks::fail("clamp_out", "min and max must not be NaN");
    return args;
  }
  case UnaryOp::LeakyRelu: return {floatOr(attrs, "negative_slope", 0.01), 0};
  case UnaryOp::Elu: return {floatOr(attrs, "alpha", 1.0), floatOr(attrs, "input_scale", 1.0)};
  case UnaryOp::PowScalar: return {floatOr(attrs, "exponent", 1.0), 0};
  case UnaryOp::Softplus: return {floatOr(attrs, "beta", 1.0), floatOr(attrs, "threshold", 20.0)};
  default: return {};
  }
}

TensorType resultType(const OpInfo &info, std::span<const TensorType> operands,
                      const AttrMap &attrs) {
  const int n = static_cast<int>(operands.size());
  if (n < info.minInputs || (info.maxInputs != plan::kAny && n > info.maxInputs))
    checks::fail(info.name, "takes " + std::to_string(info.minInputs) +
                                (info.maxInputs == info.minInputs
                                     ? ""
                                     : " to " + std::to_string(info.maxInputs)) +
                                " operands, got " + std::to_string(n));
  const bool values = info.family == OpFamily::Compare || info.family == OpFamily::Where ||
                      info.family == OpFamily::Cast || info.family == OpFamily::Scan;
  plan::DType dtype = operands[0].dtype;
  if (values)
    requireValues(info, operands);
  else if (info.family == OpFamily::LossHead)
    dtype = lossHeadDtype(info, operands, attrs);
  else
    requireFloat(info, operands);
  TensorType result{shapeRule(info, operands, attrs), dtype};
  if (info.family == OpFamily::Compare) result.dtype = plan::DType::I64;
  if (info.family == OpFamily::Cast) result.dtype = castParams(attrs).dtype;
  if (info.family == OpFamily::Where) result.dtype = operands[1].dtype;
  if (info.family == OpFamily::Reduce &&
      (info.variant == static_cast<int>(ReduceKind::Argmax) ||
       info.variant == static_cast<int>(ReduceKind::Argmin)))
    result.dtype = plan::DType::I64;
  if (info.family == OpFamily::Index && info.variant == static_cast<int>(IndexKind::TopK))
    result.dtype = plan::DType::I64;
  return result;
}

std::optional<std::string> tryResultType(const OpInfo &info,
                                         std::span<const TensorType> operands,
                                         const AttrMap &attrs, TensorType &result) {
  try {
    result = resultType(info, operands, attrs);
    return std::nullopt;
  } catch (const RuntimeError &e) {
    return std::string(e.what());
  } catch (const std::exception &e) {  // std::get on a mis-kinded attribute
    return std::string(info.name) + ": " + e.what();
  }
}

}  // namespace shardc::runtime
