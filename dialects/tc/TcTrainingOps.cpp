//===- TcTrainingOps.cpp - reduce_scatter and the optimizer steps ---------===//
//
// Their verifiers: a step's gradient has the layout its parameter is stored
// in, its optimizer state matches the parameter, and reduce_scatter turns a
// sharded parameter's full gradient into that parameter's shard.
//
//===----------------------------------------------------------------------===//
#include "dialects/tc/TcOps.h"

using namespace mlir;
using namespace mlir::tc;

namespace {

/// `state` has `param`'s full type and sharding (the same rows per rank).
LogicalResult verifyStateLike(Operation *op, ParamOp param,
                              FlatSymbolRefAttr name,
                              SymbolTableCollection &symbolTable) {
  FailureOr<ParamOp> state = lookupParam(op, name, symbolTable);
  if (failed(state))
    return failure();
  if (state->getTensorType() != param.getTensorType() ||
      state->getLocalType() != param.getLocalType())
    return op->emitOpError()
           << "optimizer state " << name << " (" << state->getLocalType()
           << " stored) must have the type and sharding of parameter "
           << param.getSymName() << " (" << param.getLocalType() << " stored)";
  return success();
}

/// The parameter a step updates, with `grad` in its stored layout.
FailureOr<ParamOp> verifyStepTarget(Operation *op, FlatSymbolRefAttr name,
                                    Type grad,
                                    SymbolTableCollection &symbolTable) {
  FailureOr<ParamOp> param = lookupParam(op, name, symbolTable);
  if (failed(param))
    return failure();
  if (param->getIsBuffer())
    return op->emitOpError()
           << "updates " << name << ", a buffer; optimizers update parameters";
  if (grad != param->getLocalType())
    return op->emitOpError()
           << "gradient type " << grad << " differs from the type " << name
           << " is stored in (" << param->getLocalType()
           << "); a sharded parameter's gradient is reduced into its shard "
              "with tc.reduce_scatter";
  return param;
}

/// An optimizer's step count: a 0-d floating parameter.
LogicalResult verifyStepCount(Operation *op, FlatSymbolRefAttr name,
                              SymbolTableCollection &symbolTable) {
  FailureOr<ParamOp> step = lookupParam(op, name, symbolTable);
  if (failed(step))
    return failure();
  if (step->getTensorType().getRank() != 0 ||
      !isa<FloatType>(step->getTensorType().getElementType()))
    return op->emitOpError()
           << "step count " << name << " must be a 0-d floating buffer";
  return success();
}

} // namespace

bool mlir::tc::widensExactly(Type from, Type to) {
  if (from == to)
    return true;
  if (from.isBF16() || from.isF16())
    return to.isF32() || to.isF64();
  return from.isF32() && to.isF64();
}

LogicalResult
ReduceScatterOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<ParamOp> param = lookupParam(*this, getParamAttr(), symbolTable);
  if (failed(param))
    return failure();
  auto shard = param->getShardAttr();
  if (!shard)
    return emitOpError() << "parameter " << getParamAttr()
                         << " is not sharded; its gradient needs no reduction";
  auto full = cast<RankedTensorType>(getFull().getType());
  if (full.getShape() != param->getTensorType().getShape() ||
      getShard().getType() != param->getLocalType())
    return emitOpError() << "reduces " << getFull().getType() << " into "
                         << getShard().getType() << ", but parameter "
                         << getParamAttr() << " is " << param->getTensorType()
                         << " stored as " << param->getLocalType();
  // A master weight's gradient is reduced as computed (bfloat16) into its
  // float32 shard: the same bytes as converting it first.
  if (!widensExactly(full.getElementType(),
                     param->getTensorType().getElementType()))
    return emitOpError() << "reduces a " << full.getElementType()
                         << " gradient into parameter " << getParamAttr()
                         << " of " << param->getTensorType().getElementType()
                         << ", which does not hold every "
                         << full.getElementType() << " value";
  return success();
}

/// A step clips by the norm operand exactly when max_grad_norm > 0.
static LogicalResult verifyClip(Operation *op, Value gradNorm,
                                APFloat maxGradNorm) {
  const double max = maxGradNorm.convertToDouble();
  if (!(max >= 0))
    return op->emitOpError() << "max_grad_norm must not be negative";
  if ((max > 0) != bool(gradNorm))
    return op->emitOpError() << "clips with clip(%norm) and max_grad_norm > 0 "
                                "together, or neither";
  return success();
}

