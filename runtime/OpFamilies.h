// The op families real models need beyond the transformer set (convnets,
// audio encoders, torch.nn modules): their parameters and their shape and
// dtype rules, backend-independent. The op table (OpTable.def) names these
// rules, the compiler's dialect verifier and graph reader call them, and
// every backend's kernel calls them on entry, so a shape is accepted or
// rejected in one place with the same words.
//
// Conventions shared by every family:
//   - Layout is torch's: row-major, contiguous, channels first (N, C, *).
//   - Floating storage is float32, bfloat16 or float16; math is float32,
//     sums and means in double, each result rounded to the storage dtype once.
//   - A rule throws RuntimeError "<op>: <reason>" (checks::fail) and returns
//     the result's shape; it never looks at data.
//   - Results for one sample (one index of dim 0) do not depend on the batch
//     size or on the thread count: the data-parallel forward splits dim 0
//     over ranks and must give byte-identical outputs for any split.
#pragma once

#include "runtime/ForwardKernels.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardc::runtime {

// ---- convolution -----------------------------------------------------------

/// torch's aten.convolution for 1, 2 or 3 spatial dims, plain or transposed.
/// x [N, Cin, *spatial],
/// w [Cout, Cin/groups, *kernel] (transposed: [Cin, Cout/groups, *kernel]),
/// b [Cout] optional. Every vector has `spatialDims` entries.
/// The conv family's ops (the op table's variant): conv itself, and the
/// gradient of its weight, which training graphs use (docs/training.md).
enum class ConvKind { Forward, WeightGrad };
struct ConvParams {
  int spatialDims = 2;  // 1, 2 or 3
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;
  bool transposed = false;
  std::vector<int64_t> outputPadding;  // transposed only
};
/// y's shape; checks ranks, channels against groups, positive sizes.
Shape convShape(const ConvParams &p, const Shape &x, const Shape &w, const Shape *b);
/// conv_weight_grad: the gradient of a (non-transposed) convolution's
/// weight, dw[co, ci, k] = sum over samples and output pixels of
/// grad[n, co, pixel] * x[n, group's ci, the pixel's tap k], from x
/// [N, Cin, *spatial] and grad [N, Cout, *out] (conv's output for a weight
/// of spatial sizes `kernel`): dw [Cout, Cin/groups, *kernel]. It sums over
/// the batch, so unlike the other rules its result has no sample dim.
Shape convWeightGradShape(const ConvParams &p, const Shape &x, const Shape &grad,
                          const std::vector<int64_t> &kernel);

// ---- pooling ---------------------------------------------------------------

enum class PoolKind { Max, Avg };
/// max_pool{1,2,3}d / avg_pool{1,2,3}d as torch: x [N, C, *spatial] or
/// [C, *spatial]; output size floor or ceil ((in + 2p - d(k-1) - 1) / s) + 1,
/// with torch's rule that the last window must start inside the input or
/// left padding when ceil_mode. Padding is at most half the kernel. An empty
/// stride means stride = kernel (torch's default), an empty dilation all 1.
struct PoolParams {
  PoolKind kind = PoolKind::Max;
  int spatialDims = 2;
  std::vector<int64_t> kernel, stride, padding, dilation;  // dilation: max only
  bool ceilMode = false;
  bool countIncludePad = true;   // avg only
  int64_t divisorOverride = 0;   // avg only; 0 = none
};
Shape poolShape(const PoolParams &p, const Shape &x);
/// max_pool_backward(x, grad): x's shape, grad being max_pool(x)'s (an
/// error naming both otherwise). Each window's gradient is added to the
/// first position holding its maximum (the last NaN, where one is), in
/// output order per (sample, channel): torch's CPU max_pool backward.
Shape maxPoolBackwardShape(const PoolParams &p, const Shape &x, const Shape &grad);

/// adaptive_{avg,max}_pool{1,2,3}d: x [N, C, *spatial] or [C, *spatial] to
/// `outputSize` (spatialDims entries); window i covers
/// [floor(i*in/out), ceil((i+1)*in/out)).
Shape adaptivePoolShape(PoolKind kind, const std::vector<int64_t> &outputSize, const Shape &x);

// ---- normalization over channels ---------------------------------------------

