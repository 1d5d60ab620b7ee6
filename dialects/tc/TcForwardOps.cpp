//===- TcForwardOps.cpp - verifiers of the tc model ops -------------------===//
#include "dialects/tc/TcOps.h"

#include "mlir/Dialect/Traits.h"

using namespace mlir;
using namespace mlir::tc;

namespace {

RankedTensorType tensorOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// Model values compute in floating point (f32, bf16; f64 and f16 allowed).
LogicalResult requireFloat(Operation *op, Value value, StringRef what) {
  if (!isa<FloatType>(tensorOf(value).getElementType()))
    return op->emitOpError() << what << " must be a floating-point tensor, got "
                             << value.getType();
  return success();
}

LogicalResult requireInt64(Operation *op, Value value, StringRef what) {
  if (!tensorOf(value).getElementType().isInteger(64))
    return op->emitOpError() << what << " must be an int64 tensor, got "
                             << value.getType();
  return success();
}

LogicalResult requireSameElementType(Operation *op, ArrayRef<Value> values) {
  for (Value value : values.drop_front())
    if (tensorOf(value).getElementType() != tensorOf(values[0]).getElementType())
      return op->emitOpError() << "element types differ: " << values[0].getType()
                               << " and " << value.getType();
  return success();
}

LogicalResult requireResultShape(Operation *op, ArrayRef<int64_t> expected) {
  auto result = cast<RankedTensorType>(op->getResult(0).getType());
  if (result.getShape() != expected) {
    InFlightDiagnostic diag = op->emitOpError()
                              << "result type " << result
                              << " does not have the expected shape [";
    llvm::interleaveComma(expected, diag);
    return diag << "]";
  }
  return success();
}

/// A normalized (non-negative, in range) dim attribute.
LogicalResult requireDim(Operation *op, int64_t dim, int64_t rank) {
  if (dim < 0 || dim >= rank)
    return op->emitOpError() << "dim " << dim << " out of range for rank "
                             << rank;
  return success();
}

template <typename BinaryOp>
LogicalResult verifyBroadcastBinary(BinaryOp op) {
  auto lhs = tensorOf(op.getLhs());
  auto rhs = tensorOf(op.getRhs());
  auto result = tensorOf(op.getResult());
  if (lhs.getElementType() != rhs.getElementType() ||
      lhs.getElementType() != result.getElementType())
    return op.emitOpError() << "element types differ: " << lhs << ", " << rhs
                            << " -> " << result;
  SmallVector<int64_t> shape;
  if (!OpTrait::util::getBroadcastedShape(lhs.getShape(), rhs.getShape(), shape))
    return op.emitOpError() << "shapes " << lhs << " and " << rhs
                            << " do not broadcast";
  if (ArrayRef<int64_t>(shape) != result.getShape())
    return op.emitOpError() << "result type " << result
                            << " is not the broadcast shape of " << lhs
                            << " and " << rhs;
  return success();
}

/// Numpy matmul of [..., M, K] and [..., K, N].
FailureOr<SmallVector<int64_t>> matmulShape(Operation *op, RankedTensorType a,
                                            RankedTensorType b) {
  if (a.getRank() < 2 || b.getRank() < 2)
    return op->emitOpError() << "operands need at least 2 dims, got " << a
                             << " and " << b;
  int64_t k = a.getShape().back();
  if (b.getDimSize(b.getRank() - 2) != k)
    return op->emitOpError() << "inner dims differ: " << a << " and " << b;
  SmallVector<int64_t> batch;
  if (!OpTrait::util::getBroadcastedShape(a.getShape().drop_back(2),
                                          b.getShape().drop_back(2), batch))
    return op->emitOpError() << "batch dims of " << a << " and " << b
                             << " do not broadcast";
  batch.push_back(a.getDimSize(a.getRank() - 2));
  batch.push_back(b.getShape().back());
  return batch;
}

} // namespace

LogicalResult AddOp::verify() { return verifyBroadcastBinary(*this); }
LogicalResult SubOp::verify() { return verifyBroadcastBinary(*this); }
LogicalResult MulOp::verify() { return verifyBroadcastBinary(*this); }
LogicalResult DivOp::verify() { return verifyBroadcastBinary(*this); }

LogicalResult EmbeddingOp::verify() {
  auto weight = tensorOf(getWeight());
  if (weight.getRank() != 2)
    return emitOpError() << "weight must be [V, D], got " << weight;
  if (failed(requireFloat(*this, getWeight(), "weight")) ||
      failed(requireInt64(*this, getIds(), "ids")))
    return failure();
  SmallVector<int64_t> shape(tensorOf(getIds()).getShape());
  shape.push_back(weight.getDimSize(1));
  if (failed(requireSameElementType(*this, {getWeight(), getResult()})))
    return failure();
  return requireResultShape(*this, shape);
}

LogicalResult LinearOp::verify() {
  auto input = tensorOf(getInput());
  auto weight = tensorOf(getWeight());
  if (input.getRank() < 1 || weight.getRank() != 2)
    return emitOpError() << "expects x [..., K] and weight [N, K], got "
                         << input << " and " << weight;
  if (weight.getDimSize(1) != input.getShape().back())
    return emitOpError() << "in_features differ: x " << input << " has K = "
                         << input.getShape().back() << ", weight " << weight
                         << " has " << weight.getDimSize(1);
  SmallVector<Value> values{getInput(), getWeight(), getResult()};
  if (getBias()) {
    auto bias = tensorOf(getBias());
    if (bias.getRank() != 1 || bias.getDimSize(0) != weight.getDimSize(0))
      return emitOpError() << "bias must be [" << weight.getDimSize(0)
                           << "], got " << bias;
    values.push_back(getBias());
  }
  if (failed(requireFloat(*this, getInput(), "x")) ||
      failed(requireSameElementType(*this, values)))
    return failure();
  SmallVector<int64_t> shape(input.getShape());
  shape.back() = weight.getDimSize(0);
  return requireResultShape(*this, shape);
}

