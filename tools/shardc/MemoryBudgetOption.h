// `--memory-budget SIZE` (docs/cli.md), for `shardc compile` and `shardc run`.
#pragma once

#include "compiler/Pipeline.h"
#include "runtime/Plan.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/LogicalResult.h"

#include <cstdint>
#include <functional>
#include <string>

namespace shardc::cli {

/// The command's own compilation: MODEL at `worldSize` with `options`, its
/// errors reported through `context`.
using ContextCompiler = std::function<mlir::FailureOr<plan::Plan>(
    mlir::MLIRContext &context, int64_t worldSize, const compiler::ShardOptions &options)>;

/// With a budget (bytes per rank; 0: none) and `grad` (a joint graph):
/// turns on options.recomputeActivations when the plan fits only so (a
/// note says so). Throws compiler::MemoryBudgetError, naming `model`, when
/// no plan at `worldSize` fits; the trial compilations print nothing (the
/// command's own compilation reports a model that does not compile).
void applyMemoryBudget(int64_t budgetBytes, bool grad, int64_t worldSize, const std::string &model,
                       compiler::ShardOptions &options, const ContextCompiler &compile);

}  // namespace shardc::cli
