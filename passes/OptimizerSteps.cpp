//===- OptimizerSteps.cpp - the tc-optimizer pass -------------------------===//
//
// Turns the gradients @forward returns into optimizer steps on the
// parameters (see Passes.td). The pass runs before tc-fsdp, on full types:
// tc-fsdp shards the optimizer state it creates like any parameter and
// reduces each gradient into its parameter's shard.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Regex.h"

namespace mlir::tc {
#define GEN_PASS_DEF_TCOPTIMIZER
#include "passes/Passes.h.inc"
} // namespace mlir::tc

using namespace mlir;
using namespace mlir::tc;

namespace {

constexpr llvm::StringLiteral kGradientPrefix = "grad.";
const llvm::StringRef kStatePrefix = shardc::plan::kOptimizerStatePrefix;
constexpr llvm::StringLiteral kNameAttr = "tc.name";
/// The @forward result clipping adds: the gradients' global norm.
constexpr llvm::StringLiteral kGradNormName = "grad_norm";
constexpr llvm::StringLiteral kStepName =
    "optim.step"; // the prefix, then "step"

/// A gradient @forward returns: result `index`, parameter `param`.
struct Gradient {
  unsigned index;
  ParamOp param;
  Value value;
};

/// Moves each step to right after the last op it must follow: the
/// definitions of its operands (its gradient, the clipping norm) and the
/// last read of its parameter, directly or through views of it (a later
/// read would see the updated value),
/// as torch's optimizer-in-backward applies a parameter's update as soon as
/// its gradient is complete. The step reads and writes only its own
/// parameter and state, so every value is what it was at the end; what
/// changes is that the gradient (its shard, after tc-fsdp) dies at its step
/// instead of living until the end of the backward. The step count
/// advances right before the first step.
void placeStepsEarly(func::FuncOp forward) {
  Block &block = forward.front();
  DenseMap<Operation *, int64_t> position;
  // The parameter each value shows: a tc.use, or a view of one (the
  // lowering makes a reshape an alias of its input, and a transpose read
  // by matmuls their operand flag: reading either reads the parameter).
  DenseMap<Value, StringRef> shows;
  llvm::StringMap<Operation *> lastRead; // parameter -> its last reader
  SmallVector<Operation *> steps;
  AdvanceStepOp advance;
  for (Operation &op : block) {
    position[&op] = static_cast<int64_t>(position.size());
    if (auto use = dyn_cast<UseOp>(op))
      shows[use.getResult()] = use.getParam();
    for (Value operand : op.getOperands()) {
      auto found = shows.find(operand);
      if (found == shows.end())
        continue;
      // A copy: inserting into `shows` below may move its entries.
      const StringRef param = found->second;
      lastRead[param] = &op;
      if (isa<ViewOpInterface>(op))
        shows[op.getResult(0)] = param;
    }
    if (isa<SgdStepOp, AdamwStepOp>(op))
      steps.push_back(&op);
    if (auto a = dyn_cast<AdvanceStepOp>(op))
      advance = a;
  }
  // In reverse, so that steps moved after the same op keep their order.
  for (Operation *step : llvm::reverse(steps)) {
    // The gradient's own views read by the step alone move with it: --grad
    // names each gradient by a reshape at the end of the joint graph.
    SmallVector<Operation *> views;
    Value gradient = step->getOperand(0);
    while (Operation *view = gradient.getDefiningOp()) {
      if (!isa<ViewOpInterface>(view) || !gradient.hasOneUse() ||
          view->getBlock() != &block)
        break;
      views.push_back(view);
      gradient = view->getOperand(0);
    }
    Operation *after = nullptr;
    auto later = [&](Operation *op) {
      if (op && op->getBlock() == &block &&
          (!after || position.lookup(op) > position.lookup(after)))
        after = op;
    };
    later(gradient.getDefiningOp());
    for (Value operand : step->getOperands().drop_front())
      later(operand.getDefiningOp());
    auto target = step->getAttrOfType<FlatSymbolRefAttr>("param");
    if (target)
      later(lastRead.lookup(target.getValue()));
    if (!after || after->hasTrait<OpTrait::IsTerminator>() ||
        position.lookup(after) >= position.lookup(step))
      continue;
    for (Operation *view : llvm::reverse(views)) {
      view->moveAfter(after);
      after = view;
    }
    step->moveAfter(after);
  }
  if (advance && !steps.empty()) {
    Operation *first = steps.front();
    for (Operation *step : steps)
      if (step->isBeforeInBlock(first))
        first = step;
    advance->moveBefore(first);
  }
}

struct TcOptimizerPass : public tc::impl::TcOptimizerBase<TcOptimizerPass> {
  using TcOptimizerBase::TcOptimizerBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    lastStateOf_.clear();
    if (failed(verifyProgram(module)) || failed(checkOptions(module)))
      return signalPassFailure();
    auto forward = module.lookupSymbol<func::FuncOp>(kForwardFunctionName);
    auto init = module.lookupSymbol<func::FuncOp>(kInitFunctionName);
    if (!forward || forward.empty() || !init || init.empty()) {
      emitError(module.getLoc())
          << "tc-optimizer: needs func @init and a func @forward with a body";
      return signalPassFailure();
    }
    for (ParamOp param : module.getOps<ParamOp>())
      if (shardc::plan::isOptimizerState(param.getSymName().str())) {
        param.emitOpError()
            << "uses the name prefix '" << kStatePrefix
            << "', which tc-optimizer keeps for optimizer state";
        return signalPassFailure();
      }
    SmallVector<Gradient> gradients = collectGradients(module, forward);
    if (maxGradNorm > 0)
      for (unsigned i = 0; i < forward.getNumResults(); ++i)
        if (auto name = forward.getResultAttrOfType<StringAttr>(i, kNameAttr);
            name && name.getValue() == kGradNormName) {
          forward.emitOpError()
              << "returns a result named '" << kGradNormName
              << "', the name clipping gives the gradients' norm; rename it";
          return signalPassFailure();
        }
    if (gradients.empty()) {
      forward.emitOpError()
          << "returns no gradient (a result named grad.P for a parameter @P); "
             "tc-optimizer needs the joint graph of --grad";
      return signalPassFailure();
    }

