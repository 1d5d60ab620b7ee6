//===- TcOps.cpp - tc dialect operations ----------------------------------===//
#include "dialects/tc/TcOps.h"
#include "dialects/tc/Device.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Dialect/Traits.h"

using namespace mlir;
using namespace mlir::tc;

FailureOr<ParamOp> mlir::tc::lookupParam(Operation *user,
                                         FlatSymbolRefAttr name,
                                         SymbolTableCollection &symbolTable) {
  auto param = symbolTable.lookupNearestSymbolFrom<ParamOp>(user, name);
  if (!param)
    return user->emitOpError() << "references undefined parameter " << name;
  return param;
}

//===----------------------------------------------------------------------===//
// ParamOp
//===----------------------------------------------------------------------===//

RankedTensorType ParamOp::getLocalType() {
  if (auto shard = getShardAttr())
    return shard.getLocalType(getTensorType());
  return getTensorType();
}

LogicalResult ParamOp::verify() {
  if (!isValidDeviceString(getDevice()))
    return emitOpError() << "device \"" << getDevice()
                         << "\" does not parse: expected cpu, meta, cuda, "
                            "cpu:N or cuda:N";
  RankedTensorType type = getTensorType();
  if (!type.hasStaticShape())
    return emitOpError() << "parameter type " << type
                         << " must have a static shape";
  if (getNonPersistent() && !getIsBuffer() &&
      !shardc::plan::isOptimizerState(getSymName().str()))
    return emitOpError() << "non_persistent applies to buffers and to optimizer state "
                            "(@optim.*) only; a parameter is always part of the "
                            "model's state";
  if (auto tied = getTiedNames()) {
    if (getIsBuffer())
      return emitOpError() << "tied names apply to parameters, not buffers";
    for (Attribute name : *tied)
      if (cast<StringAttr>(name).getValue().empty() ||
          cast<StringAttr>(name).getValue() == getSymName())
        return emitOpError() << "tied name \"" << cast<StringAttr>(name).getValue()
                             << "\" must be non-empty and not the parameter's own name";
  }
  if (auto shard = getShardAttr()) {
    if (type.getRank() == 0)
      return emitOpError() << "a 0-d parameter is replicated, not sharded";
    int64_t rows = type.getDimSize(0);
    int64_t expected = (rows + shard.getWorldSize() - 1) / shard.getWorldSize();
    if (shard.getChunkRows() != expected)
      return emitOpError() << "chunk_rows " << shard.getChunkRows()
                           << " is not ceil(" << rows << " / "
                           << shard.getWorldSize() << ") = " << expected;
  }
  // Program-wide rules (each parameter materialized exactly once) are not
  // this op's: an op verifier must not read its siblings, which may not be
  // verified yet (a tc.materialize without its symbol crashed here). They
  // are verifyProgram's, run by -tc-verify-program and at the start of every
  // tc pass, once the whole module has verified.
  return success();
}

//===----------------------------------------------------------------------===//
// UseOp, MaterializeOp, AllGatherOp, ReleaseOp
//===----------------------------------------------------------------------===//

/// A read of a parameter of type `param` may have `result`'s type: the same,
/// or (tc-fold-param-casts) the same shape in another float type, the
/// parameter rounded to it as a cast would.
static bool isReadType(Type result, RankedTensorType param) {
  auto read = dyn_cast<RankedTensorType>(result);
  if (!read || read.getShape() != param.getShape())
    return false;
  return read == param || (isa<FloatType>(read.getElementType()) &&
                           isa<FloatType>(param.getElementType()));
}

LogicalResult UseOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<ParamOp> param = lookupParam(*this, getParamAttr(), symbolTable);
  if (failed(param))
    return failure();
  if (!isReadType(getType(), param->getTensorType()))
    return emitOpError() << "result type " << getType()
                         << " is neither the type of parameter "
                         << getParamAttr() << " (" << param->getTensorType()
                         << ") nor its shape in another float type";
  if (auto shard = param->getShardAttr(); shard && shard.getWorldSize() > 1)
    return emitOpError() << "parameter " << getParamAttr()
                         << " is sharded over " << shard.getWorldSize()
                         << " ranks; read it with tc.all_gather";
  return success();
}

