#include "runtime/ForwardChecks.h"
#include "runtime/AttentionShapes.h"

#include "runtime/RuntimeError.h"

#include <initializer_list>
#include <utility>

namespace shardc::runtime::checks {
using plan::DType;

void fail(const char *op, const std::string &reason) {
  throw RuntimeError(std::string(op) + ": " + reason);
}

bool isFloatStorage(DType d) { return d == DType::F32 || d == DType::BF16 || d == DType::F16; }

void expectFloat(const char *op, const char *what, const KTensor &t) {
  if (!isFloatStorage(t.dtype))
    fail(op, std::string(what) + " is " + plan::dtypeName(t.dtype) +
                 " (float32, bfloat16 and float16 are supported)");
}
void expectDType(const char *op, const char *what, const KTensor &t, DType dtype) {
  if (t.dtype != dtype)
    fail(op, std::string(what) + " is " + plan::dtypeName(t.dtype) + ", expected " +
                 plan::dtypeName(dtype));
}
void expectShape(const char *op, const char *what, const KTensor &t, const Shape &shape) {
  if (t.shape != shape)
    fail(op, std::string(what) + " has shape " + shapeToString(t.shape) + ", expected " +
                 shapeToString(shape));
}

void embedding(const KTensor &weight, const KTensor &ids, const KTensor &out) {
  const char *op = "embedding";
  if (weight.shape.size() != 2)
    fail(op, "weight must be 2-d [V, D], got " + shapeToString(weight.shape));
  expectDType(op, "ids", ids, DType::I64);
  expectDType(op, "output", out, weight.dtype);
  Shape expected = ids.shape;
  expected.push_back(weight.shape[1]);
  expectShape(op, "output", out, expected);
}

LinearDims linear(const KTensor &x, const KTensor &w, const KTensor *b, const KTensor &y) {
  const char *op = "linear";
  expectFloat(op, "x", x);
  expectDType(op, "weight", w, x.dtype);
  expectDType(op, "output", y, x.dtype);
  if (x.shape.empty()) fail(op, "x must have at least 1 dimension");
  if (w.shape.size() != 2) fail(op, "weight must be 2-d [N, K], got " + shapeToString(w.shape));
  const int64_t K = x.shape.back(), N = w.shape[0];
  if (w.shape[1] != K)
    fail(op, "x " + shapeToString(x.shape) + " and weight " + shapeToString(w.shape) +
                 " disagree on K");
  if (b) {
    expectDType(op, "bias", *b, x.dtype);
    expectShape(op, "bias", *b, {N});
  }
  Shape expected = x.shape;
  expected.back() = N;
  expectShape(op, "output", y, expected);
  return {plan::numElements(Shape(x.shape.begin(), x.shape.end() - 1)), N, K};
}

MatmulDims matmul(const KTensor &a, const KTensor &b, const KTensor &c, MatmulLayout layout) {
  const char *op = "matmul";
  expectFloat(op, "a", a);
  expectDType(op, "b", b, a.dtype);
  expectDType(op, "output", c, a.dtype);
  if (a.shape.size() < 2 || b.shape.size() < 2)
    fail(op, "operands must have rank >= 2, got " + shapeToString(a.shape) + " and " +
                 shapeToString(b.shape));
  // The stored last two dims: [M, K] and [K, N], each swapped when transposed.
  const int64_t a0 = a.shape[a.shape.size() - 2], a1 = a.shape.back();
  const int64_t b0 = b.shape[b.shape.size() - 2], b1 = b.shape.back();
  const int64_t M = layout.transposeA ? a1 : a0, K = layout.transposeA ? a0 : a1;
  const int64_t N = layout.transposeB ? b0 : b1;
  if ((layout.transposeB ? b1 : b0) != K)
    fail(op, std::string("a ") + (layout.transposeA ? "(transposed) " : "") +
                 shapeToString(a.shape) + " and b " + (layout.transposeB ? "(transposed) " : "") +
                 shapeToString(b.shape) + " disagree on K");
  const Shape aBatch(a.shape.begin(), a.shape.end() - 2), bBatch(b.shape.begin(), b.shape.end() - 2);
  auto batch = broadcastShapes(aBatch, bBatch);
  if (!batch)
    fail(op, "batch dims " + shapeToString(aBatch) + " and " + shapeToString(bBatch) +
                 " do not broadcast");
  Shape expected = *batch;
  expected.push_back(M);
  expected.push_back(N);
  expectShape(op, "output", c, expected);
  return {*batch, aBatch, bBatch, M, N, K};
}

void binary(BinaryOp op, const KTensor &a, const KTensor &b, const KTensor &out) {
  const char *name = binaryOpName(op);
  if (a.dtype != out.dtype || b.dtype != out.dtype)
    fail(name, std::string("dtypes differ: ") + plan::dtypeName(a.dtype) + ", " +
                   plan::dtypeName(b.dtype) + " -> " + plan::dtypeName(out.dtype));
  auto expected = broadcastShapes(a.shape, b.shape);
  if (!expected)
    fail(name, "shapes " + shapeToString(a.shape) + " and " + shapeToString(b.shape) +
                   " do not broadcast");
  if (*expected != out.shape)
    fail(name, "output shape " + shapeToString(out.shape) + " is not the broadcast shape " +
                   shapeToString(*expected));
  if (out.dtype == DType::I64 && op == BinaryOp::Div)
    fail(name, "int64 operands are not supported (torch's division of integers gives floats: "
               "cast them first)");
  if (out.dtype != DType::F32 && out.dtype != DType::F64 && out.dtype != DType::BF16 &&
      out.dtype != DType::I64)
    fail(name, std::string("dtype ") + plan::dtypeName(out.dtype) +
                   " is not supported (float32, float64, bfloat16 and int64 are)");
}

void activation(const KTensor &x, const KTensor &y) {
  const char *op = "activation";
  expectFloat(op, "x", x);
  expectDType(op, "output", y, x.dtype);
  expectShape(op, "output", y, x.shape);
}

NormDims norm(const char *op, const KTensor &x, const KTensor *weight, const KTensor *bias,
              const KTensor &y) {
  expectFloat(op, "x", x);
  expectDType(op, "output", y, x.dtype);
  expectShape(op, "output", y, x.shape);
  if (x.shape.empty()) fail(op, "x must have at least 1 dimension");
  const int64_t D = x.shape.back();
  for (const KTensor *p : {weight, bias})
    if (p) {
      expectDType(op, p == weight ? "weight" : "bias", *p, x.dtype);
      expectShape(op, p == weight ? "weight" : "bias", *p, {D});
    }
  return {D == 0 ? 0 : x.numel() / D, D};
}

void softmax(const KTensor &x, int64_t dim, const KTensor &y) {
  const char *op = "softmax";
  expectFloat(op, "x", x);
  expectDType(op, "output", y, x.dtype);
  expectShape(op, "output", y, x.shape);
  if (dim < 0 || dim >= static_cast<int64_t>(x.shape.size()))
    fail(op, "dim " + std::to_string(dim) + " out of range for shape " + shapeToString(x.shape));
}

SdpaDims sdpa(const KTensor &q, const KTensor &k, const KTensor &v, const KTensor *mask,
              const KTensor &o) {
  const char *op = "sdpa";
  expectFloat(op, "q", q);
  expectDType(op, "k", k, q.dtype);
  expectDType(op, "v", v, q.dtype);
  expectDType(op, "output", o, q.dtype);
  for (const KTensor *t : {&q, &k, &v})
    if (t->shape.size() != 4)
      fail(op, "q, k and v must be 4-d [B, H, T|S, D], got " + shapeToString(t->shape));
  if (!attentionShapesFit(q.shape, k.shape, v.shape))
    fail(op, "q " + shapeToString(q.shape) + ", k " + shapeToString(k.shape) + ", v " +
                 shapeToString(v.shape) +
                 " do not fit [B, H, T, D], [B, Hkv, S, D], [B, Hkv, S, Dv] with H a "
                 "multiple of Hkv");
  const int64_t B = q.shape[0], H = q.shape[1], T = q.shape[2], D = q.shape[3];
  const int64_t Hkv = k.shape[1], S = k.shape[2], Dv = v.shape[3];
  expectShape(op, "output", o, {B, H, T, Dv});
  SdpaDims dims{B, H, Hkv, T, S, D, Dv};
  if (mask) {
    expectDType(op, "mask", *mask, q.dtype);
    const Shape scores{B, H, T, S};
    if (!attentionMaskFits(mask->shape, scores))
      fail(op, "mask " + shapeToString(mask->shape) + " does not broadcast to the scores " +
                   shapeToString(scores) + " (4-d, each dim 1 or the scores')");
    int64_t stride = 1;
    for (int i = 3; i >= 0; --i) {
      dims.maskStride[i] = mask->shape[i] == 1 ? 0 : stride;
      stride *= mask->shape[i];
    }
  }
  return dims;
}

void rope(const KTensor &x, double theta, const KTensor &y) {
  const char *op = "rope";
  expectFloat(op, "x", x);
  expectDType(op, "output", y, x.dtype);
  expectShape(op, "output", y, x.shape);
  if (x.shape.size() != 4) fail(op, "x must be 4-d [B, H, T, D], got " + shapeToString(x.shape));
  if (x.shape[3] % 2 != 0) fail(op, "head dim D = " + std::to_string(x.shape[3]) + " must be even");
  if (!(theta > 0)) fail(op, "theta must be > 0");
}

void stridedCopy(const KTensor &x, const std::vector<int64_t> &strides, int64_t offset,
                 const KTensor &y) {
  const char *op = "strided_copy";
  expectDType(op, "output", y, x.dtype);
  const size_t rank = y.shape.size();
  if (strides.size() != rank)
    fail(op, "strides has " + std::to_string(strides.size()) + " entries, the output " +
                 shapeToString(y.shape) + " has rank " + std::to_string(rank));
  if (y.numel() == 0) return;
  // Lowest and highest element read, in 128 bits (no overflow).
  __int128 lo = offset, hi = offset;
  for (size_t d = 0; d < rank; ++d) {
    const __int128 span = static_cast<__int128>(y.shape[d] - 1) * strides[d];
    (span < 0 ? lo : hi) += span;
  }
  if (lo < 0 || hi >= x.numel())
    fail(op, "offset " + std::to_string(offset) + " and strides " + shapeToString(strides) +
                 " read outside the input's " + std::to_string(x.numel()) + " elements");
}

void cat(const std::vector<KTensor> &inputs, int64_t dim, const KTensor &y) {
  const char *op = "cat";
  if (inputs.empty()) fail(op, "needs at least one input");
  const size_t rank = y.shape.size();
  if (dim < 0 || dim >= static_cast<int64_t>(rank))
    fail(op, "dim " + std::to_string(dim) + " out of range for output " + shapeToString(y.shape));
  int64_t total = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const KTensor &t = inputs[i];
    expectDType(op, ("input " + std::to_string(i)).c_str(), t, y.dtype);
    bool ok = t.shape.size() == rank;
    for (size_t d = 0; ok && d < rank; ++d)
      ok = static_cast<int64_t>(d) == dim || t.shape[d] == y.shape[d];
    if (!ok)
      fail(op, "input " + std::to_string(i) + " " + shapeToString(t.shape) +
                   " does not match the output " + shapeToString(y.shape) +
                   " outside dim " + std::to_string(dim));
    total += t.shape[dim];
  }
  if (total != y.shape[dim])
    fail(op, "inputs add up to " + std::to_string(total) + " along dim " + std::to_string(dim) +
                 ", the output has " + std::to_string(y.shape[dim]));
}

