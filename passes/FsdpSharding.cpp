//===- FsdpSharding.cpp - the tc-fsdp pass --------------------------------===//
//
// Rewrites a tc program so that no rank ever holds a shardable parameter in
// full during init, and holds it in full during forward only between its
// tc.all_gather and tc.release. See Passes.td for the contract.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/InitChainFusion.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>

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

/// A parameter whose chain starts with a non-shardable generator: computed
/// in full on `owner` and scattered.
struct OwnedParam {
  ParamOp param;
  MaterializeOp materialize;
  Value value;
  int64_t bytes = 0;
};

int64_t paramBytes(ParamOp param) {
  RankedTensorType type = param.getTensorType();
  return type.getNumElements() *
         static_cast<int64_t>(type.getElementTypeBitWidth() / 8);
}

/// Spreads owned parameters over ranks by size: largest first, each to the
/// rank holding the fewest owned bytes so far (ties: the lowest rank).
void assignOwners(SmallVectorImpl<OwnedParam> &owned, int64_t worldSize) {
  std::stable_sort(owned.begin(), owned.end(),
                   [](const OwnedParam &a, const OwnedParam &b) {
                     return a.bytes > b.bytes;
                   });
  std::vector<int64_t> load(worldSize, 0);
  for (OwnedParam &entry : owned) {
    int64_t owner = std::min_element(load.begin(), load.end()) - load.begin();
    load[owner] += entry.bytes;
    OpBuilder builder(entry.materialize);
    auto scatter = builder.create<ScatterOp>(
        entry.materialize.getLoc(), entry.param.getLocalType(), entry.value,
        builder.getI64IntegerAttr(owner));
    entry.materialize.getValueMutable().assign(scatter.getResult());
  }
}

/// Rewrites `materialize`'s chain so this rank computes only what it
/// stores; records non-shardable chains in `owned`.
LogicalResult shardInitChain(MaterializeOp materialize, ParamOp param,
                             SmallVectorImpl<OwnedParam> &owned) {
  FailureOr<InitChain> chain =
      collectInitChain(materialize.getValue(), materialize);
  if (failed(chain))
    return failure();
  if (isa<KaimingUniformOp, KaimingNormalOp, XavierUniformOp, XavierNormalOp>(
          chain->generator))
    return chain->generator->emitOpError()
           << "must be expanded by tc-expand-init before tc-fsdp";
  if (!isShardableGenerator(chain->generator)) {
    if (chain->hasViews)
      return materialize.emitOpError()
             << "init chain of parameter " << materialize.getParamAttr()
             << " applies views to a non-shardable "
             << chain->generator->getName().getStringRef()
             << "; only pointwise ops may follow it";
    if (param.getShard())
      owned.push_back({param, materialize, materialize.getValue(),
                       paramBytes(param)});
    return success();
  }
  OpBuilder builder(materialize);
  RankedTensorType full = param.getShard() ? param.getTensorType() : nullptr;
  Value fused = buildFusedChain(builder, *chain, param.getLocalType(), full);
  materialize.getValueMutable().assign(fused);
  return success();
}

/// Erases init ops the rewrite left without uses.
void eraseDeadInitOps(func::FuncOp init) {
  SmallVector<Operation *> ops;
  init.walk([&](Operation *op) { ops.push_back(op); });
  for (Operation *op : llvm::reverse(ops))
    if (op->use_empty() && op->getNumResults() > 0 && isPure(op))
      op->erase();
}

/// The forward uses of one FSDP unit's sharded parameters.
struct UnitUses {
  std::string unit;
  SmallVector<std::string> params; // in order of first use
  llvm::StringMap<SmallVector<UseOp>> uses;
  Operation *firstUse = nullptr;
};

/// Groups a block's uses of sharded parameters by unit, in order of the
/// units' first uses.
SmallVector<UnitUses> collectUnitUses(Block &block,
                                      const llvm::StringMap<ParamOp> &sharded) {
  SmallVector<UnitUses> units;
  llvm::StringMap<size_t> indexOf;
  for (Operation &op : block) {
    auto use = dyn_cast<UseOp>(op);
    if (!use || !sharded.contains(use.getParam()))
      continue;
    ParamOp param = sharded.lookup(use.getParam());
    std::string unit = param.getUnit().value_or("root").str();
    auto [it, inserted] = indexOf.try_emplace(unit, units.size());
    if (inserted) {
      units.emplace_back();
      units.back().unit = unit;
      units.back().firstUse = use;
    }
    UnitUses &entry = units[it->second];
    auto &list = entry.uses[use.getParam()];
    if (list.empty())
      entry.params.push_back(use.getParam().str());
    list.push_back(use);
  }
  return units;
}

