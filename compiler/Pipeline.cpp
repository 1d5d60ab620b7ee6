//===- Pipeline.cpp - graph file to sharded IR to Plan --------------------===//
#include "compiler/Pipeline.h"
#include "compiler/GraphToTc.h"
#include "compiler/LowerToPlan.h"
#include "passes/Passes.h"

#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;

namespace shardc::compiler {

void loadTcDialects(MLIRContext &context) {
  context.loadDialect<tc::TcDialect, func::FuncDialect>();
}

LogicalResult shardModule(ModuleOp module, int64_t worldSize,
                          const ShardOptions &shardOptions,
                          const OptimizerOptions *optimizer) {
  if (failed(verify(module)))
    return failure();
  PassManager passes(module.getContext());
  passes.addPass(tc::createTcVerifyProgram());
  passes.addPass(tc::createTcExpandInit());
  tc::TcAssignUnitsOptions unitOptions;
  unitOptions.patterns = shardOptions.unitPatterns;
  passes.addPass(tc::createTcAssignUnits(unitOptions));
  passes.addPass(tc::createTcFoldParamCasts());
  if (shardOptions.recomputeActivations)
    passes.addPass(tc::createTcRecomputeActivations());
  if (optimizer) {
    tc::TcOptimizerOptions step;
    step.optimizer = optimizer->optimizer;
    step.lr = optimizer->lr;
    step.momentum = optimizer->momentum;
    step.nesterov = optimizer->nesterov;
    step.weightDecay = optimizer->weightDecay;
    step.beta1 = optimizer->beta1;
    step.beta2 = optimizer->beta2;
    step.eps = optimizer->eps;
    step.warmupSteps = optimizer->warmupSteps;
    step.decaySteps = optimizer->decaySteps;
    step.minLr = optimizer->minLr;
    step.maxGradNorm = optimizer->maxGradNorm;
    step.noWeightDecay = optimizer->noWeightDecay;
    step.stateFile = optimizer->stateFile;
    passes.addPass(tc::createTcOptimizer(step));
  }
  if (worldSize > 1 && shardOptions.narrowUnitRuns) // N = 1 gathers nothing
    passes.addPass(tc::createTcNarrowUnitRuns());
  tc::TcFsdpOptions options;
  options.worldSize = worldSize;
  options.prefetch = shardOptions.prefetch;
  options.sumGradients = shardOptions.sumGradients;
  options.splitSummedGradients = shardOptions.splitSummedGradients;
  passes.addPass(tc::createTcFsdp(options));
  return passes.run(module);
}

FailureOr<plan::Plan> compileToPlan(const Graph &graph, int64_t worldSize,
                                    MLIRContext &context,
                                    const ShardOptions &shardOptions,
                                    const OptimizerOptions *optimizer) {
  OwningOpRef<ModuleOp> module = buildTcModule(graph, context);
  if (failed(shardModule(*module, worldSize, shardOptions, optimizer)))
    return failure();
  return lowerToPlan(*module);
}

} // namespace shardc::compiler