LogicalResult MatmulOp::verify() {
  FailureOr<SmallVector<int64_t>> shape =
      matmulShape(*this, tensorOf(getLhs()), tensorOf(getRhs()));
  if (failed(shape) || failed(requireFloat(*this, getLhs(), "lhs")) ||
      failed(requireSameElementType(*this, {getLhs(), getRhs(), getResult()})))
    return failure();
  return requireResultShape(*this, *shape);
}

LogicalResult GeluOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError() << "approximate must be \"none\" or \"tanh\", got \""
                         << getApproximate() << "\"";
  return requireFloat(*this, getInput(), "input");
}

LogicalResult SoftmaxOp::verify() {
  return requireDim(*this, getDimAttr().getInt(), getType().getRank());
}

LogicalResult RopeOp::verify() {
  auto type = getType();
  if (type.getRank() != 4 || type.getDimSize(3) % 2 != 0)
    return emitOpError() << "expects [B, H, T, D] with D even, got " << type;
  if (getTheta().convertToDouble() <= 0)
    return emitOpError() << "theta must be positive";
  return requireFloat(*this, getInput(), "input");
}

LogicalResult LayerNormOp::verify() {
  auto input = tensorOf(getInput());
  if (input.getRank() < 1)
    return emitOpError() << "input must have at least 1 dim";
  int64_t d = input.getShape().back();
  for (Value param : {getWeight(), getBias()})
    if (tensorOf(param).getShape() != ArrayRef<int64_t>{d})
      return emitOpError() << "weight and bias must be [" << d << "], got "
                           << param.getType();
  if (failed(requireFloat(*this, getInput(), "input")) ||
      failed(requireSameElementType(
          *this, {getInput(), getWeight(), getBias(), getResult()})))
    return failure();
  return requireResultShape(*this, input.getShape());
}

LogicalResult RmsNormOp::verify() {
  auto input = tensorOf(getInput());
  if (input.getRank() < 1)
    return emitOpError() << "input must have at least 1 dim";
  int64_t d = input.getShape().back();
  if (tensorOf(getWeight()).getShape() != ArrayRef<int64_t>{d})
    return emitOpError() << "weight must be [" << d << "], got "
                         << getWeight().getType();
  if (failed(requireFloat(*this, getInput(), "input")) ||
      failed(requireSameElementType(*this, {getInput(), getWeight(), getResult()})))
    return failure();
  return requireResultShape(*this, input.getShape());
}

LogicalResult SdpaOp::verify() {
  auto q = tensorOf(getQuery()), k = tensorOf(getKey()), v = tensorOf(getValue());
  if (q.getRank() != 4 || k.getRank() != 4 || v.getRank() != 4)
    return emitOpError() << "expects q, k, v of 4 dims [B, H, T, E]";
  if (q.getShape().take_front(2) != k.getShape().take_front(2) ||
      q.getShape().take_front(2) != v.getShape().take_front(2) ||
      q.getDimSize(3) != k.getDimSize(3) || k.getDimSize(2) != v.getDimSize(2))
    return emitOpError() << "shapes do not fit attention: q " << q << ", k "
                         << k << ", v " << v;
  if (getCausal() && q.getDimSize(2) != k.getDimSize(2))
    return emitOpError() << "causal attention needs as many queries as keys";
  if (failed(requireFloat(*this, getQuery(), "q")) ||
      failed(requireSameElementType(
          *this, {getQuery(), getKey(), getValue(), getResult()})))
    return failure();
  return requireResultShape(*this, {q.getDimSize(0), q.getDimSize(1),
                                    q.getDimSize(2), v.getDimSize(3)});
}

LogicalResult CatOp::verify() {
  if (getInputs().empty())
    return emitOpError() << "needs at least one input";
  auto first = tensorOf(getInputs()[0]);
  int64_t dim = getDimAttr().getInt();
  if (failed(requireDim(*this, dim, first.getRank())))
    return failure();
  SmallVector<int64_t> shape(first.getShape());
  shape[dim] = 0;
  for (Value input : getInputs()) {
    auto type = tensorOf(input);
    if (type.getRank() != first.getRank())
      return emitOpError() << "inputs differ in rank";
    for (int64_t k = 0; k < type.getRank(); ++k)
      if (k != dim && type.getDimSize(k) != first.getDimSize(k))
        return emitOpError() << "inputs differ outside dim " << dim << ": "
                             << first << " and " << type;
    shape[dim] += type.getDimSize(dim);
  }
  SmallVector<Value> values(getInputs());
  values.push_back(getResult());
  if (failed(requireSameElementType(*this, values)))
    return failure();
  return requireResultShape(*this, shape);
}

LogicalResult CrossEntropyOp::verify() {
  auto logits = tensorOf(getLogits());
  auto targets = tensorOf(getTargets());
  if (logits.getRank() != 2 || targets.getRank() != 1 ||
      targets.getDimSize(0) != logits.getDimSize(0))
    return emitOpError() << "expects logits [N, C] and targets [N], got "
                         << logits << " and " << targets;
  if (failed(requireFloat(*this, getLogits(), "logits")) ||
      failed(requireInt64(*this, getTargets(), "targets")) ||
      failed(requireSameElementType(*this, {getLogits(), getResult()})))
    return failure();
  return requireResultShape(*this, {});
}