/// Replaces a unit's tc.use ops with one all-gather before `insertionPoint`
/// and one release after the last use of any gathered value.
AllGatherOp gatherUnit(UnitUses &unit, Operation *insertionPoint) {
  OpBuilder builder(insertionPoint);
  SmallVector<Attribute> names;
  SmallVector<Type> types;
  for (const std::string &name : unit.params) {
    names.push_back(FlatSymbolRefAttr::get(builder.getContext(), name));
    types.push_back(unit.uses[name].front().getType());
  }
  Location loc = unit.firstUse->getLoc();
  auto gather = builder.create<AllGatherOp>(loc, types,
                                            builder.getArrayAttr(names),
                                            builder.getStringAttr(unit.unit));
  for (auto [name, result] : llvm::zip(unit.params, gather.getResults()))
    for (UseOp use : unit.uses[name]) {
      use.getResult().replaceAllUsesWith(result);
      use.erase();
    }

  Block *block = gather->getBlock();
  Operation *lastUser = gather;
  for (Value result : gather.getResults())
    for (Operation *user : result.getUsers()) {
      Operation *inBlock = block->findAncestorOpInBlock(*user);
      if (inBlock->hasTrait<OpTrait::IsTerminator>())
        return gather; // Returned: the gathered values stay live.
      if (lastUser->isBeforeInBlock(inBlock))
        lastUser = inBlock;
    }
  builder.setInsertionPointAfter(lastUser);
  builder.create<ReleaseOp>(loc, gather.getResults());
  return gather;
}

/// The first op that computes with a unit's parameters: where the unit
/// starts running.
Operation *unitStart(UnitUses &unit) {
  Operation *start = nullptr;
  for (auto &entry : unit.uses)
    for (UseOp use : entry.second)
      for (Operation *user : use->getUsers()) {
        Operation *inBlock = use->getBlock()->findAncestorOpInBlock(*user);
        if (!start || inBlock->isBeforeInBlock(start))
          start = inBlock;
      }
  return start;
}

/// Gathers every unit of `func` around its uses. With `prefetch`, unit
/// k+1's gather is issued when unit k starts computing (after unit k's own
/// gather), so that on a real device it overlaps unit k's compute.
void gatherUnits(func::FuncOp func, const llvm::StringMap<ParamOp> &sharded,
                 bool prefetch) {
  if (func.empty())
    return;
  SmallVector<UnitUses> units = collectUnitUses(func.front(), sharded);
  SmallVector<Operation *> starts;
  for (UnitUses &unit : units)
    starts.push_back(unitStart(unit));
  for (auto [k, unit] : llvm::enumerate(units)) {
    Operation *insertionPoint = unit.firstUse;
    if (prefetch && k > 0 && starts[k - 1] &&
        starts[k - 1]->isBeforeInBlock(insertionPoint))
      insertionPoint = starts[k - 1];
    gatherUnit(unit, insertionPoint);
  }
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

    llvm::StringMap<ParamOp> params;
    for (ParamOp param : module.getOps<ParamOp>())
      params[param.getSymName()] = param;
    SmallVector<MaterializeOp> materializes;
    module.walk([&](MaterializeOp op) { materializes.push_back(op); });
    SmallVector<OwnedParam> owned;
    for (MaterializeOp materialize : materializes)
      if (failed(shardInitChain(materialize,
                                params.lookup(materialize.getParam()), owned)))
        return signalPassFailure();
    assignOwners(owned, worldSize);
    if (auto init = module.lookupSymbol<func::FuncOp>(kInitFunctionName))
      eraseDeadInitOps(init);

    // With one rank the local shard is the whole parameter: no gather.
    if (worldSize == 1)
      return;
    module.walk([&](func::FuncOp func) {
      if (func.getSymName() != kInitFunctionName)
        gatherUnits(func, sharded, prefetch);
    });
  }
};

} // namespace