    auto ret = cast<func::ReturnOp>(forward.front().getTerminator());
    OpBuilder builder(ret);
    Location loc = ret.getLoc();
    // AdamW counts its steps; SGD only when a schedule reads the count.
    const bool scheduled = warmupSteps != 0 || decaySteps != 0;
    FlatSymbolRefAttr step;
    if (optimizer == "adamw" || scheduled) {
      step = addState(module, init, gradients.front().param, kStepName,
                      RankedTensorType::get({}, builder.getF32Type()),
                      /*isBuffer=*/true);
      builder.create<AdvanceStepOp>(loc, step);
    }
    const double decay = weightDecay >= 0 ? double(weightDecay)
                                          : (optimizer == "adamw" ? 0.01 : 0.0);
    // Clipping (torch.nn.utils.clip_grad_norm_ before optimizer.step()):
    // one norm of all the gradients, which every step reads.
    Value gradNorm;
    if (maxGradNorm > 0) {
      SmallVector<Value> values;
      SmallVector<Attribute> params;
      for (Gradient gradient : gradients) {
        values.push_back(gradient.value);
        params.push_back(
            FlatSymbolRefAttr::get(gradient.param.getSymNameAttr()));
      }
      gradNorm = builder.create<GradNormOp>(
          loc, RankedTensorType::get({}, builder.getF64Type()), values,
          builder.getArrayAttr(params));
    }
    const FloatAttr maxNorm = builder.getF64FloatAttr(maxGradNorm);
    FailureOr<SmallVector<bool>> exempt = decayExemptions(module, gradients);
    if (failed(exempt))
      return signalPassFailure();
    for (auto [index, gradient] : llvm::enumerate(gradients)) {
      ParamOp param = gradient.param;
      const double paramDecay = (*exempt)[index] ? 0.0 : decay;
      auto target = FlatSymbolRefAttr::get(param.getSymNameAttr());
      RankedTensorType type = param.getTensorType();
      auto stateOf = [&](StringRef what) {
        std::string name =
            (kStatePrefix + what + "." + param.getSymName()).str();
        return addState(module, init, param, name, type, /*isBuffer=*/false);
      };
      if (optimizer == "sgd") {
        FlatSymbolRefAttr buffer =
            momentum != 0 ? stateOf("momentum_buffer") : FlatSymbolRefAttr();
        builder.create<SgdStepOp>(
            loc, target, gradient.value, gradNorm, builder.getF64FloatAttr(lr),
            builder.getF64FloatAttr(momentum),
            builder.getF64FloatAttr(paramDecay), buffer, maxNorm, step,
            builder.getI64IntegerAttr(warmupSteps),
            builder.getI64IntegerAttr(decaySteps),
            builder.getF64FloatAttr(minLr),
            nesterov ? builder.getUnitAttr() : UnitAttr());
      } else {
        FlatSymbolRefAttr expAvg = stateOf("exp_avg");
        FlatSymbolRefAttr expAvgSq = stateOf("exp_avg_sq");
        builder.create<AdamwStepOp>(
            loc, target, gradient.value, gradNorm, expAvg, expAvgSq, step,
            builder.getF64FloatAttr(lr), builder.getF64FloatAttr(beta1),
            builder.getF64FloatAttr(beta2), builder.getF64FloatAttr(eps),
            builder.getF64FloatAttr(paramDecay),
            builder.getI64IntegerAttr(warmupSteps),
            builder.getI64IntegerAttr(decaySteps),
            builder.getF64FloatAttr(minLr), maxNorm);
      }
    }

