//===- FsdpSharding.cpp - the tc-fsdp pass --------------------------------===//
//
// Rewrites a tc program so that no rank ever holds a shardable parameter in
// full during init, and holds it in full during forward only between its
// tc.all_gather and tc.release. See Passes.td for the contract.
//
//===----------------------------------------------------------------------===//
#include "passes/InitChainFusion.h"
#include "passes/Passes.h"
#include "passes/TensorBytes.h"

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

int64_t paramBytes(ParamOp param) { return tensorBytes(param.getTensorType()); }

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
  if (isa<LoadOp>(chain->generator) && chain->hasViews)
    return materialize.emitOpError()
           << "init chain of parameter " << materialize.getParamAttr()
           << " applies views to a tc.load; only pointwise ops may follow a load";
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

/// A maximal run of ops that compute with one FSDP unit's parameters, with
/// no other unit's op in between. A unit is gathered around each of its
/// runs: the root unit, used by the embedding at the start and by the head
/// at the end, is gathered twice rather than held across the whole model,
/// so at most one unit (two with prefetch) is ever gathered.
struct UnitRun {
  std::string unit;
  SmallVector<OpOperand *> operands; // its reads of the unit's params
  Operation *first = nullptr, *last = nullptr;
  bool returned = false;                  // the function returns a param
};

/// Splits a block's uses of sharded parameters into unit runs.
SmallVector<UnitRun> collectUnitRuns(Block &block,
                                     const llvm::StringMap<ParamOp> &sharded) {
  SmallVector<UnitRun> runs;
  llvm::StringMap<size_t> openRun; // unit -> index of its current run
  std::string lastUnit;
  for (Operation &op : block) {
    for (OpOperand &operand : op.getOpOperands()) {
      auto use = operand.get().getDefiningOp<UseOp>();
      if (!use || !sharded.contains(use.getParam()))
        continue;
      ParamOp param = sharded.lookup(use.getParam());
      std::string unit = param.getUnit().value_or("root").str();
      auto it = openRun.find(unit);
      if (it == openRun.end() || lastUnit != unit) {
        openRun[unit] = runs.size();
        runs.emplace_back();
        runs.back().unit = unit;
        runs.back().first = &op;
      }
      UnitRun &run = runs[openRun[unit]];
      run.operands.push_back(&operand);
      run.last = &op;
      run.returned |= op.hasTrait<OpTrait::IsTerminator>();
      lastUnit = unit;
    }
  }
  return runs;
}

/// Gathers `reads` (some of a run's parameters, each with the type it is
/// read as) before `insertionPoint` and releases them after `releaseAfter`
/// (unless the function returns one of them); returns the release.
Operation *gatherParams(UnitRun &run,
                        ArrayRef<std::pair<std::string, Type>> reads,
                        Operation *insertionPoint, Operation *releaseAfter) {
  OpBuilder builder(insertionPoint);
  SmallVector<Attribute> symbols;
  SmallVector<Type> types;
  for (const auto &[name, type] : reads) {
    symbols.push_back(FlatSymbolRefAttr::get(builder.getContext(), name));
    types.push_back(type);
  }
  auto gather = builder.create<AllGatherOp>(run.first->getLoc(), types,
                                            builder.getArrayAttr(symbols),
                                            builder.getStringAttr(run.unit));
  for (OpOperand *operand : run.operands) {
    auto use = operand->get().getDefiningOp<UseOp>();
    if (!use) // an earlier group's gather reads it now
      continue;
    for (auto [i, read] : llvm::enumerate(reads))
      if (read.first == use.getParam() && read.second == use.getType())
        operand->set(gather.getResult(i));
  }
  if (run.returned)
    return releaseAfter;
  builder.setInsertionPointAfter(releaseAfter);
  return builder.create<ReleaseOp>(run.first->getLoc(), gather.getResults());
}