LogicalResult UpdateBufferOp::verify() {
  auto func = (*this)->getParentOfType<func::FuncOp>();
  if (!func || func.getSymName() != kForwardFunctionName)
    return emitOpError() << "must be inside func @" << kForwardFunctionName;
  return success();
}

LogicalResult
UpdateBufferOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<ParamOp> param = lookupParam(*this, getBufferAttr(), symbolTable);
  if (failed(param))
    return failure();
  if (!param->getIsBuffer())
    return emitOpError()
           << getBufferAttr()
           << " is a parameter, not a buffer (the optimizer steps "
              "update parameters)";
  if (getValue().getType() != param->getTensorType())
    return emitOpError() << "value type " << getValue().getType()
                         << " differs from the type of buffer "
                         << getBufferAttr() << " (" << param->getTensorType()
                         << ")";
  return success();
}

LogicalResult MaterializeOp::verify() {
  auto func = (*this)->getParentOfType<func::FuncOp>();
  if (!func || func.getSymName() != kInitFunctionName)
    return emitOpError() << "must be inside func @" << kInitFunctionName;
  return success();
}

LogicalResult
MaterializeOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<ParamOp> param = lookupParam(*this, getParamAttr(), symbolTable);
  if (failed(param))
    return failure();
  RankedTensorType expected = param->getLocalType();
  if (getValue().getType() != expected)
    return emitOpError() << "value type " << getValue().getType()
                         << " differs from the "
                         << (param->getShard() ? "local shard type" : "type")
                         << " of parameter " << getParamAttr() << " ("
                         << expected << ")";
  return success();
}

LogicalResult AllGatherOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  for (auto [name, result] : llvm::zip(getParams(), getResults())) {
    auto symbol = cast<FlatSymbolRefAttr>(name);
    FailureOr<ParamOp> param = lookupParam(*this, symbol, symbolTable);
    if (failed(param))
      return failure();
    if (!param->getShard())
      return emitOpError() << "parameter " << symbol
                           << " is not sharded; read it with tc.use";
    if (!isReadType(result.getType(), param->getTensorType()))
      return emitOpError() << "result type " << result.getType()
                           << " is neither the type of parameter " << symbol
                           << " (" << param->getTensorType()
                           << ") nor its shape in another float type";
  }
  return success();
}

LogicalResult AllGatherOp::verify() {
  if (getParams().size() != getNumResults())
    return emitOpError() << "gathers " << getParams().size()
                         << " parameters into " << getNumResults()
                         << " results";
  if (getParams().empty())
    return emitOpError() << "needs at least one parameter";
  llvm::SmallDenseSet<Attribute> seen;
  for (Attribute param : getParams())
    if (!seen.insert(param).second)
      return emitOpError() << "gathers " << param << " twice";
  // One gathered buffer of one dtype: a parameter stored in another is
  // converted into it (tc-fsdp gathers each dtype of a unit separately).
  for (Value result : getResults())
    if (getElementTypeOrSelf(result.getType()) !=
        getElementTypeOrSelf(getResult(0).getType()))
      return emitOpError() << "results must share one element type, got "
                           << getResult(0).getType() << " and "
                           << result.getType();
  return success();
}

LogicalResult ReleaseOp::verify() {
  auto gather = getValues().empty()
                    ? AllGatherOp()
                    : getValues()[0].getDefiningOp<AllGatherOp>();
  if (!gather)
    return emitOpError() << "can only release the results of tc.all_gather";
  if (!llvm::equal(getValues(), gather.getResults()))
    return emitOpError() << "must release all " << gather.getNumResults()
                         << " results of its tc.all_gather, in order";
  return success();
}

//===----------------------------------------------------------------------===//
// Generators
//===----------------------------------------------------------------------===//

bool mlir::tc::isShardableGenerator(Operation *op) {
  return isa<GeneratorOpInterface>(op) && !isa<OrthogonalOp>(op);
}