    // The gradients are consumed: @forward no longer returns them.
    llvm::BitVector consumed(forward.getNumResults());
    for (const Gradient &gradient : gradients)
      consumed.set(gradient.index);
    ret->eraseOperands(consumed);
    forward.eraseResults(consumed);
    // The norm clipping used is returned, as the trainer's log shows it
    // (every rank holds the same value: tc.replicated).
    if (gradNorm) {
      const unsigned index = forward.getNumResults();
      ret->insertOperands(index, gradNorm);
      forward.insertResult(
          index, gradNorm.getType(),
          builder.getDictionaryAttr(
              {builder.getNamedAttr(kNameAttr,
                                    builder.getStringAttr(kGradNormName)),
               builder.getNamedAttr("tc.replicated", builder.getUnitAttr())}));
    }
    if (!stateFile.empty())
      resumeStepCounter(module, init);
    placeStepsEarly(forward);
  }

  LogicalResult checkOptions(ModuleOp module) {
    auto fail = [&](const Twine &message) {
      return emitError(module.getLoc()) << "tc-optimizer: " << message.str();
    };
    if (optimizer != "sgd" && optimizer != "adamw")
      return fail("optimizer must be sgd or adamw, got '" + optimizer + "'");
    if (!(lr > 0))
      return fail("the learning rate must be positive, got " +
                  std::to_string(double(lr)));
    if (momentum < 0)
      return fail("momentum must not be negative");
    if (optimizer == "adamw" && momentum != 0)
      return fail("momentum is SGD's; AdamW has beta1 and beta2");
    if (nesterov && (optimizer != "sgd" || momentum == 0))
      return fail("nesterov is SGD's Nesterov momentum; it needs momentum > 0");
    if (!(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1))
      return fail("betas must lie in [0, 1)");
    if (!(eps > 0))
      return fail("eps must be positive");
    if (warmupSteps < 0 || decaySteps < 0)
      return fail("warmup-steps and decay-steps must not be negative");
    if (!(minLr >= 0 && minLr <= lr))
      return fail("min-lr must lie in [0, lr]");
    if (minLr != 0 && decaySteps == 0)
      return fail("min-lr is where the decay ends; give decay-steps");
    if (!(maxGradNorm >= 0))
      return fail("max-grad-norm must not be negative (0: no clipping)");
    return success();
  }

  /// Per gradient: whether its parameter's name matches a no-weight-decay
  /// regex (anywhere in the name). A regex that is invalid or matches no
  /// updated parameter is an error.
  FailureOr<SmallVector<bool>> decayExemptions(ModuleOp module,
                                               ArrayRef<Gradient> gradients) {
    SmallVector<bool> exempt(gradients.size(), false);
    for (const std::string &pattern : noWeightDecay) {
      llvm::Regex regex(pattern);
      std::string error;
      if (!regex.isValid(error))
        return emitError(module.getLoc())
               << "tc-optimizer: no-weight-decay pattern '" << pattern
               << "' is not a valid regex: " << error;
      bool used = false;
      for (auto [i, gradient] : llvm::enumerate(gradients))
        if (regex.match(ParamOp(gradient.param).getSymName())) {
          exempt[i] = true;
          used = true;
        }
      if (!used)
        return emitError(module.getLoc())
               << "tc-optimizer: no-weight-decay pattern '" << pattern
               << "' matches no parameter the optimizer updates";
    }
    return exempt;
  }

