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
                          const ShardOptions &shardOptions) {
  if (failed(verify(module)))
    return failure();
  PassManager passes(module.getContext());
  passes.addPass(tc::createTcVerifyProgram());
  passes.addPass(tc::createTcExpandInit());
  tc::TcAssignUnitsOptions unitOptions;
  unitOptions.patterns = shardOptions.unitPatterns;
  passes.addPass(tc::createTcAssignUnits(unitOptions));
  tc::TcFsdpOptions options;
  options.worldSize = worldSize;
  options.prefetch = shardOptions.prefetch;
  passes.addPass(tc::createTcFsdp(options));
  return passes.run(module);
}

FailureOr<plan::Plan> compileToPlan(const Graph &graph, int64_t worldSize,
                                    MLIRContext &context,
                                    const ShardOptions &shardOptions) {
  OwningOpRef<ModuleOp> module = buildTcModule(graph, context);
  if (failed(shardModule(*module, worldSize, shardOptions)))
    return failure();
  return lowerToPlan(*module);
}

} // namespace shardc::compiler