/// The rules every generator shares: static shapes; a `shard of` result is a
/// dim-0 slab of the full type; a `from SOURCE map M` map takes full indices
/// to SOURCE indices.
template <typename GeneratorOp>
static LogicalResult verifyGenerator(GeneratorOp op) {
  auto result = cast<RankedTensorType>(op.getType());
  if (!result.hasStaticShape())
    return op.emitOpError() << "result type " << result
                            << " must have a static shape";
  RankedTensorType full = op.getFullTensorType();
  if (op.getFullType() &&
      (full.getElementType() != result.getElementType() ||
       full.getRank() != result.getRank() || full.getRank() == 0 ||
       !full.hasStaticShape() ||
       full.getShape().drop_front() != result.getShape().drop_front() ||
       result.getDimSize(0) > full.getDimSize(0)))
    return op.emitOpError()
           << "result type " << result << " is not a dim-0 shard of " << full
           << " (same element type and trailing dims, at most as many rows)";
  if (op.getSourceType()) {
    RankedTensorType source = op.getSourceTensorType();
    if (!source.hasStaticShape() ||
        source.getElementType() != result.getElementType())
      return op.emitOpError() << "source type " << source
                              << " must be static with element type "
                              << result.getElementType();
    AffineMap map = *op.getIndexMap();
    if (map.getNumDims() != static_cast<unsigned>(full.getRank()) ||
        map.getNumResults() != static_cast<unsigned>(source.getRank()) ||
        map.getNumSymbols() != 0)
      return op.emitOpError()
             << "index map " << AffineMapAttr::get(map) << " must take " << full.getRank()
             << " indices of " << full << " to " << source.getRank()
             << " indices of " << source;
  }
  return success();
}

/// torch.nn.init's fan rules need at least two dims.
static LogicalResult verifyFanShape(Operation *op, RankedTensorType type) {
  if (type.getRank() < 2)
    return op->emitOpError()
           << "needs a tensor of at least 2 dims to compute fan in and fan "
              "out, got "
           << type;
  return success();
}

LogicalResult FillOp::verify() { return verifyGenerator(*this); }
LogicalResult ZerosOp::verify() { return verifyGenerator(*this); }
LogicalResult OnesOp::verify() { return verifyGenerator(*this); }
LogicalResult ArangeOp::verify() { return verifyGenerator(*this); }
LogicalResult LoadOp::verify() {
  if (getIndexMap() || getSourceType())
    return emitOpError() << "views after a load are not supported (no `from ... map`)";
  if (getTensor().empty())
    return emitOpError() << "needs a tensor name";
  return verifyGenerator(*this);
}

LogicalResult NormOfOp::verify() {
  if (getIndexMap() || getSourceType())
    return emitOpError() << "views after a norm_of are not supported (no `from ... map`)";
  if (getSource().empty())
    return emitOpError() << "needs a source parameter name";
  int64_t rank = getFullTensorType().getRank();
  for (int64_t d : getDims())
    if (d < 0 || d >= rank)
      return emitOpError() << "dim " << d << " is out of range for " << getFullTensorType();
  return verifyGenerator(*this);
}

LogicalResult UniformOp::verify() {
  if (!(getLow().convertToDouble() <= getHigh().convertToDouble()))
    return emitOpError() << "low " << getLow().convertToDouble() << " exceeds high " << getHigh().convertToDouble();
  return verifyGenerator(*this);
}

LogicalResult NormalOp::verify() {
  if (!(getStd().convertToDouble() >= 0))
    return emitOpError() << "std must be non-negative, got " << getStd().convertToDouble();
  return verifyGenerator(*this);
}

LogicalResult TruncNormalOp::verify() {
  if (!(getStd().convertToDouble() > 0))
    return emitOpError() << "std must be positive, got " << getStd().convertToDouble();
  if (!(getA().convertToDouble() < getB().convertToDouble()))
    return emitOpError() << "truncation bounds [" << getA().convertToDouble() << ", " << getB().convertToDouble()
                         << "] are empty";
  return verifyGenerator(*this);
}

LogicalResult EyeOp::verify() {
  if (getFullTensorType().getRank() != 2)
    return emitOpError() << "needs a 2-D tensor, got " << getFullTensorType();
  return verifyGenerator(*this);
}

LogicalResult OrthogonalOp::verify() {
  if (getFullType() || getSourceType())
    return emitOpError() << "is not shardable: it cannot produce a shard";
  if (getType().getRank() < 2)
    return emitOpError() << "needs a tensor of at least 2 dims, got "
                         << getType();
  return verifyGenerator(*this);
}

