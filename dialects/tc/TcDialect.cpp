//===- TcDialect.cpp - the tc dialect and its attributes ------------------===//
#include "dialects/tc/TcDialect.h"
#include "dialects/tc/TcOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::tc;

#include "dialects/tc/TcDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/tc/TcAttrs.cpp.inc"

void TcDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/tc/TcOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/tc/TcAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// ShardAttr
//===----------------------------------------------------------------------===//

LogicalResult ShardAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                int64_t worldSize, int64_t chunkRows) {
  if (worldSize < 1)
    return emitError() << "world_size must be at least 1, got " << worldSize;
  if (chunkRows < 1)
    return emitError() << "chunk_rows must be at least 1, got " << chunkRows;
  return success();
}

RankedTensorType ShardAttr::getLocalType(RankedTensorType full) const {
  SmallVector<int64_t> shape(full.getShape());
  shape[0] = getChunkRows();
  return RankedTensorType::get(shape, full.getElementType());
}

ShardAttr ShardAttr::forWorldSize(MLIRContext *context, RankedTensorType full,
                                  int64_t worldSize) {
  int64_t rows = full.getDimSize(0);
  int64_t chunk = (rows + worldSize - 1) / worldSize;
  return ShardAttr::get(context, worldSize, chunk);
}
