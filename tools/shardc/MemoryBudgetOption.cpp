#include "tools/shardc/MemoryBudgetOption.h"

#include "compiler/Graph.h"
#include "runtime/RuntimeError.h"

#include "mlir/IR/Diagnostics.h"

#include <algorithm>
#include <iostream>

namespace shardc::cli {

bool applyMemoryBudget(int64_t budgetBytes, const AskedRun &asked, const std::string &model,
                       compiler::ShardOptions &options, const ContextCompiler &compile) {
  if (budgetBytes <= 0) return asked.fuse;
  const compiler::PlanCompiler quietly =
      [&](const compiler::PlanChoice &choice) -> std::optional<plan::Plan> {
    mlir::MLIRContext context;
    compiler::loadTcDialects(context);
    mlir::ScopedDiagnosticHandler silence(&context,
                                          [](mlir::Diagnostic &) { return mlir::success(); });
    compiler::ShardOptions trial = options;
    trial.recomputeActivations = choice.recompute;
    trial.prefetch = choice.prefetch;
    try {
      mlir::FailureOr<plan::Plan> plan = compile(context, choice, trial);
      if (mlir::failed(plan)) return std::nullopt;
      return std::move(*plan);
    } catch (const compiler::GraphError &) {  // a batch that does not split so
      return std::nullopt;
    } catch (const runtime::RuntimeError &) {
      return std::nullopt;
    }
  };
  std::optional<plan::Plan> asAsked =
      quietly({.worldSize = asked.worldSize,
               .recompute = options.recomputeActivations,
               .prefetch = options.prefetch,
               .fuse = asked.fuse,
               .accumulate = std::max<int64_t>(asked.accumulate, 1)});
  if (!asAsked) return asked.fuse;  // the command's own compilation says why
  compiler::MemoryBudget budget;
  budget.bytesPerRank = budgetBytes;
  budget.recomputing = options.recomputeActivations;
  budget.mayRecompute = asked.grad && !options.recomputeActivations;
  budget.prefetching = options.prefetch;
  budget.fusing = asked.fuse;
  budget.mayFuse = asked.grad && !asked.fuse;
  budget.accumulate = asked.accumulate;
  try {
    compiler::BudgetFit fit = compiler::fitMemoryBudget(std::move(*asAsked), budget, quietly);
    if (fit.note.empty()) return asked.fuse;
    // The note says which options the plan now stands for.
    std::string as;
    auto add = [&](const char *option) { as += (as.empty() ? "" : ", ") + std::string(option); };
    if (fit.choice.recompute && !options.recomputeActivations) add("--recompute-activations");
    if (fit.choice.fuse && !asked.fuse) add("--fuse-linear-cross-entropy");
    if (!fit.choice.prefetch && options.prefetch) add("no --prefetch");
    options.recomputeActivations = fit.choice.recompute;
    options.prefetch = fit.choice.prefetch;
    std::cerr << "shardc: note: " << fit.note << " (as " << as << ")\n";
    return fit.choice.fuse;
  } catch (const compiler::MemoryBudgetError &error) {
    throw compiler::MemoryBudgetError(model + ": " + error.what() + " (--memory-budget)");
  }
}

}  // namespace shardc::cli