/// batch_norm in eval mode: y = (x - mean[c]) / sqrt(var[c] + eps) * w[c] + b[c]
/// over x [N, C, *]; mean, var [C]; w, b [C] optional. Returns x's shape.
Shape batchNormShape(const Shape &x, const Shape &mean, const Shape &var, const Shape *w,
                     const Shape *b);
/// group_norm: x [N, C, *] in `groups` groups of C/groups channels, statistics
/// per (sample, group) in double (biased variance), affine w, b [C] optional.
Shape groupNormShape(const Shape &x, int64_t groups, const Shape *w, const Shape *b);

// ---- reductions --------------------------------------------------------------

enum class ReduceKind { Sum, Mean, Amax, Amin, Var, Argmax, Argmin };
/// Reduce x over `dims` (each in [-rank, rank), no repeats; empty = all dims,
/// as torch's sum() with no dim). keepdim keeps them as size 1. Var uses
/// `correction` (torch's var(correction=)). Argmax/Argmin take exactly one
/// dim (or none: the flattened tensor) and give int64; the others give x's
/// dtype. Sum/Mean accumulate in double; Amax/Amin propagate NaN as torch.
Shape reduceShape(ReduceKind kind, const Shape &x, const std::vector<int64_t> &dims,
                  bool keepdim);
/// "sum", "mean", ...: the op's name in errors.
const char *reduceKindName(ReduceKind kind);

// ---- elementwise with scalar parameters ---------------------------------------

/// Unary elementwise ops beyond Activation, same shape and dtype in and out.
/// a, b are the op's scalar parameters where it has them:
///   Sigmoid, Tanh, Exp, Log, Sqrt, Rsqrt, Neg, Abs, Erf, Sin, Cos,
///   Reciprocal, Hardswish (x*relu6(x+3)/6), Hardsigmoid (relu6(x+3)/6),
///   Mish (x*tanh(softplus(x))), Clamp (min a, max b; NaN passes through, a
///   bound given as +-inf is absent), LeakyRelu (slope a), Elu (alpha a,
///   input scale b: celu), PowScalar (x^a), Softplus (beta a, threshold b).
enum class UnaryOp {
  Sigmoid, Tanh, Exp, Log, Sqrt, Rsqrt, Neg, Abs, Erf, Sin, Cos, Reciprocal,
  Hardswish, Hardsigmoid, Mish, Clamp, LeakyRelu, Elu, PowScalar, Softplus,
};
const char *unaryOpName(UnaryOp op);

// ---- views and copies ------------------------------------------------------------

/// as_strided: y [size] with y[i] = x_flat[offset + sum_k i_k stride[k]]
/// (torch's as_strided on a contiguous x). One stride per size entry, sizes
/// >= 0, strides of any sign; every element read lies inside x. Returns size.
Shape asStridedShape(const Shape &x, const std::vector<int64_t> &size,
                     const std::vector<int64_t> &stride, int64_t offset);

// ---- indexing by values and by computed indices --------------------------------

/// TopK: the int64 indices of the k largest (or smallest) values of x along
/// `dim`, in order (largest first; smallest first when !largest); NaN counts
/// as larger than every number, and among equal values the kernel picks the
/// index torch.topk's CPU kernel picks (the same selection algorithm; the CPU
/// kernel's comment). y is x's shape with dim's size k (0 <= k <= size).
/// Gather: torch.gather: y[i] = x[i with i_dim replaced by index[i]], index
/// int64 of x's rank, index.size(d) <= x.size(d) for d != dim; y has
/// index's shape and x's dtype. An index outside [-size, size) of x's dim
/// is an error naming it (the kernel's check: values are data).
/// Together they are torch.topk's (values, indices): the values are
/// gather(x, dim, topk(x)), bit for bit.
/// EmbeddingBackward: torch's embedding_dense_backward (the gradient of an
/// embedding table, also of any gather of whole rows): src [M, D], index
/// int64 [M] -> y [rows, D], y[v] = the sum of src[m] over the m with
/// index[m] == v (none: 0), in order of m, accumulated in double and
/// rounded once; the row `padding_idx` (-1: none) stays 0. An index outside
/// [0, rows) is an error naming it. With a third operand acc [rows, D] of
/// src's dtype, y = acc + those sums, bit for bit `add` of acc and the
/// two-operand result (each sum rounded to the dtype, then added in float,
/// double for float64, and rounded once; a row with no reads adds +0): a
/// tied table's two gradients summed without a second [rows, D] tensor
/// (acc may be y's own buffer).
/// CrossEntropyBackward: logits x [N, C], target int64 [N] -> y [N, C] of
/// x's dtype: row n is softmax(x[n]) (the softmax op's values) with one
/// subtracted at target[n] (in float, rounded once, as `sub` of the softmax
/// and a one-hot; float32, bfloat16, float16 as softmax), or zeros where
/// target[n] == ignoreIndex: the gradient of the sum over counted rows of
/// -log softmax(x[n])[target[n]], without a [N, C] one-hot. A target
/// outside [0, C) other than ignoreIndex is an error naming it.
enum class IndexKind { TopK, Gather, EmbeddingBackward, CrossEntropyBackward };
struct IndexParams {
  int64_t dim = -1;      // as given: [-rank, rank)
  int64_t k = 0;         // TopK only
  bool largest = true;   // TopK only
  int64_t rows = 0;         // EmbeddingBackward only
  int64_t paddingIdx = -1;  // EmbeddingBackward only
  int64_t ignoreIndex = -100;  // CrossEntropyBackward only
};
Shape topkShape(const Shape &x, const IndexParams &p);
Shape gatherShape(const Shape &x, const Shape &index, const IndexParams &p);
Shape embeddingBackwardShape(const Shape &src, const Shape &index, const IndexParams &p,
                             const Shape *acc = nullptr);
