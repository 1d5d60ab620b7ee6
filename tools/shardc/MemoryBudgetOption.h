// `--memory-budget SIZE` (docs/cli.md), for `shardc compile` and `shardc run`.
#pragma once

#include "compiler/MemoryBudget.h"
#include "compiler/Pipeline.h"
#include "runtime/Plan.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/LogicalResult.h"

#include <cstdint>
#include <functional>
#include <string>

namespace shardc::cli {

/// The command's own compilation of MODEL as `choice` says (its world size,
/// its micro-steps for data-parallel training and whether the head and its
/// loss are fused; `options` carries the recomputation), its errors
/// reported through `context`.
using ContextCompiler = std::function<mlir::FailureOr<plan::Plan>(
    mlir::MLIRContext &context, const compiler::PlanChoice &choice,
    const compiler::ShardOptions &options)>;

/// The run as asked: its world size, `grad` (a joint graph), for
/// data-parallel training its micro-steps per optimizer step (else 0), and
/// --fuse-linear-cross-entropy.
struct AskedRun {
  int64_t worldSize = 1;
  bool grad = false;
  int64_t accumulate = 0;
  bool fuse = false;
};

/// With a budget (bytes per rank; 0: none): turns off options.prefetch,
/// turns on options.recomputeActivations and / or fuses the head and its
/// loss when the plan fits only so (a note says so). Returns whether the
/// plan to compile fuses them (asked, or chosen here). Throws
/// compiler::MemoryBudgetError, naming `model`, when no plan at the asked
/// world size fits; the trial compilations print nothing (the command's
/// own compilation reports a model that does not compile).
bool applyMemoryBudget(int64_t budgetBytes, const AskedRun &asked, const std::string &model,
                       compiler::ShardOptions &options, const ContextCompiler &compile);

}  // namespace shardc::cli
