//===- MemoryBudget.h - fit a plan into each rank's memory -----*- C++ -*-===//
//
// `--memory-budget` (docs/cli.md) and JitOptions::memory_budget_bytes. Every
// rank's peak is predicted exactly from the plan, so whether a run fits is
// known before a byte is allocated: FSDP finds out with an out-of-memory
// error after init. When the plan does not fit, the compiler tries the
// remedies it owns, which change time, not values, the cheaper first:
// gathering each unit only when it runs (no prefetching), fusing the head
// and its loss (the head's GEMM twice more), recomputing activations (a
// forward more), and their combinations. When nothing it may choose fits,
// the error says what would: more ranks, or (data-parallel training) more
// micro-steps per optimizer step.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Plan.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

namespace shardc::compiler {

/// No plan the compiler may choose fits the budget; the message names the
/// peak, the rank and function that reach it, and what would fit.
class MemoryBudgetError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// One way of compiling the model that the budget search tries.
struct PlanChoice {
  int64_t worldSize = 1;
  bool recompute = false;
  bool prefetch = false; // gather the next unit while one computes
  /// The loss cross_entropy(linear(h, W)) as one op
  /// (--fuse-linear-cross-entropy).
  bool fuse = false;
  /// Micro-steps per optimizer step (data-parallel training's gradient
  /// accumulation; 1 otherwise).
  int64_t accumulate = 1;
};

/// The same model compiled as `choice` says; nullopt when it cannot be
/// compiled so (a batch that does not split over that many ranks or
/// micro-steps). Prints nothing.
using PlanCompiler =
    std::function<std::optional<plan::Plan>(const PlanChoice &choice)>;

struct MemoryBudget {
  int64_t bytesPerRank = 0; // every rank's predicted peak must be at most this
  /// The plan is a joint graph (--grad) compiled without recomputation:
  /// recomputing is the compiler's to choose.
  bool mayRecompute = false;
  bool recomputing = false; // the plan recomputes activations already
  /// The plan is a joint graph compiled without fusing its head and loss:
  /// fusing is the compiler's to choose (a graph with nothing to fuse
  /// cannot be compiled so: that choice is skipped).
  bool mayFuse = false;
  bool fusing = false; // the plan fuses them already
  /// The plan prefetches (--prefetch): not prefetching is the compiler's to
  /// choose.
  bool prefetching = false;
  /// Data-parallel training with this many micro-steps per optimizer step:
  /// an error also names the gradient accumulation that would fit at this
  /// world size (a user's choice: it changes the gradients' rounding). 0:
  /// not data-parallel training.
  int64_t accumulate = 0;
  int64_t maxWorldSize = 4096;  // the largest world size an error suggests
  int64_t maxAccumulate = 1024; // the most micro-steps an error suggests
};

/// What fitMemoryBudget chose.
struct BudgetFit {
  plan::Plan plan;
  PlanChoice choice; // how `plan` was compiled
  std::string note;  // what changed and both peaks; empty when nothing did
};

/// `plan` (compiled as `budget` says it was) when its largest predicted
/// rank peak is within the budget; else the first plan `compile` gives
/// that fits, without prefetching, fusing the head and its loss, both,
/// then recomputing activations alone and with the others, as far as the
/// budget lets the compiler choose. Otherwise throws
/// MemoryBudgetError naming the smallest world size (doubling the plan's,
/// up to maxWorldSize) and the fewest micro-steps (doubling, data-parallel
/// training) that fit.
BudgetFit fitMemoryBudget(plan::Plan plan, const MemoryBudget &budget,
                          const PlanCompiler &compile);

} // namespace shardc::compiler
