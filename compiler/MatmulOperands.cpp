//===- MatmulOperands.cpp - transposes a matmul reads in place ------------===//
#include "compiler/MatmulOperands.h"
#include "dialects/tc/TcOps.h"

#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace shardc::compiler {

bool swapsLastTwoDims(Operation *op) {
  auto view = dyn_cast<tc::ViewOpInterface>(op);
  if (!view || !isa<tc::TransposeOp, tc::PermuteOp>(op))
    return false;
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!type || type.getRank() < 2)
    return false;
  // Result index (.., i, j) reads source index (.., j, i).
  const int64_t rank = type.getRank();
  AffineMap map = view.getIndexMap();
  if (map.getNumDims() != rank || map.getNumResults() != rank)
    return false;
  for (int64_t k = 0; k < rank; ++k) {
    const int64_t from = k == rank - 2   ? rank - 1
                         : k == rank - 1 ? rank - 2
                                         : k;
    auto dim = dyn_cast<AffineDimExpr>(map.getResult(k));
    if (!dim || dim.getPosition() != from)
      return false;
  }
  return true;
}

bool matmulsReadTransposeInPlace(Operation *op) {
  if (!swapsLastTwoDims(op) || op->use_empty())
    return false;
  Operation *last = nullptr;
  for (Operation *user : op->getUsers()) {
    if (!isa<tc::MatmulOp>(user) || user->getBlock() != op->getBlock())
      return false;
    if (!last || last->isBeforeInBlock(user))
      last = user;
  }
  for (Operation *between = op->getNextNode(); between && between != last;
       between = between->getNextNode())
    if (isa<tc::ReleaseOp, tc::UpdateBufferOp, tc::SgdStepOp, tc::AdamwStepOp,
            tc::AdvanceStepOp>(between))
      return false;
  return true;
}

} // namespace shardc::compiler