  /// Results named grad.P for a (non-buffer) parameter @P, in result order.
  SmallVector<Gradient> collectGradients(ModuleOp module,
                                         func::FuncOp forward) {
    SmallVector<Gradient> gradients;
    auto ret = cast<func::ReturnOp>(forward.front().getTerminator());
    for (unsigned i = 0; i < forward.getNumResults(); ++i) {
      auto name = forward.getResultAttrOfType<StringAttr>(i, "tc.name");
      if (!name || !name.getValue().starts_with(kGradientPrefix))
        continue;
      auto param = module.lookupSymbol<ParamOp>(
          name.getValue().drop_front(kGradientPrefix.size()));
      if (param && !param.getIsBuffer())
        gradients.push_back({i, param, ret.getOperand(i)});
    }
    return gradients;
  }

  /// Declares optimizer state `name` (zero in @init, or loaded from the
  /// state file) and returns its
  /// symbol: a parameter's state follows it in creation order, a buffer
  /// (the step count) goes first in the module.
  FlatSymbolRefAttr addState(ModuleOp module, func::FuncOp init, ParamOp owner,
                             StringRef name, RankedTensorType type,
                             bool isBuffer) {
    OpBuilder builder(module.getContext());
    Operation *&after = lastStateOf_[owner];
    if (isBuffer)
      builder.setInsertionPointToStart(module.getBody());
    else
      builder.setInsertionPointAfter(after ? after : owner.getOperation());
    auto state = builder.create<ParamOp>(
        owner.getLoc(), name, type, owner.getDevice(),
        isBuffer ? StringAttr() : owner.getUnitAttr(), isBuffer, ShardAttr(),
        /*non_persistent=*/true, ArrayAttr());
    if (!isBuffer)
      after = state;
    builder.setInsertionPoint(init.front().getTerminator());
    Value initial =
        stateFile.empty()
            ? builder
                  .create<ZerosOp>(owner.getLoc(), type, TypeAttr(), TypeAttr(),
                                   AffineMapAttr())
                  .getResult()
            : builder
                  .create<LoadOp>(owner.getLoc(), type,
                                  builder.getStringAttr(stateFile),
                                  builder.getStringAttr(name), TypeAttr(),
                                  TypeAttr(), AffineMapAttr())
                  .getResult();
    builder.create<MaterializeOp>(
        owner.getLoc(), initial,
        FlatSymbolRefAttr::get(state.getSymNameAttr()));
    return FlatSymbolRefAttr::get(state.getSymNameAttr());
  }

  /// Dropout's step counter (the graph's rng.step buffer, docs/rng.md)
  /// read from the state file instead of its graph init, so that a resumed
  /// run draws the masks the straight run would. --save-optimizer writes it
  /// (runtime::optimizerStateView).
  void resumeStepCounter(ModuleOp module, func::FuncOp init) {
    auto counter = module.lookupSymbol<ParamOp>(shardc::plan::kRngStepBuffer);
    if (!counter)
      return;
    init.walk([&](MaterializeOp materialize) {
      if (materialize.getParam() != counter.getSymName())
        return;
      OpBuilder builder(materialize);
      Value loaded =
          builder.create<LoadOp>(materialize.getLoc(), counter.getTensorType(),
                                 builder.getStringAttr(stateFile),
                                 builder.getStringAttr(counter.getSymName()),
                                 TypeAttr(), TypeAttr(), AffineMapAttr());
      Operation *graphInit = materialize.getValue().getDefiningOp();
      materialize.getValueMutable().assign(loaded);
      if (graphInit && graphInit->use_empty())
        graphInit->erase();
    });
  }

  /// The last state parameter declared after each parameter.
  llvm::DenseMap<Operation *, Operation *> lastStateOf_;
};

} // namespace
