//===- FoldParamCasts.cpp - the tc-fold-param-casts pass ------------------===//
//
// A cast of a parameter read becomes, for each of its users, a read of the
// parameter in the cast's dtype right before that user (Passes.td). Master
// weights read this way are converted where they are used, and tc-fsdp
// gathers them in the compute dtype.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

namespace mlir::tc {
#define GEN_PASS_DEF_TCFOLDPARAMCASTS
#include "passes/Passes.h.inc"
} // namespace mlir::tc

using namespace mlir;
using namespace mlir::tc;

namespace {

/// `op` is a float-to-float cast of a whole parameter read.
UseOp castParamRead(TableOp op) {
  if (op.getOpName() != "cast" || op.getInputs().size() != 1)
    return nullptr;
  auto use = op.getInputs()[0].getDefiningOp<UseOp>();
  if (!use)
    return nullptr;
  auto from = cast<RankedTensorType>(use.getType());
  auto to = cast<RankedTensorType>(op.getResult().getType());
  if (!isa<FloatType>(from.getElementType()) ||
      !isa<FloatType>(to.getElementType()) || from.getShape() != to.getShape())
    return nullptr;
  return use;
}

struct TcFoldParamCastsPass
    : public tc::impl::TcFoldParamCastsBase<TcFoldParamCastsPass> {
  void runOnOperation() override {
    SmallVector<TableOp> casts;
    getOperation().walk([&](TableOp op) {
      if (castParamRead(op))
        casts.push_back(op);
    });
    for (TableOp op : casts) {
      UseOp use = castParamRead(op);
      for (OpOperand &operand : llvm::make_early_inc_range(op->getUses())) {
        OpBuilder builder(operand.getOwner());
        auto read = builder.create<UseOp>(op.getLoc(), op.getResult().getType(),
                                          use.getParamAttr());
        operand.set(read);
      }
      op->erase();
      if (use->use_empty())
        use->erase();
    }
  }
};

} // namespace
