#include "tools/shardc/MemoryBudgetOption.h"

#include "compiler/Graph.h"
#include "compiler/MemoryBudget.h"
#include "runtime/RuntimeError.h"

#include "mlir/IR/Diagnostics.h"

#include <iostream>

namespace shardc::cli {

void applyMemoryBudget(int64_t budgetBytes, bool grad, int64_t worldSize, const std::string &model,
                       compiler::ShardOptions &options, const ContextCompiler &compile) {
  if (budgetBytes <= 0) return;
  const compiler::PlanCompiler quietly = [&](int64_t ranks,
                                             bool recompute) -> std::optional<plan::Plan> {
    mlir::MLIRContext context;
    compiler::loadTcDialects(context);
    mlir::ScopedDiagnosticHandler silence(&context,
                                          [](mlir::Diagnostic &) { return mlir::success(); });
    compiler::ShardOptions trial = options;
    trial.recomputeActivations = recompute;
    try {
      mlir::FailureOr<plan::Plan> plan = compile(context, ranks, trial);
      if (mlir::failed(plan)) return std::nullopt;
      return std::move(*plan);
    } catch (const compiler::GraphError &) {  // a batch that does not split so
      return std::nullopt;
    } catch (const runtime::RuntimeError &) {
      return std::nullopt;
    }
  };
  std::optional<plan::Plan> asAsked = quietly(worldSize, options.recomputeActivations);
  if (!asAsked) return;  // the command's own compilation says why
  compiler::MemoryBudget budget;
  budget.bytesPerRank = budgetBytes;
  budget.recomputing = options.recomputeActivations;
  budget.mayRecompute = grad && !options.recomputeActivations;
  try {
    compiler::BudgetFit fit = compiler::fitMemoryBudget(std::move(*asAsked), budget, quietly);
    if (fit.recomputed) {
      options.recomputeActivations = true;
      std::cerr << "shardc: note: " << fit.note << " (--recompute-activations)\n";
    }
  } catch (const compiler::MemoryBudgetError &error) {
    throw compiler::MemoryBudgetError(model + ": " + error.what() + " (--memory-budget)");
  }
}

}  // namespace shardc::cli
