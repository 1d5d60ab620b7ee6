//===- FsdpSharding.cpp - the tc-fsdp pass --------------------------------===//
//
// Rewrites a tc program so that no rank ever holds a shardable parameter in
// full during init, and holds it in full during forward only between its
// tc.all_gather and tc.release. See Passes.td for the contract.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

namespace mlir::tc {
#define GEN_PASS_DEF_TCFSDP
#include "passes/Passes.h.inc"
} // namespace mlir::tc

using namespace mlir;
using namespace mlir::tc;

namespace {

/// True if FSDP shards this parameter; the others stay replicated.
bool isShardable(ParamOp param) {
  RankedTensorType type = param.getTensorType();
  return !param.getIsBuffer() && type.getRank() >= 1 && type.getDimSize(0) > 0;
}

/// Rewrites the generator that feeds `materialize` to produce only the
/// local shard. A generator shared by several materializes is cloned, so
/// that each parameter gets its own sharded generator.
LogicalResult shardInitChain(MaterializeOp materialize, ParamOp param) {
  Operation *producer = materialize.getValue().getDefiningOp();
  if (!producer || !isa<FillOp, ZerosOp, OnesOp>(producer))
    return materialize.emitOpError()
           << "init chain of parameter " << materialize.getParamAttr()
           << " is not shardable: its value comes from "
           << (producer ? producer->getName().getStringRef()
                        : StringRef("a block argument"))
           << ", and tc-fsdp shards only generators (fill, zeros, ones)";
  if (!producer->hasOneUse()) {
    OpBuilder builder(materialize);
    producer = builder.clone(*producer);
    materialize.getValueMutable().assign(producer->getResult(0));
  }
  RankedTensorType full = param.getTensorType();
  producer->getResult(0).setType(param.getLocalType());
  producer->setAttr("full_type", TypeAttr::get(full));
  return success();
}

/// The op in `block` that is, or contains, `op`.
Operation *ancestorIn(Block *block, Operation *op) {
  return block->findAncestorOpInBlock(*op);
}

/// Replaces a tc.use of a sharded parameter with an all-gather and frees the
/// gathered buffer right after its last use in the block.
void gatherAroundUses(UseOp use) {
  OpBuilder builder(use);
  auto gather = builder.create<AllGatherOp>(use.getLoc(), use.getType(),
                                            use.getParamAttr());
  use.getResult().replaceAllUsesWith(gather.getResult());
  use.erase();

  Block *block = gather->getBlock();
  Operation *lastUser = gather;
  for (Operation *user : gather->getUsers()) {
    Operation *inBlock = ancestorIn(block, user);
    if (inBlock->hasTrait<OpTrait::IsTerminator>())
      return; // The function returns the gathered value: it stays live.
    if (lastUser->isBeforeInBlock(inBlock))
      lastUser = inBlock;
  }
  builder.setInsertionPointAfter(lastUser);
  builder.create<ReleaseOp>(gather.getLoc(), gather.getResult());
}

struct TcFsdpPass : public tc::impl::TcFsdpBase<TcFsdpPass> {
  using TcFsdpBase::TcFsdpBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (worldSize < 1) {
      emitError(module.getLoc())
          << "tc-fsdp: world-size must be at least 1, got "
          << static_cast<int64_t>(worldSize);
      return signalPassFailure();
    }

    // The world size is a property of the whole program, also when every
    // parameter happens to be replicated.
    module->setAttr("tc.world_size",
                    IntegerAttr::get(IntegerType::get(&getContext(), 64),
                                     static_cast<int64_t>(worldSize)));

    llvm::StringMap<ParamOp> sharded;
    for (ParamOp param : module.getOps<ParamOp>()) {
      if (param.getShard()) {
        param.emitOpError() << "is already sharded; tc-fsdp runs once";
        return signalPassFailure();
      }
      if (!isShardable(param))
        continue;
      param.setShardAttr(ShardAttr::forWorldSize(
          &getContext(), param.getTensorType(), worldSize));
      sharded[param.getSymName()] = param;
    }

    bool failed = false;
    module.walk([&](MaterializeOp materialize) {
      auto it = sharded.find(materialize.getParam());
      if (it != sharded.end() &&
          mlir::failed(shardInitChain(materialize, it->second)))
        failed = true;
    });
    if (failed)
      return signalPassFailure();

    // With one rank the local shard is the whole parameter: no gather.
    if (worldSize == 1)
      return;
    SmallVector<UseOp> uses;
    module.walk([&](UseOp use) {
      if (sharded.contains(use.getParam()))
        uses.push_back(use);
    });
    for (UseOp use : uses)
      gatherAroundUses(use);
  }
};

} // namespace