static LogicalResult verifyKaiming(Operation *op, StringRef mode,
                                   StringRef nonlinearity) {
  if (mode != "fan_in" && mode != "fan_out")
    return op->emitOpError() << "mode must be \"fan_in\" or \"fan_out\", got \""
                             << mode << "\"";
  static const char *const known[] = {
      "linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
      "conv_transpose2d", "conv_transpose3d", "sigmoid", "tanh", "relu",
      "leaky_relu", "selu"};
  if (!llvm::is_contained(known, nonlinearity))
    return op->emitOpError() << "unsupported nonlinearity \"" << nonlinearity
                             << "\"";
  return success();
}

LogicalResult KaimingUniformOp::verify() {
  if (failed(verifyKaiming(*this, getMode(), getNonlinearity())) ||
      failed(verifyFanShape(*this, getSourceTensorType())))
    return failure();
  return verifyGenerator(*this);
}
LogicalResult KaimingNormalOp::verify() {
  if (failed(verifyKaiming(*this, getMode(), getNonlinearity())) ||
      failed(verifyFanShape(*this, getSourceTensorType())))
    return failure();
  return verifyGenerator(*this);
}
LogicalResult XavierUniformOp::verify() {
  if (failed(verifyFanShape(*this, getSourceTensorType())))
    return failure();
  return verifyGenerator(*this);
}
LogicalResult XavierNormalOp::verify() {
  if (failed(verifyFanShape(*this, getSourceTensorType())))
    return failure();
  return verifyGenerator(*this);
}

//===----------------------------------------------------------------------===//
// Pointwise and views
//===----------------------------------------------------------------------===//

LogicalResult ClampOp::verify() {
  if (getMin().convertToDouble() > getMax().convertToDouble())
    return emitOpError() << "min " << getMin().convertToDouble() << " exceeds max " << getMax().convertToDouble();
  return success();
}

LogicalResult FillRowsOp::verify() {
  const auto start = static_cast<int64_t>(getStart());
  const auto end = static_cast<int64_t>(getEnd());
  if (start < 0 || start > end)
    return emitOpError() << "rows [" << start << ", " << end << ") need 0 <= start <= end";
  return success();
}

/// Views keep the element type and have static shapes.
static LogicalResult verifyViewTypes(Operation *op, RankedTensorType input,
                                     RankedTensorType result) {
  if (input.getElementType() != result.getElementType())
    return op->emitOpError() << "changes the element type: " << input
                             << " -> " << result;
  if (!input.hasStaticShape() || !result.hasStaticShape())
    return op->emitOpError() << "needs static shapes";
  return success();
}

LogicalResult ReshapeOp::verify() {
  if (failed(verifyViewTypes(*this, getInput().getType(), getType())))
    return failure();
  if (getInput().getType().getNumElements() != getType().getNumElements())
    return emitOpError() << "cannot reshape " << getInput().getType() << " ("
                         << getInput().getType().getNumElements()
                         << " elements) to " << getType() << " ("
                         << getType().getNumElements() << " elements)";
  return success();
}

AffineMap ReshapeOp::getIndexMap() {
  // Result index -> row-major flat index -> input index.
  MLIRContext *context = getContext();
  ArrayRef<int64_t> out = getType().getShape();
  ArrayRef<int64_t> in = getInput().getType().getShape();
  AffineExpr flat = getAffineConstantExpr(0, context);
  for (size_t k = 0; k < out.size(); ++k)
    flat = flat * out[k] + getAffineDimExpr(k, context);
  SmallVector<AffineExpr> results;
  int64_t stride = getInput().getType().getNumElements();
  for (size_t j = 0; j < in.size(); ++j) {
    stride = in[j] == 0 ? 0 : stride / in[j];
    AffineExpr index = stride == 0 ? getAffineConstantExpr(0, context)
                                   : flat.floorDiv(stride);
    results.push_back(j == 0 ? index : index % in[j]);
  }
  return AffineMap::get(out.size(), 0, results, context);
}