Shape crossEntropyBackwardShape(const Shape &x, const Shape &target);
/// dim in [-rank, rank) (a 0-d tensor takes 0 or -1) as a position; fails naming op.
int64_t wrapDim(const char *op, int64_t dim, size_t rank);

// ---- integer values, comparisons and dtype conversion ---------------------------

/// The graph's integers are int64 (token ids, position ids, masks): torch's
/// bool and narrower integer values are carried as int64 holding the same
/// values (docs/ops.md, "Integer values").
///
/// Compare: y = (a OP b) as int64 1 or 0, a and b one dtype (float or
/// int64) broadcast as numpy; or (a OP value) with the scalar `value`
/// rounded to a's dtype first, as torch wraps a Python number. NaN compares
/// unequal to everything. An int64 operand against a value that is not an
/// integer compares both in float32 (torch's promotion to its default dtype).
enum class CompareOp { Eq, Ne, Lt, Le, Gt, Ge };
const char *compareOpName(CompareOp op);
/// b == nullptr: the scalar form (the shape is a's).
Shape compareShape(CompareOp op, const Shape &a, const Shape *b);

/// Cast: y = x converted to `dtype`, torch's rules: float to float rounds
/// to nearest even (float64 to a 16-bit float through float32, as c10's
/// conversions), float to int64 truncates toward zero (NaN and values
/// outside int64's range give INT64_MIN, what torch's x86 kernel gives),
/// int64 to float rounds to nearest (to a 16-bit float through float32).
/// Any of float32, float64, bfloat16, float16, int64 to any.
struct CastParams {
  plan::DType dtype = plan::DType::F32;
};
/// The `dtype` attribute's name to its dtype; fails naming the known names.
plan::DType castDTypeNamed(const std::string &name);

/// Where: y = cond ? a : b elementwise, cond int64 (nonzero is true), a and
/// b one dtype (any), the three broadcast as numpy; y has a's dtype. The
/// elements are copied, so the result is exact for every dtype.
Shape whereShape(const Shape &cond, const Shape &a, const Shape &b);

/// Cumsum: the running sum along `dim`, x's shape and dtype: int64 exact
/// (wrapping as torch), float32 and float64 accumulated in double, 16-bit
/// floats in float (torch's CPU accumulation types), each result rounded to
/// the dtype once.
struct ScanParams {
  int64_t dim = 0;       // as given: [-rank, rank)
  bool reverse = false;  // sum from the line's end: y[i] = x[i] + ... + x[n-1]
};
Shape cumsumShape(const Shape &x, const ScanParams &p);

// ---- random masks ------------------------------------------------------------