void crossEntropy(const KTensor &logits, const KTensor &targets, const KTensor &loss) {
  const char *op = "cross_entropy";
  expectFloat(op, "logits", logits);
  if (logits.shape.size() != 2)
    fail(op, "logits must be 2-d [N, C], got " + shapeToString(logits.shape));
  expectDType(op, "targets", targets, DType::I64);
  expectShape(op, "targets", targets, {logits.shape[0]});
  if (loss.dtype != DType::F32 && loss.dtype != logits.dtype)
    fail(op, std::string("loss is ") + plan::dtypeName(loss.dtype) +
                 ", expected float32 or the logits' dtype");
  expectShape(op, "loss", loss, {});
}

namespace {
void expectFloatParam(const char *op, const char *what, const KTensor *t) {
  if (t) expectFloat(op, what, *t);
}
}  // namespace

void conv(const ConvParams &p, const KTensor &x, const KTensor &w, const KTensor *b,
          const KTensor &y) {
  const char *op = p.transposed ? "conv_transpose" : "convolution";
  expectFloat(op, "x", x);
  expectDType(op, "weight", w, x.dtype);
  if (b) expectDType(op, "bias", *b, x.dtype);
  expectDType(op, "output", y, x.dtype);
  expectShape(op, "output", y, convShape(p, x.shape, w.shape, b ? &b->shape : nullptr));
}

