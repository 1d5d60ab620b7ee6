//===- TcForwardOps.cpp - verifiers of the tc model ops -------------------===//
#include "dialects/tc/TcOps.h"

#include "runtime/AttentionShapes.h"
#include "runtime/OpRules.h"

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
LogicalResult DivOp::verify() {
  // torch divides integers into floats: an int64 division has no one result type.
  if (tensorOf(getLhs()).getElementType().isInteger(64))
    return emitOpError() << "operands must be floating point (cast int64 first), got "
                         << getLhs().getType();
  return verifyBroadcastBinary(*this);
}

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
  auto dims = [](RankedTensorType t) {
    return std::span<const int64_t>(t.getShape().data(), t.getShape().size());
  };
  if (!shardc::runtime::attentionShapesFit(dims(q), dims(k), dims(v)))
    return emitOpError() << "shapes do not fit attention (q [B, H, T, E], k [B, Hkv, S, E], "
                            "v [B, Hkv, S, Ev], H a multiple of Hkv): q "
                         << q << ", k " << k << ", v " << v;
  if (getCausal() && q.getDimSize(2) != k.getDimSize(2))
    return emitOpError() << "causal attention needs as many queries as keys";
  if (failed(requireFloat(*this, getQuery(), "q")) ||
      failed(requireSameElementType(
          *this, {getQuery(), getKey(), getValue(), getResult()})))
    return failure();
  if (Value mask = getMask()) {
    auto m = tensorOf(mask);
    const int64_t scores[4] = {q.getDimSize(0), q.getDimSize(1), q.getDimSize(2),
                               k.getDimSize(2)};
    if (!shardc::runtime::attentionMaskFits(dims(m), scores))
      return emitOpError() << "mask " << m << " does not broadcast to the scores ["
                           << scores[0] << ", " << scores[1] << ", " << scores[2]
                           << ", " << scores[3] << "]";
    if (failed(requireSameElementType(*this, {getQuery(), mask})))
      return failure();
  }
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

// ---- tc.op: the op table's family ops --------------------------------------

namespace {

/// The table's kind of an MLIR attribute value, or nullopt when it has none.
std::optional<shardc::plan::AttrValue> planValue(Attribute attr,
                                                 shardc::plan::AttrKind kind) {
  using shardc::plan::AttrKind;
  switch (kind) {
  case AttrKind::Int:
    if (auto i = dyn_cast<IntegerAttr>(attr); i && i.getType().isInteger(64))
      return i.getInt();
    return std::nullopt;
  case AttrKind::Float:
    if (auto f = dyn_cast<FloatAttr>(attr); f && f.getType().isF64())
      return f.getValueAsDouble();
    return std::nullopt;
  case AttrKind::String:
    if (auto str = dyn_cast<StringAttr>(attr))
      return str.str();
    return std::nullopt;
  case AttrKind::IntList: {
    auto array = dyn_cast<ArrayAttr>(attr);
    if (!array)
      return std::nullopt;
    std::vector<int64_t> list;
    for (Attribute element : array) {
      auto i = dyn_cast<IntegerAttr>(element);
      if (!i || !i.getType().isInteger(64))
        return std::nullopt;
      list.push_back(i.getInt());
    }
    return list;
  }
  }
  return std::nullopt;
}

const char *kindSyntax(shardc::plan::AttrKind kind) {
  using shardc::plan::AttrKind;
  switch (kind) {
  case AttrKind::Int: return "an i64 integer";
  case AttrKind::Float: return "an f64 float";
  case AttrKind::String: return "a string";
  case AttrKind::IntList: return "a list of i64 integers";
  }
  return "?";
}

std::string familyOpNames() {
  std::string names;
  for (const shardc::plan::OpInfo &info : shardc::plan::allOps())
    if (info.generic())
      names += (names.empty() ? "" : ", ") + std::string(info.name);
  return names;
}

FailureOr<shardc::plan::DType> runtimeDType(Operation *op, Type type) {
  Type element = cast<RankedTensorType>(type).getElementType();
  if (element.isF32()) return shardc::plan::DType::F32;
  if (element.isBF16()) return shardc::plan::DType::BF16;
  if (element.isF16()) return shardc::plan::DType::F16;
  if (element.isF64()) return shardc::plan::DType::F64;
  if (element.isInteger(64)) return shardc::plan::DType::I64;
  return op->emitOpError() << "element type " << element << " has no runtime dtype";
}

/// The table entry of a tc.op name, or an error.
FailureOr<const shardc::plan::OpInfo *> tableEntry(TableOp op) {
  std::optional<shardc::plan::OpCode> code =
      shardc::plan::parseOpCode(op.getOpName().str());
  if (!code)
    return op.emitOpError() << "unknown op \"" << op.getOpName()
                            << "\"; tc.op takes the op table's family ops: "
                            << familyOpNames();
  const shardc::plan::OpInfo &info = shardc::plan::opInfo(*code);
  if (!info.generic())
    return op.emitOpError() << "\"" << op.getOpName()
                            << "\" is not a family op of the op table (it has its "
                               "own tc op or is not a forward op)";
  return &info;
}

} // namespace