/// Dropout (torch's training-mode F.dropout): y = x / (1 - p) where the
/// element is kept, else 0, the keep mask runtime/DropoutMask.h's (a pure
/// function of the run's seed, `stream`, the step counter and the element's
/// index); 16-bit x computed in float and rounded once, float64 in double.
struct DropoutParams {
  double p = 0.5;
  uint32_t stream = 0;
  // data-parallel: the global batch's rows and one row's elements of x; a
  // rank's elements start at its first row (runtime/DataParallel.h's
  // batchSlice) times rowElements. 0: x is the whole batch.
  int64_t globalRows = 0;
  int64_t rowElements = 0;
  // gradient accumulation: the micro-batch's first row within the rank's
  // rows (compiler/GradientAccumulation.h), added to the rank's first row.
  int64_t rowOffset = 0;
};
/// x float, step a 0-d float32 counter, 0 <= p <= 1; the result is x's shape.
Shape dropoutShape(const Shape &x, const Shape &step, const DropoutParams &p);

// ---- sampling at computed positions ---------------------------------------------

/// grid_sample: torch's F.grid_sample on 4-d tensors (aten.grid_sampler_2d).
/// x [N, C, H, W], grid [N, Ho, Wo, 2] of x's float dtype holding (x, y)
/// positions normalized to [-1, 1] (align_corners: -1 and 1 are the corner
/// pixels' centres; else their outer edges); y [N, C, Ho, Wo]. Bilinear
/// mixes the 4 neighbours, nearest takes the one at the rounded position
/// (half to even); zeros padding reads 0 outside x, border clamps the
/// position into x, reflection mirrors it at the edges (then clamps).
/// Computed in float (double for float64) with torch's CPU kernel's
/// formulas and order of operations.
enum class SampleMode { Bilinear, Nearest };
enum class SamplePadding { Zeros, Border, Reflection };
struct SampleParams {
  SampleMode mode = SampleMode::Bilinear;
  SamplePadding padding = SamplePadding::Zeros;
  bool alignCorners = false;
};
Shape gridSampleShape(const Shape &x, const Shape &grid);
/// grid_sample_backward: given grad [N, C, Ho, Wo], the gradient of
/// grid_sample(x, grid) with respect to x (`wrt` "input", x's shape) or to
/// the grid (`wrt` "grid", the grid's shape): torch's
/// grid_sampler_2d_backward.
enum class SampleGrad { Input, Grid };
Shape gridSampleBackwardShape(const Shape &x, const Shape &grid, const Shape &grad, SampleGrad wrt);

// ---- a mixture of experts' experts -----------------------------------------------

/// moe_experts: x [T, H], index [T, k] int64 (each token's experts, in
/// [0, E)), weights [T, k], gateUp [E, 2I, H], down [E, H, I]; x, weights
/// and the experts one float dtype. Token t's row of y [T, H] is
///   sum over its slots s, experts in ascending order, of
///   weights[t, s] * down[e] (act(gate) * up),  [gate; up] = gateUp[e] x[t]
/// (Hugging Face's experts: the gate is the first I rows; act is
/// `activation`: silu, gelu, gelu_tanh or relu). Experts' GEMMs as linear's
/// (runtime/cpu/Gemm.h), so a token's bits depend only on its own row and
/// routing, never on the other tokens or the thread count. An index outside
/// [0, E) fails when the kernel runs, naming it.
enum class GateActivation { Silu, Gelu, GeluTanh, Relu };
/// The experts family's ops (the op table's variant): moe_experts, and its
/// gradient with respect to one operand (training, docs/training.md).
enum class ExpertsKind { Forward, Backward, Hidden, GatedGrad };
/// moe_experts_backward's `wrt`: the operand whose gradient it writes.
enum class MoeOperand { X, Weights, GateUp, Down };
struct MoeParams {
  GateActivation activation = GateActivation::Silu;
  MoeOperand wrt = MoeOperand::X;  // moe_experts_backward only
};
/// "silu" -> Silu ...; fails naming the known names.
GateActivation gateActivationNamed(const std::string &name);
/// "x", "weights", "gate_up", "down"; fails naming them.
MoeOperand moeOperandNamed(const std::string &name);
Shape moeExpertsShape(const Shape &x, const Shape &index, const Shape &weights,
                      const Shape &gateUp, const Shape &down);