void convWeightGrad(const ConvParams &p, const KTensor &x, const KTensor &grad,
                    const std::vector<int64_t> &kernel, const KTensor &dw) {
  const char *op = "conv_weight_grad";
  expectFloat(op, "x", x);
  expectDType(op, "gradient", grad, x.dtype);
  expectDType(op, "output", dw, x.dtype);
  expectShape(op, "output", dw, convWeightGradShape(p, x.shape, grad.shape, kernel));
}

void batchNorm(const KTensor &x, const KTensor &mean, const KTensor &var, const KTensor *w,
               const KTensor *b, const KTensor &y) {
  const char *op = "batch_norm";
  expectFloat(op, "x", x);
  expectDType(op, "output", y, x.dtype);
  expectFloatParam(op, "running_mean", &mean);
  expectFloatParam(op, "running_var", &var);
  expectFloatParam(op, "weight", w);
  expectFloatParam(op, "bias", b);
  expectShape(op, "output", y,
              batchNormShape(x.shape, mean.shape, var.shape, w ? &w->shape : nullptr,
                             b ? &b->shape : nullptr));
}

void groupNorm(const KTensor &x, int64_t groups, const KTensor *w, const KTensor *b,
               const KTensor &y) {
  const char *op = "group_norm";
  expectFloat(op, "x", x);
  expectDType(op, "output", y, x.dtype);
  expectFloatParam(op, "weight", w);
  expectFloatParam(op, "bias", b);
  expectShape(op, "output", y,
              groupNormShape(x.shape, groups, w ? &w->shape : nullptr, b ? &b->shape : nullptr));
}