LogicalResult TransposeOp::verify() {
  if (failed(verifyViewTypes(*this, getInput().getType(), getType())))
    return failure();
  int64_t rank = getInput().getType().getRank();
  int64_t d0 = getDim0Attr().getInt(), d1 = getDim1Attr().getInt();
  if (d0 < 0 || d0 >= rank || d1 < 0 || d1 >= rank)
    return emitOpError() << "dims " << d0 << ", " << d1
                         << " out of range for rank " << rank;
  SmallVector<int64_t> shape(getInput().getType().getShape());
  std::swap(shape[d0], shape[d1]);
  if (ArrayRef<int64_t>(shape) != getType().getShape())
    return emitOpError() << "result type " << getType()
                         << " is not the transpose of " << getInput().getType();
  return success();
}

AffineMap TransposeOp::getIndexMap() {
  int64_t rank = getType().getRank();
  SmallVector<unsigned> permutation;
  for (int64_t k = 0; k < rank; ++k)
    permutation.push_back(k);
  std::swap(permutation[getDim0()], permutation[getDim1()]);
  return AffineMap::getPermutationMap(permutation, getContext());
}

LogicalResult PermuteOp::verify() {
  if (failed(verifyViewTypes(*this, getInput().getType(), getType())))
    return failure();
  ArrayRef<int64_t> dims = getDims();
  int64_t rank = getInput().getType().getRank();
  SmallVector<bool> seen(rank, false);
  if (static_cast<int64_t>(dims.size()) != rank)
    return emitOpError() << "needs " << rank << " dims, got " << dims.size();
  for (int64_t d : dims) {
    if (d < 0 || d >= rank || seen[d])
      return emitOpError() << "dims must be a permutation of 0.." << rank - 1;
    seen[d] = true;
  }
  for (int64_t k = 0; k < rank; ++k)
    if (getType().getDimSize(k) != getInput().getType().getDimSize(dims[k]))
      return emitOpError() << "result type " << getType()
                           << " does not match the permuted input";
  return success();
}

AffineMap PermuteOp::getIndexMap() {
  // Result dim k reads input dim dims[k]: input index j = result index
  // inverse[j].
  ArrayRef<int64_t> dims = getDims();
  SmallVector<AffineExpr> results(dims.size());
  for (size_t k = 0; k < dims.size(); ++k)
    results[dims[k]] = getAffineDimExpr(k, getContext());
  return AffineMap::get(dims.size(), 0, results, getContext());
}

LogicalResult SliceOp::verify() {
  if (failed(verifyViewTypes(*this, getInput().getType(), getType())))
    return failure();
  RankedTensorType input = getInput().getType();
  int64_t dim = getDimAttr().getInt();
  if (dim < 0 || dim >= input.getRank())
    return emitOpError() << "dim " << dim << " out of range for " << input;
  int64_t size = input.getDimSize(dim);
  int64_t start = getStartAttr().getInt(), end = getEndAttr().getInt(),
          step = getStepAttr().getInt();
  if (step < 1 || start < 0 || end < start || end > size)
    return emitOpError() << "slice [" << start << ":" << end << ":" << step
                         << "] is not within dim " << dim << " of size "
                         << size << " with a positive step";
  SmallVector<int64_t> shape(input.getShape());
  shape[dim] = (end - start + step - 1) / step;
  if (ArrayRef<int64_t>(shape) != getType().getShape())
    return emitOpError() << "result type " << getType()
                         << " does not match the slice of " << input;
  return success();
}

AffineMap SliceOp::getIndexMap() {
  SmallVector<AffineExpr> results;
  for (int64_t k = 0; k < getType().getRank(); ++k) {
    AffineExpr d = getAffineDimExpr(k, getContext());
    results.push_back(k == static_cast<int64_t>(getDim())
                          ? d * getStepAttr().getInt() + getStartAttr().getInt()
                          : d);
  }
  return AffineMap::get(getType().getRank(), 0, results, getContext());
}

LogicalResult ScatterOp::verify() {
  auto full = cast<RankedTensorType>(getInput().getType());
  auto local = cast<RankedTensorType>(getType());
  if (getOwnerAttr().getInt() < 0)
    return emitOpError() << "owner rank must be non-negative";
  if (full.getElementType() != local.getElementType() ||
      full.getRank() != local.getRank() || full.getRank() == 0 ||
      full.getShape().drop_front() != local.getShape().drop_front())
    return emitOpError() << "result type " << local
                         << " is not a dim-0 shard of " << full;
  return success();
}

#include "dialects/tc/TcInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "dialects/tc/TcOps.cpp.inc"