/// moe_experts_backward(x, index, weights, gate_up, down, grad): the
/// gradient of moe_experts(x, index, weights, gate_up, down) with respect
/// to operand `wrt`, given grad [T, H], the gradient of its output: the
/// forward's operands checked by moeExpertsShape, grad of x's shape; the
/// result has the shape of operand `wrt`. With a = act(gate) * up and
/// da' = grad[t] down[e] (the gradient at a before the slot's weight w):
///   weights: dw[t, s] = sum_i da'[i] a[i]
///   down:    d down[e] = sum over e's rows of (w grad[t]) a^T
///   gate_up: d gate_up[e] = sum over e's rows of [dgate; dup] x[t]^T,
///            da = w da', dgate = da up act'(gate), dup = da act(gate)
///   x:       dx[t] = sum over t's slots, experts ascending, of
///            gate_up[e]^T [dgate; dup]
/// The forward's GEMMs are recomputed per block of rows (nothing is saved
/// between forward and backward); the sums over rows of a weight gradient
/// are one fma chain per element in token order (runtime/cpu/Gemm.h), the
/// same bits whatever the block size or thread count.
/// `hidden` (optional: nullptr) is moe_experts_hidden's [T, k, 2I] and
/// `gatedGrad` (optional, only with hidden) moe_experts_gated_grad's
/// [T, k, I]: the backward then reads each routed row's [gate; up] and da'
/// instead of recomputing them (a GEMM each, per operand).
Shape moeExpertsBackwardShape(MoeOperand wrt, const Shape &x, const Shape &index,
                              const Shape &weights, const Shape &gateUp, const Shape &down,
                              const Shape &grad, const Shape *hidden = nullptr,
                              const Shape *gatedGrad = nullptr);
/// moe_experts_hidden(x, index, gate_up) -> [T, k, 2I]: row (t, s) is
/// [gate; up] = gate_up[index[t, s]] x[t], the forward's first GEMM per
/// routed row (the same bits), for the backward ops of one moe_experts to
/// share.
Shape moeExpertsHiddenShape(const Shape &x, const Shape &index, const Shape &gateUp);
/// moe_experts_gated_grad(grad, index, down) -> [T, k, I]: row (t, s) is
/// da' = grad[t] down[index[t, s]], the gradient at the routed row's gated
/// activation act(gate) * up before the slot's weight (one GEMM per block of
/// an expert's rows, the bits moe_experts_backward computes it with), for
/// the backward ops of one moe_experts to share.
Shape moeExpertsGatedGradShape(const Shape &grad, const Shape &index, const Shape &down);
/// Rows of one expert's GEMM block: the kernel's working memory holds this
/// many rows (fewer when the batch has fewer routed rows).
inline constexpr int64_t kMoeBlockRows = 256;
/// The kernel's working memory (the op table's workspace): one block of
/// rows' input, gate/up and output in float, plus a float accumulator of y
/// when y is not float32.
int64_t moeExpertsWorkBytes(int64_t tokens, int64_t k, int64_t hidden, int64_t inner,
                            plan::DType dtype);
/// moe_experts_backward's working memory: one block of rows' input, output
/// gradient, x's gradient rows, gate/up, activation, da' and gate/up
/// gradient in float ((3 H + 6 I) floats a row, and 2 I for one row's
/// activation slopes), plus a float accumulator of the result unless it is
/// float32 (x: [T, H]; gate_up and down: one expert's [2I, H] or [H, I];
/// weights: none, each element is one dot product).
int64_t moeExpertsBackwardWorkBytes(MoeOperand wrt, int64_t tokens, int64_t k, int64_t hidden,
                                    int64_t inner, plan::DType dtype);
/// moe_experts_hidden's working memory: one block of rows' input and
/// [gate; up] in float ((H + 2I) floats a row).
int64_t moeExpertsHiddenWorkBytes(int64_t tokens, int64_t k, int64_t hidden, int64_t inner);
/// moe_experts_gated_grad's working memory: one block of rows' output
/// gradient and da' in float ((H + I) floats a row).
int64_t moeExpertsGatedGradWorkBytes(int64_t tokens, int64_t k, int64_t hidden, int64_t inner);

// ---- a language model's head and loss, fused ------------------------------------