void reduce(ReduceKind kind, const KTensor &x, const std::vector<int64_t> &dims,
            const KTensor &y) {
  const char *op = reduceKindName(kind);
  if (x.dtype != plan::DType::F64) expectFloat(op, "x", x);
  const bool arg = kind == ReduceKind::Argmax || kind == ReduceKind::Argmin;
  expectDType(op, "output", y, arg ? plan::DType::I64 : x.dtype);
  const Shape dropped = reduceShape(kind, x.shape, dims, false);
  const Shape kept = reduceShape(kind, x.shape, dims, true);
  if (y.shape != dropped && y.shape != kept)
    fail(op, "output has shape " + shapeToString(y.shape) + ", expected " +
                 shapeToString(dropped) + " or, with keepdim, " + shapeToString(kept));
}

namespace {
void expectResult(const char *op, const KTensor &y, const Shape &shape, DType dtype) {
  if (y.shape != shape || y.dtype != dtype)
    fail(op, "output is " + std::string(plan::dtypeName(y.dtype)) + " " + shapeToString(y.shape) +
                 ", expected " + plan::dtypeName(dtype) + " " + shapeToString(shape));
}
}  // namespace

void topk(const IndexParams &p, const KTensor &x, const KTensor &y) {
  expectResult("topk", y, topkShape(x.shape, p), DType::I64);
}

void embeddingBackward(const IndexParams &p, const KTensor &src, const KTensor &index,
                       const KTensor *acc, const KTensor &y) {
  if (embeddingBackwardShape(src.shape, index.shape, p, acc ? &acc->shape : nullptr) != y.shape ||
      y.dtype != src.dtype || index.dtype != DType::I64 || (acc && acc->dtype != y.dtype))
    fail("embedding_backward", "operands do not fit: src " + shapeToString(src.shape) + ", index " +
                                   shapeToString(index.shape) +
                                   (acc ? ", acc " + shapeToString(acc->shape) : "") + ", y " +
                                   shapeToString(y.shape));
}

void crossEntropyBackward(const KTensor &x, const KTensor &target, const KTensor &y) {
  if (crossEntropyBackwardShape(x.shape, target.shape) != y.shape || y.dtype != x.dtype ||
      target.dtype != DType::I64)
    fail("cross_entropy_backward", "operands do not fit: logits " + shapeToString(x.shape) +
                                       ", target " + shapeToString(target.shape) + ", y " +
                                       shapeToString(y.shape));
}