/// Gathers a run's parameters before `insertionPoint`: one tc.all_gather per
/// element type they are read in (one for most units), so that a gathered
/// buffer holds one dtype. A parameter read in another float type than its
/// own (master weights, tc-fold-param-casts) is converted as it is gathered.
void gatherRun(UnitRun &run, Operation *insertionPoint) {
  SmallVector<std::pair<std::string, Type>> reads; // in order of first use
  for (OpOperand *operand : run.operands) {
    auto use = operand->get().getDefiningOp<UseOp>();
    std::pair<std::string, Type> read{use.getParam().str(), use.getType()};
    if (!llvm::is_contained(reads, read))
      reads.push_back(read);
  }
  SmallVector<Type> elementTypes; // in order of first use
  for (const auto &read : reads)
    if (!llvm::is_contained(elementTypes, getElementTypeOrSelf(read.second)))
      elementTypes.push_back(getElementTypeOrSelf(read.second));
  Operation *releaseAfter = run.last; // releases in the gathers' order
  for (Type element : elementTypes) {
    SmallVector<std::pair<std::string, Type>> group;
    for (const auto &read : reads)
      if (getElementTypeOrSelf(read.second) == element)
        group.push_back(read);
    releaseAfter = gatherParams(run, group, insertionPoint, releaseAfter);
  }
}

/// Gathers every unit run of `func`. With `prefetch`, run k+1's gather is
/// issued when run k starts computing (after run k's own gather), so that
/// on a real device it overlaps run k's compute.
void gatherUnits(func::FuncOp func, const llvm::StringMap<ParamOp> &sharded,
                 bool prefetch) {
  if (func.empty())
    return;
  Block &block = func.front();
  SmallVector<UnitRun> runs = collectUnitRuns(block, sharded);
  for (auto [k, run] : llvm::enumerate(runs)) {
    Operation *insertionPoint = run.first;
    if (prefetch && k > 0)
      insertionPoint = runs[k - 1].first;
    gatherRun(run, insertionPoint);
  }
  // Every use of a sharded parameter now reads a gather.
  for (Operation &op : llvm::make_early_inc_range(block))
    if (auto use = dyn_cast<UseOp>(op); use && use->use_empty() &&
                                        sharded.contains(use.getParam()))
      use.erase();
}

/// `value` before the renames the joint graph gives it (reshapes to its
/// own type); each one passed is appended to `renames`.
Value beforeRenames(Value value, SmallVectorImpl<Operation *> &renames) {
  while (auto rename = value.getDefiningOp<ReshapeOp>()) {
    if (rename.getInput().getType() != value.getType())
      break;
    renames.push_back(rename);
    value = rename.getInput();
  }
  return value;
}

/// The gradient a reduce_scatter reads in place of `full`: the input of a
/// cast that widens it exactly (master weights' bfloat16 gradient converted
/// to its float32 parameter's dtype: autodiff's rule for the parameter's
/// cast) when nothing else reads the cast; the cast is appended to
/// `replaced`. The reduce_scatter widens each value itself, with the same
/// bytes, so the full-size float32 copy is never made. Otherwise `full`.
Value narrowGradient(Value full, SmallVectorImpl<Operation *> &replaced) {
  auto widen = full.getDefiningOp<TableOp>();
  if (!widen || widen.getOpName() != "cast" || widen.getInputs().size() != 1 ||
      !widen->hasOneUse())
    return full;
  Value input = widen.getInputs()[0];
  auto from = cast<RankedTensorType>(input.getType());
  auto to = cast<RankedTensorType>(full.getType());
  if (from.getShape() != to.getShape() ||
      !widensExactly(from.getElementType(), to.getElementType()))
    return full;
  replaced.push_back(widen);
  return input;
}

