// The family ops of the op table (SHARDC_FAMILY_OP in runtime/OpTable.def):
// their attributes decoded into the family's parameters, and their result
// type. The one place a family op's shape and dtype are decided: the tc
// dialect's generic op verifier, the graph reader and the executor core all
// call resultType() (the compiler links this MLIR-free library), and the
// kernels check the same runtime/OpFamilies.h rule on entry.
//
// Attributes arrive already checked against the table's kinds (the executor
// core, the graph reader and the verifier do that); the decoders check the
// values (lengths, ranges) and throw RuntimeError "<op>: <reason>".
#pragma once

#include "runtime/OpFamilies.h"
#include "runtime/Plan.h"

#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace shardc::runtime {

using AttrMap = std::map<std::string, plan::AttrValue>;

/// An operand's or a result's type.
struct TensorType {
  Shape shape;
  plan::DType dtype = plan::DType::F32;
  bool operator==(const TensorType &) const = default;
};

/// conv: `stride`, `padding`, `dilation` have one entry per spatial dim of x
/// (rank 3: 1d, rank 4: 2d); `transposed` 0/1; `output_padding` (transposed).
ConvParams convParams(const AttrMap &attrs, size_t inputRank);
/// max_pool / avg_pool: `kernel` has one entry per spatial dim; stride,
/// padding (and max's dilation) as many; ceil_mode, count_include_pad 0/1.
PoolParams poolParams(PoolKind kind, const AttrMap &attrs);

struct ReduceArgs {
  std::vector<int64_t> dims;  // as given (empty: every dim)
  bool keepdim = false;
  int64_t correction = 1;  // var only
};
ReduceArgs reduceArgs(const plan::OpInfo &info, const AttrMap &attrs);

/// The unary family's scalar parameters a, b (runtime/OpFamilies.h): clamp
/// min/max (absent: unbounded), leaky_relu slope (0.01), elu alpha (1),
/// pow exponent, softplus beta (1) and threshold (20).
IndexParams indexParams(IndexKind kind, const AttrMap &attrs);
MoeParams moeParams(const AttrMap &attrs);
/// linear_cross_entropy(_backward): `ignore_index` (-100), `wrt` "input" or
/// "weight" (backward only; other names fail naming both), `logits_dtype`
/// (a float dtype's name).
LossHeadParams lossHeadParams(const AttrMap &attrs);
/// sdpa_backward: `wrt` "q", "k" or "v" (other names fail naming them),
/// `causal` 0/1, `scale`.
AttentionGradParams attentionGradParams(const AttrMap &attrs);

/// eq, ne, ...: `value` (the scalar form, one operand), absent with two
/// operands; cast: `dtype`; cumsum: `dim`, `reverse`.
std::optional<double> compareValue(const plan::OpInfo &info, size_t operands,
                                   const AttrMap &attrs);
CastParams castParams(const AttrMap &attrs);
ScanParams scanParams(const AttrMap &attrs);
DropoutParams dropoutParams(const AttrMap &attrs);
/// grid_sample: `mode` "bilinear" (default) or "nearest", `padding_mode`
/// "zeros" (default), "border" or "reflection", `align_corners` 0 (default)
/// or 1; other names fail listing the known ones.
SampleParams sampleParams(const AttrMap &attrs);
/// grid_sample_backward's `wrt`: "input" or "grid".
SampleGrad sampleGradWrt(const AttrMap &attrs);

struct UnaryArgs {
  double a = 0, b = 0;
};
UnaryArgs unaryArgs(UnaryOp op, const AttrMap &attrs);

/// The result type of family op `info` on `operands`: the family's shape
/// rule; dtype: the float operands' one dtype (float32, bfloat16, float16),
/// int64 for argmax/argmin and comparisons, the `dtype` attribute for cast;
/// comparisons and cumsum also take int64 operands, cast any dtype. Throws RuntimeError "<op>: <reason>".
TensorType resultType(const plan::OpInfo &info, std::span<const TensorType> operands,
                      const AttrMap &attrs);
/// The same without exceptions (for MLIR code): the reason, or nullopt with
/// `result` set.
std::optional<std::string> tryResultType(const plan::OpInfo &info,
                                         std::span<const TensorType> operands,
                                         const AttrMap &attrs, TensorType &result);

}  // namespace shardc::runtime
