//===- InitChainFusion.cpp - init chains as one sharded generator ---------===//
#include "passes/InitChainFusion.h"

#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::tc;

FailureOr<InitChain> mlir::tc::collectInitChain(Value value,
                                                MaterializeOp materialize) {
  InitChain chain;
  while (true) {
    Operation *op = value.getDefiningOp();
    if (op && isa<GeneratorOpInterface>(op)) {
      chain.generator = op;
      break;
    }
    if (op && isa<ViewOpInterface>(op)) {
      chain.hasViews = true;
    } else if (!op || !isa<PointwiseInitOpInterface>(op)) {
      return materialize.emitOpError()
             << "init chain of parameter " << materialize.getParamAttr()
             << " reaches "
             << (op ? op->getName().getStringRef()
                    : StringRef("a block argument"))
             << "; an init chain is a generator followed by views and "
                "pointwise ops";
    }
    chain.steps.push_back(op);
    value = op->getOperand(0);
  }
  std::reverse(chain.steps.begin(), chain.steps.end());
  return chain;
}

/// The index map of all views of the chain: full result index -> generator
/// index.
static AffineMap composeViews(const InitChain &chain, int64_t rank,
                              MLIRContext *context) {
  AffineMap map = AffineMap::getMultiDimIdentityMap(rank, context);
  for (Operation *op : llvm::reverse(chain.steps))
    if (auto view = dyn_cast<ViewOpInterface>(op))
      map = view.getIndexMap().compose(map);
  return simplifyAffineMap(map);
}

Value mlir::tc::buildFusedChain(OpBuilder &builder, const InitChain &chain,
                                RankedTensorType localType,
                                RankedTensorType fullType) {
  MLIRContext *context = builder.getContext();
  RankedTensorType full = fullType ? fullType : localType;
  Operation *generator = builder.clone(*chain.generator);
  auto source = cast<RankedTensorType>(chain.generator->getResult(0).getType());
  generator->getResult(0).setType(localType);
  generator->removeAttr("full_type");
  generator->removeAttr("source_type");
  generator->removeAttr("index_map");
  if (fullType)
    generator->setAttr("full_type", TypeAttr::get(fullType));
  // Constant generators do not look at indices: views change nothing.
  bool constant = isa<FillOp, ZerosOp, OnesOp>(generator);
  if (chain.hasViews && !constant) {
    AffineMap map = composeViews(chain, full.getRank(), context);
    generator->setAttr("source_type", TypeAttr::get(source));
    generator->setAttr("index_map", AffineMapAttr::get(map));
  }
  Value value = generator->getResult(0);
  for (Operation *step : chain.steps) {
    if (!isa<PointwiseInitOpInterface>(step))
      continue;
    IRMapping mapping;
    mapping.map(step->getOperand(0), value);
    Operation *pointwise = builder.clone(*step, mapping);
    pointwise->getResult(0).setType(localType);
    value = pointwise->getResult(0);
  }
  return value;
}