void crossEntropyTargets(const IndexParams &p, const int64_t *targets, int64_t count,
                         int64_t classes) {
  for (int64_t n = 0; n < count; ++n)
    if (targets[n] != p.ignoreIndex && (targets[n] < 0 || targets[n] >= classes))
      fail("cross_entropy_backward", "target " + std::to_string(targets[n]) + " of row " +
                                         std::to_string(n) + " is out of range for " +
                                         std::to_string(classes) + " classes (ignore_index " +
                                         std::to_string(p.ignoreIndex) + ")");
}

void embeddingIndices(const IndexParams &p, const int64_t *indices, int64_t count) {
  for (int64_t m = 0; m < count; ++m)
    if (indices[m] < 0 || indices[m] >= p.rows)
      fail("embedding_backward", "index " + std::to_string(indices[m]) + " at element " +
                                     std::to_string(m) + " is out of range for " +
                                     std::to_string(p.rows) + " rows");
}

void gather(const IndexParams &p, const KTensor &x, const KTensor &index, const KTensor &y) {
  if (index.dtype != DType::I64)
    fail("gather", std::string("index is ") + plan::dtypeName(index.dtype) + "; expects int64");
  expectResult("gather", y, gatherShape(x.shape, index.shape, p), x.dtype);
}

void compare(CompareOp op, const KTensor &a, const KTensor *b, const KTensor &y) {
  const char *name = compareOpName(op);
  if (b && b->dtype != a.dtype)
    fail(name, std::string("operands differ in dtype: ") + plan::dtypeName(a.dtype) + " and " +
                   plan::dtypeName(b->dtype));
  expectResult(name, y, compareShape(op, a.shape, b ? &b->shape : nullptr), DType::I64);
}

void where(const KTensor &cond, const KTensor &a, const KTensor &b, const KTensor &y) {
  expectDType("where", "cond", cond, DType::I64);
  expectDType("where", "b", b, a.dtype);
  expectResult("where", y, whereShape(cond.shape, a.shape, b.shape), a.dtype);
}

void cast(const KTensor &x, const KTensor &y) { expectShape("cast", "output", y, x.shape); }

void gridSample(const KTensor &x, const KTensor &grid, const KTensor &y) {
  const char *op = "grid_sample";
  if (!isFloatStorage(x.dtype) && x.dtype != DType::F64)
    fail(op, std::string("x is ") + plan::dtypeName(x.dtype) +
                 "; expects float32, float64, bfloat16 or float16");
  expectDType(op, "grid", grid, x.dtype);
  expectResult(op, y, gridSampleShape(x.shape, grid.shape), x.dtype);
}

void gridSampleBackward(SampleGrad wrt, const KTensor &x, const KTensor &grid, const KTensor &grad,
                        const KTensor &y) {
  const char *op = "grid_sample_backward";
  if (!isFloatStorage(x.dtype) && x.dtype != DType::F64)
    fail(op, std::string("x is ") + plan::dtypeName(x.dtype) +
                 "; expects float32, float64, bfloat16 or float16");
  expectDType(op, "grid", grid, x.dtype);
  expectDType(op, "grad", grad, x.dtype);
  expectResult(op, y, gridSampleBackwardShape(x.shape, grid.shape, grad.shape, wrt), x.dtype);
}

void cumsum(const ScanParams &p, const KTensor &x, const KTensor &y) {
  expectResult("cumsum", y, cumsumShape(x.shape, p), x.dtype);
}

void dropout(const DropoutParams &p, const KTensor &x, const KTensor &step, const KTensor &y) {
  expectDType("dropout", "step", step, plan::DType::F32);
  expectResult("dropout", y, dropoutShape(x.shape, step.shape, p), x.dtype);
}

namespace {
/// The experts family's operands: x in float storage, index int64, each
/// other named operand of x's dtype, y of x's dtype with shape `expected`.
void expertOperands(const char *op, const KTensor &x, const KTensor &index,
                    std::initializer_list<std::pair<const char *, const KTensor *>> others,
                    const KTensor &y, const Shape &expected, const char *xName = "x") {
  if (!isFloatStorage(x.dtype))
    fail(op, std::string(xName) + " is " + plan::dtypeName(x.dtype) +
                 "; expects float32, bfloat16 or float16");
  expectDType(op, "index", index, DType::I64);
  for (const auto &[name, t] : others)
    if (t) expectDType(op, name, *t, x.dtype);
  expectDType(op, "output", y, x.dtype);
  if (y.shape != expected)
    fail(op, "output is " + shapeToString(y.shape) + ", expected " + shapeToString(expected));
}
}  // namespace

