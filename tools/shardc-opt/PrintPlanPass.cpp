//===- PrintPlanPass.cpp - -tc-print-plan: the lowering, for lit ----------===//
//
// Lowers the module (after tc-fsdp: every parameter sharded or replicated)
// to the runtime Plan and prints its text form (runtime/PlanText.h) to
// stdout, so FileCheck tests can check buffer assignment, aliases and frees
// of hand-written sharded IR. The module itself is left unchanged (run with
// -o /dev/null to see the plan alone). A lowering error is a diagnostic at
// the op's location and fails the pass.
//
//===----------------------------------------------------------------------===//
#include "tools/shardc-opt/PrintPlanPass.h"

#include "compiler/LowerToPlan.h"
#include "runtime/PlanText.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "llvm/Support/raw_ostream.h"

namespace {

struct PrintPlanPass
    : public mlir::PassWrapper<PrintPlanPass, mlir::OperationPass<mlir::ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(PrintPlanPass)

  llvm::StringRef getArgument() const final { return "tc-print-plan"; }
  llvm::StringRef getDescription() const final {
    return "Lower a sharded tc module to the runtime Plan and print it (text form)";
  }
  void runOnOperation() override {
    mlir::FailureOr<shardc::plan::Plan> plan = shardc::compiler::lowerToPlan(getOperation());
    if (mlir::failed(plan))
      return signalPassFailure();
    llvm::outs() << shardc::runtime::planToText(*plan);
    llvm::outs().flush();
    markAllAnalysesPreserved();
  }
};

} // namespace

void shardc::registerPrintPlanPass() { mlir::PassRegistration<PrintPlanPass>(); }