FailureOr<std::map<std::string, shardc::plan::AttrValue>> mlir::tc::tableAttrs(TableOp op) {
  FailureOr<const shardc::plan::OpInfo *> info = tableEntry(op);
  if (failed(info))
    return failure();
  std::map<std::string, shardc::plan::AttrValue> attrs;
  for (NamedAttribute named : op->getAttrs()) {
    if (named.getName() == op.getOpNameAttrName())
      continue;
    const shardc::plan::AttrSpec *spec = (*info)->attr(named.getName().strref());
    if (!spec) {
      InFlightDiagnostic diag = op.emitOpError()
                                << "\"" << op.getOpName() << "\" has no attribute '"
                                << named.getName().strref() << "' (it takes";
      if ((*info)->attrs.empty())
        diag << " none";
      for (const shardc::plan::AttrSpec &known : (*info)->attrs)
        diag << " " << known.name;
      return diag << ")";
    }
    std::optional<shardc::plan::AttrValue> value = planValue(named.getValue(), spec->kind);
    if (!value)
      return op.emitOpError() << "attribute '" << spec->name << "' must be "
                              << kindSyntax(spec->kind) << ", got " << named.getValue();
    attrs[spec->name] = std::move(*value);
  }
  for (const shardc::plan::AttrSpec &spec : (*info)->attrs)
    if (spec.required && !attrs.count(spec.name))
      return op.emitOpError() << "\"" << op.getOpName() << "\" needs attribute '"
                              << spec.name << "' (" << kindSyntax(spec.kind) << ")";
  return attrs;
}

Attribute mlir::tc::tableAttr(Builder &builder, const shardc::plan::AttrValue &value) {
  if (auto *i = std::get_if<int64_t>(&value))
    return builder.getI64IntegerAttr(*i);
  if (auto *f = std::get_if<double>(&value))
    return builder.getF64FloatAttr(*f);
  if (auto *str = std::get_if<std::string>(&value))
    return builder.getStringAttr(*str);
  return builder.getI64ArrayAttr(std::get<std::vector<int64_t>>(value));
}

LogicalResult TableOp::verify() {
  FailureOr<std::map<std::string, shardc::plan::AttrValue>> attrs = tableAttrs(*this);
  if (failed(attrs))
    return failure();
  const shardc::plan::OpInfo &info =
      shardc::plan::opInfo(*shardc::plan::parseOpCode(getOpName().str()));
  std::vector<shardc::runtime::TensorType> operands;
  for (Value input : getInputs()) {
    FailureOr<shardc::plan::DType> dtype = runtimeDType(*this, input.getType());
    if (failed(dtype))
      return failure();
    auto shape = tensorOf(input).getShape();
    operands.push_back({shardc::runtime::Shape(shape.begin(), shape.end()), *dtype});
  }
  shardc::runtime::TensorType expected;
  if (std::optional<std::string> reason =
          shardc::runtime::tryResultType(info, operands, *attrs, expected))
    return emitOpError() << *reason;
  FailureOr<shardc::plan::DType> dtype = runtimeDType(*this, getType());
  if (failed(dtype))
    return failure();
  auto declared = tensorOf(getResult()).getShape();
  if (*dtype != expected.dtype ||
      shardc::runtime::Shape(declared.begin(), declared.end()) != expected.shape) {
    InFlightDiagnostic diag = emitOpError() << "result type " << getType()
                                            << " differs from the op table rule's [";
    llvm::interleave(expected.shape, diag, "x");
    return diag << "] " << shardc::plan::dtypeName(expected.dtype);
  }
  return success();
}