void moeExperts(const KTensor &x, const KTensor &index, const KTensor &weights,
                const KTensor &gateUp, const KTensor &down, const KTensor &y) {
  expertOperands("moe_experts", x, index,
                 {{"weights", &weights}, {"gate_up", &gateUp}, {"down", &down}}, y,
                 moeExpertsShape(x.shape, index.shape, weights.shape, gateUp.shape, down.shape));
}

void moeExpertsBackward(MoeOperand wrt, const KTensor &x, const KTensor &index,
                        const KTensor &weights, const KTensor &gateUp, const KTensor &down,
                        const KTensor &grad, const KTensor *hidden, const KTensor *gatedGrad,
                        const KTensor &y) {
  expertOperands("moe_experts_backward", x, index,
                 {{"weights", &weights},
                  {"gate_up", &gateUp},
                  {"down", &down},
                  {"grad", &grad},
                  {"hidden", hidden},
                  {"gated_grad", gatedGrad}},
                 y,
                 moeExpertsBackwardShape(wrt, x.shape, index.shape, weights.shape, gateUp.shape,
                                         down.shape, grad.shape, hidden ? &hidden->shape : nullptr,
                                         gatedGrad ? &gatedGrad->shape : nullptr));
}

void moeExpertsHidden(const KTensor &x, const KTensor &index, const KTensor &gateUp,
                      const KTensor &y) {
  expertOperands("moe_experts_hidden", x, index, {{"gate_up", &gateUp}}, y,
                 moeExpertsHiddenShape(x.shape, index.shape, gateUp.shape));
}

void moeExpertsGatedGrad(const KTensor &grad, const KTensor &index, const KTensor &down,
                         const KTensor &y) {
  expertOperands("moe_experts_gated_grad", grad, index, {{"down", &down}}, y,
                 moeExpertsGatedGradShape(grad.shape, index.shape, down.shape), "grad");
}

void optimizerStep(const char *op, const KTensor &param, const KTensor &grad,
                   const std::vector<std::pair<const char *, const KTensor *>> &state,
                   const double *stepCount) {
  if (!isFloatStorage(param.dtype) && param.dtype != DType::F64)
    fail(op, std::string("the param is ") + plan::dtypeName(param.dtype) +
                 "; optimizer state and gradients are floating point");
  std::vector<std::pair<const char *, const KTensor *>> operands{{"the gradient", &grad}};
  operands.insert(operands.end(), state.begin(), state.end());
  for (const auto &[what, t] : operands)
    if (t->dtype != param.dtype || t->numel() != param.numel())
      fail(op, std::string(what) + " (" + plan::dtypeName(t->dtype) + " " +
                   shapeToString(t->shape) + ") does not match the param's " +
                   plan::dtypeName(param.dtype) + " " + shapeToString(param.shape));
  if (stepCount && !(*stepCount >= 1))
    fail(op, "the step count is " + std::to_string(*stepCount) +
                 "; it is advanced to 1 before the first update");
}

namespace {
bool isScalarDouble(const KTensor &t) { return t.dtype == DType::F64 && t.numel() == 1; }
}  // namespace

void clipNorm(const char *op, double maxGradNorm, const KTensor *gradNorm) {
  if ((maxGradNorm > 0) != (gradNorm != nullptr))
    fail(op, "max_grad_norm > 0 and the gradients' norm go together (grad_norm's output)");
  if (gradNorm && !isScalarDouble(*gradNorm))
    fail(op, std::string("the gradients' norm is ") + plan::dtypeName(gradNorm->dtype) + " " +
                 shapeToString(gradNorm->shape) + "; grad_norm writes one float64");
}

void gradNorm(const std::vector<KTensor> &grads, const std::vector<bool> &whole,
              const KTensor &norm) {
  if (whole.size() != grads.size()) fail("grad_norm", "one whole flag per gradient");
  for (const KTensor &grad : grads)
    if (!isFloatStorage(grad.dtype) && grad.dtype != DType::F64)
      fail("grad_norm", std::string("a gradient is ") + plan::dtypeName(grad.dtype) +
                            "; gradients are floating point");
  if (!isScalarDouble(norm))
    fail("grad_norm", std::string("the norm is ") + plan::dtypeName(norm.dtype) + " " +
                          shapeToString(norm.shape) + "; it must be one float64");
}

}  // namespace shardc::runtime::checks
