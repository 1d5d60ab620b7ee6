//===- TcOps.cpp - tc dialect operations ----------------------------------===//
#include "dialects/tc/TcOps.h"
#include "dialects/tc/Device.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Dialect/Traits.h"

using namespace mlir;
using namespace mlir::tc;

/// Looks up the tc.param a symbol user names, or reports it undefined.
static FailureOr<ParamOp> lookupParam(Operation *user,
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
  // Program-wide rules are checked once per module, from its first param,
  // so that verification stays linear in the number of parameters.
  Operation *op = getOperation();
  for (Operation &sibling : *op->getBlock()) {
    if (isa<ParamOp>(sibling)) {
      if (&sibling == op)
        return verifyProgram(cast<ModuleOp>(op->getParentOp()));
      break;
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// UseOp, MaterializeOp, AllGatherOp, ReleaseOp
//===----------------------------------------------------------------------===//

LogicalResult UseOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<ParamOp> param = lookupParam(*this, getParamAttr(), symbolTable);
  if (failed(param))
    return failure();
  if (getType() != param->getTensorType())
    return emitOpError() << "result type " << getType()
                         << " differs from the type of parameter "
                         << getParamAttr() << " (" << param->getTensorType()
                         << ")";
  if (auto shard = param->getShardAttr(); shard && shard.getWorldSize() > 1)
    return emitOpError() << "parameter " << getParamAttr()
                         << " is sharded over " << shard.getWorldSize()
                         << " ranks; read it with tc.all_gather";
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
  FailureOr<ParamOp> param = lookupParam(*this, getParamAttr(), symbolTable);
  if (failed(param))
    return failure();
  if (!param->getShard())
    return emitOpError() << "parameter " << getParamAttr()
                         << " is not sharded; read it with tc.use";
  if (getType() != param->getTensorType())
    return emitOpError() << "result type " << getType()
                         << " differs from the type of parameter "
                         << getParamAttr() << " (" << param->getTensorType()
                         << ")";
  return success();
}

LogicalResult ReleaseOp::verify() {
  if (!getValue().getDefiningOp<AllGatherOp>())
    return emitOpError() << "can only release the result of tc.all_gather";
  return success();
}

//===----------------------------------------------------------------------===//
// Generators
//===----------------------------------------------------------------------===//

/// A sharded generator's result must be a dim-0 slab of its full type.
static LogicalResult verifyGenerator(Operation *op, Type resultType,
                                     std::optional<Type> fullType) {
  auto result = cast<RankedTensorType>(resultType);
  if (!result.hasStaticShape())
    return op->emitOpError() << "result type " << result
                             << " must have a static shape";
  if (!fullType)
    return success();
  auto full = cast<RankedTensorType>(*fullType);
  if (full.getElementType() != result.getElementType() ||
      full.getRank() != result.getRank() || full.getRank() == 0 ||
      !full.hasStaticShape() ||
      full.getShape().drop_front() != result.getShape().drop_front() ||
      result.getDimSize(0) > full.getDimSize(0))
    return op->emitOpError()
           << "result type " << result << " is not a dim-0 shard of "
           << full << " (same element type and trailing dims, at most "
           << "as many rows)";
  return success();
}

LogicalResult FillOp::verify() {
  return verifyGenerator(*this, getType(), getFullType());
}
LogicalResult ZerosOp::verify() {
  return verifyGenerator(*this, getType(), getFullType());
}
LogicalResult OnesOp::verify() {
  return verifyGenerator(*this, getType(), getFullType());
}

//===----------------------------------------------------------------------===//
// AddOp
//===----------------------------------------------------------------------===//

LogicalResult AddOp::verify() {
  auto lhs = cast<RankedTensorType>(getLhs().getType());
  auto rhs = cast<RankedTensorType>(getRhs().getType());
  auto result = cast<RankedTensorType>(getType());
  if (lhs.getElementType() != rhs.getElementType() ||
      lhs.getElementType() != result.getElementType())
    return emitOpError() << "element types differ: " << lhs << ", " << rhs
                         << " -> " << result;
  SmallVector<int64_t> shape;
  if (!OpTrait::util::getBroadcastedShape(lhs.getShape(), rhs.getShape(),
                                          shape))
    return emitOpError() << "shapes " << lhs << " and " << rhs
                         << " do not broadcast";
  if (ArrayRef<int64_t>(shape) != result.getShape())
    return emitOpError() << "result type " << result
                         << " is not the broadcast shape of " << lhs
                         << " and " << rhs;
  return success();
}

#define GET_OP_CLASSES
#include "dialects/tc/TcOps.cpp.inc"