/// A learning-rate schedule's attributes; for SGD, `hasStep`: a schedule
/// reads a step count, and only a schedule does.
static LogicalResult verifySchedule(Operation *op, APFloat lr,
                                    int64_t warmupSteps, int64_t decaySteps,
                                    APFloat minLr,
                                    std::optional<bool> hasStep) {
  const double min = minLr.convertToDouble();
  if (warmupSteps < 0 || decaySteps < 0)
    return op->emitOpError()
           << "warmup_steps and decay_steps must not be negative";
  if (!(min >= 0 && min <= lr.convertToDouble()))
    return op->emitOpError() << "min_lr must lie in [0, lr], got " << min;
  if (hasStep && (warmupSteps > 0 || decaySteps > 0) != *hasStep)
    return op->emitOpError() << "a step count goes with a learning-rate "
                                "schedule (warmup_steps or decay_steps), and "
                                "only then";
  return success();
}

LogicalResult GradNormOp::verify() {
  if (getGrads().size() != getParams().size())
    return emitOpError() << "has " << getGrads().size() << " gradients for "
                         << getParams().size() << " parameters";
  if (getGrads().empty())
    return emitOpError() << "needs at least one gradient";
  return success();
}

LogicalResult GradNormOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  for (auto [grad, name] : llvm::zip(getGrads(), getParams())) {
    auto symbol = cast<FlatSymbolRefAttr>(name);
    if (failed(verifyStepTarget(*this, symbol, grad.getType(), symbolTable)))
      return failure();
  }
  return success();
}

LogicalResult SgdStepOp::verify() {
  if (failed(verifyClip(*this, getGradNorm(), getMaxGradNorm())))
    return failure();
  if (!(getLr().convertToDouble() > 0))
    return emitOpError() << "learning rate must be positive";
  if (getMomentum().convertToDouble() < 0 ||
      getWeightDecay().convertToDouble() < 0)
    return emitOpError() << "momentum and weight decay must not be negative";
  if ((getMomentum().convertToDouble() != 0) != bool(getMomentumBuffer()))
    return emitOpError()
           << "a momentum buffer goes with a non-zero momentum, and only then";
  if (getNesterov() && getMomentum().convertToDouble() == 0)
    return emitOpError() << "Nesterov momentum needs a non-zero momentum";
  return verifySchedule(*this, getLr(), getWarmupStepsAttr().getInt(),
                        getDecayStepsAttr().getInt(), getMinLr(),
                        bool(getStepAttr()));
}

LogicalResult SgdStepOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<ParamOp> param =
      verifyStepTarget(*this, getParamAttr(), getGrad().getType(), symbolTable);
  if (failed(param))
    return failure();
  if (auto buffer = getMomentumBufferAttr())
    if (failed(verifyStateLike(*this, *param, buffer, symbolTable)))
      return failure();
  if (auto step = getStepAttr())
    return verifyStepCount(*this, step, symbolTable);
  return success();
}

LogicalResult AdamwStepOp::verify() {
  if (failed(verifyClip(*this, getGradNorm(), getMaxGradNorm())))
    return failure();
  auto d = [](APFloat value) { return value.convertToDouble(); };
  if (!(d(getLr()) > 0) || !(d(getEps()) > 0) || d(getWeightDecay()) < 0)
    return emitOpError() << "learning rate and eps must be positive and "
                            "weight decay not negative";
  for (double beta : {d(getBeta1()), d(getBeta2())})
    if (!(beta >= 0 && beta < 1))
      return emitOpError() << "betas must lie in [0, 1), got " << beta;
  return verifySchedule(*this, getLr(), getWarmupStepsAttr().getInt(),
                        getDecayStepsAttr().getInt(), getMinLr(), std::nullopt);
}

LogicalResult
AdamwStepOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<ParamOp> param =
      verifyStepTarget(*this, getParamAttr(), getGrad().getType(), symbolTable);
  if (failed(param) ||
      failed(verifyStateLike(*this, *param, getExpAvgAttr(), symbolTable)) ||
      failed(verifyStateLike(*this, *param, getExpAvgSqAttr(), symbolTable)))
    return failure();
  return verifyStepCount(*this, getStepAttr(), symbolTable);
}

LogicalResult
AdvanceStepOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<ParamOp> counter =
      lookupParam(*this, getCounterAttr(), symbolTable);
  if (failed(counter))
    return failure();
  if (!counter->getIsBuffer() || counter->getTensorType().getRank() != 0 ||
      !isa<FloatType>(counter->getTensorType().getElementType()))
    return emitOpError() << "step count " << getCounterAttr()
                         << " must be a 0-d floating buffer";
  return success();
}