/// The full gradient `named` reduced into the shard of `param`: a
/// reduce_scatter right after the gradient is computed, so the full
/// gradient is freed there. A sum of two full gradients read nowhere else
/// (gradient accumulation adds its micro-steps' gradients:
/// compiler/GradientAccumulation.h), with `split`, becomes the sum of their
/// shards, so each micro-step's full gradient is freed as soon as it is
/// complete, as FSDP2 accumulates into sharded gradients. The ops it replaces
/// are appended to `replaced`, users first.
Value reduceIntoShard(Value named, ParamOp param, bool sum, bool split,
                      Location loc, SmallVectorImpl<Operation *> &replaced) {
  Value full = beforeRenames(named, replaced);
  auto add = full.getDefiningOp<AddOp>();
  if (split && add && add->hasOneUse() &&
      add.getLhs().getType() == full.getType() &&
      add.getRhs().getType() == full.getType()) {
    replaced.push_back(add);
    Value lhs = reduceIntoShard(add.getLhs(), param, sum, split, loc, replaced);
    Value rhs = reduceIntoShard(add.getRhs(), param, sum, split, loc, replaced);
    // Added as soon as both shards exist: the running sum and the new
    // shard become one buffer (the lowering adds in place into a dying
    // operand), not two for the rest of the micro-step.
    Operation *later = lhs.getDefiningOp()->isBeforeInBlock(rhs.getDefiningOp())
                           ? rhs.getDefiningOp()
                           : lhs.getDefiningOp();
    OpBuilder builder(later->getContext());
    builder.setInsertionPointAfter(later);
    return builder.create<AddOp>(add.getLoc(), param.getLocalType(), lhs, rhs);
  }
  full = narrowGradient(full, replaced);
  OpBuilder builder(param.getContext());
  builder.setInsertionPointAfterValue(full);
  return builder.create<ReduceScatterOp>(
      loc, param.getLocalType(), full,
      FlatSymbolRefAttr::get(param.getSymNameAttr()),
      sum ? builder.getUnitAttr() : UnitAttr());
}

/// Reduces the gradient `step` reads into the shard of `param`, right after
/// the gradient is computed (reduceIntoShard). With `sum` (data-parallel
/// training) the ranks' gradients are added, not averaged.
template <typename StepOp>
void reduceGradient(StepOp step, ParamOp param, bool sum, bool split) {
  Value named = step.getGrad();
  SmallVector<Operation *> replaced;
  Value shard =
      reduceIntoShard(named, param, sum, split, step.getLoc(), replaced);
  step.getGradMutable().assign(shard);
  // Clipping's norm reads the shard too: every rank sums its own rows.
  named.replaceUsesWithIf(
      shard, [](OpOperand &use) { return isa<GradNormOp>(use.getOwner()); });
  // The renames and sums nothing reads any more.
  for (Operation *op : replaced)
    if (op->use_empty())
      op->erase();
}

/// Reduces the gradient of every optimizer step of a sharded parameter. A
/// replicated parameter's gradient is the same on every rank and needs no
/// reduction, unless the ranks' gradients are shares to be summed (`sum`):
/// then it has no shard to be summed into, an error.
template <typename StepOp>
LogicalResult reduceGradients(func::FuncOp func,
                              const llvm::StringMap<ParamOp> &sharded, bool sum,
                              bool split) {
  LogicalResult result = success();
  func.walk([&](StepOp step) {
    if (ParamOp param = sharded.lookup(step.getParam()))
      return reduceGradient(step, param, sum, split);
    if (!sum)
      return;
    step.emitOpError() << "updates " << step.getParamAttr()
                       << ", which is not sharded (a 0-d or empty parameter): "
                          "its data-parallel gradient differs per rank and has "
                          "no shard to be summed into";
    result = failure();
  });
  return result;
}

struct TcFsdpPass : public tc::impl::TcFsdpBase<TcFsdpPass> {
  using TcFsdpBase::TcFsdpBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(verifyProgram(module)))
      return signalPassFailure();
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
    for (func::FuncOp func : module.getOps<func::FuncOp>()) {
      if (func.getSymName() == kInitFunctionName)
        continue;
      gatherUnits(func, sharded, prefetch);
      if (failed(reduceGradients<SgdStepOp>(func, sharded, sumGradients,
                                            splitSummedGradients)) ||
          failed(reduceGradients<AdamwStepOp>(func, sharded, sumGradients,
                                              splitSummedGradients)))
        return signalPassFailure();
    }
  }
};

} // namespace