/// linear_cross_entropy(x [N, H], target [N] int64, weight [V, H]) -> a 0-d
/// loss: cross_entropy(linear(x, weight), target), the mean over targets
/// other than `ignore_index` (default -100), without the [N, V] logits: they
/// are made kLossHeadRows rows at a time (the op table's workspace). The
/// same bits as linear then cross_entropy: a row's logits do not depend on
/// the rows sharing its GEMM (runtime/cpu/Gemm.h) and the loss sums the
/// rows in order, as cross_entropy's kernel does.
/// linear_cross_entropy_backward(x, target, weight, scale [N, 1]): the
/// gradient of that loss's sum over rows, row n scaled by scale[n] (the
/// `cross_entropy` gradient rule's share of the mean), with respect to x
/// (`wrt` "input": [N, H]) or weight (`wrt` "weight": [V, H]): the bits of
/// cross_entropy_backward, mul by scale, then linear's two gradient GEMMs,
/// with the logits recomputed per block of rows (and, for a 16-bit weight
/// gradient, per block of vocabulary columns, so that no float [V, H]
/// accumulator is held). x and weight one float dtype; `logits_dtype`
/// (default: x's) is the dtype the logits are cast to before the loss (a
/// bfloat16 model's logits.float(), as Hugging Face's loss does): the
/// loss's and scale's dtype, the logits' gradient made in it and cast back.
enum class LossHeadKind { Forward, Backward };
/// linear_cross_entropy_backward's `wrt`.
enum class LossHeadOperand { Input, Weight };
struct LossHeadParams {
  int64_t ignoreIndex = -100;
  LossHeadOperand wrt = LossHeadOperand::Input;  // backward only
  std::optional<plan::DType> logitsDtype;        // absent: x's dtype
};
Shape linearCrossEntropyShape(const Shape &x, const Shape &target, const Shape &weight);
Shape linearCrossEntropyBackwardShape(LossHeadOperand wrt, const Shape &x, const Shape &target,
                                      const Shape &weight, const Shape &scale);
/// Rows of logits made at once; a multiple of the GEMM's k group (a weight
/// gradient summed block of rows by block of rows keeps one call's bits).
inline constexpr int64_t kLossHeadRows = 256;
/// Vocabulary columns per block of a 16-bit weight gradient.
inline constexpr int64_t kLossHeadColumns = 1024;
/// The kernels' working memory (the op table's workspace): one block of
/// rows' logits in float, and for a weight gradient of a 16-bit x (`dtype`)
/// each row's softmax statistics (a float and a double), one block of
/// logits in float and a float accumulator of a block of columns.
int64_t linearCrossEntropyWorkBytes(LossHeadKind kind, LossHeadOperand wrt, int64_t tokens,
                                    int64_t vocab, int64_t hidden, plan::DType dtype);

// ---- attention's gradient, blockwise ---------------------------------------------

/// sdpa_backward(q [B, H, T, E], k [B, Hkv, S, E], v [B, Hkv, S, Ev], g [B, H,
/// T, Ev][, mask]): the gradient of scaled_dot_product_attention(q, k, v
/// [, mask]) (`causal`, `scale`; the mask additive, of q's dtype, 4-d, each
/// dim 1 or the scores' [B, H, T, S], as sdpa's) with respect to q, k or v
/// (`wrt`), given g, the gradient of its output: the bits of the graph ops
/// the attention gradient
/// rule otherwise emits (compiler/AttentionGradients.cpp: scores, softmax,
/// the probabilities' and scores' gradients, their GEMMs, and for grouped
/// query heads the sums over each key / value head's readers), made
/// kAttentionRows query rows at a time, so that no [B, H, T, S] tensor is
/// held: a k or v gradient sums the blocks' GEMMs along k at multiples of
/// 256 into a float accumulator, one call's bits (runtime/cpu/Gemm.h).
enum class AttentionKind { Backward };
/// sdpa_backward's `wrt`.
enum class AttentionOperand { Q, K, V };
struct AttentionGradParams {
  AttentionOperand wrt = AttentionOperand::Q;
  bool causal = false;
  double scale = 1.0;
};
Shape sdpaBackwardShape(AttentionOperand wrt, const Shape &q, const Shape &k, const Shape &v,
                        const Shape &g, const Shape *mask = nullptr);
/// Query rows per block; a multiple of the GEMM's k group.
inline constexpr int64_t kAttentionRows = 256;
/// The kernel's working memory (the op table's workspace): one block's
/// probabilities, their gradient and its product with them ([rows, S] of
/// the dtype each) and its row sums, and for a k or v gradient a float
/// accumulator of one head's [S, E] and, with grouped query heads, its
/// readers' gradients [H / Hkv, S, E] in the dtype.
int64_t sdpaBackwardWorkBytes(AttentionOperand wrt, int64_t heads, int64_t kvHeads, int64_t queries,
                              int64_t keys, int64_t headDim, plan::DType dtype);

}  // namespace shardc::runtime
