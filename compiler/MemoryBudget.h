//===- MemoryBudget.h - fit a plan into each rank's memory -----*- C++ -*-===//
//
// `--memory-budget` (docs/cli.md) and JitOptions::memory_budget_bytes. Every
// rank's peak is predicted exactly from the plan, so whether a run fits is
// known before a byte is allocated: FSDP finds out with an out-of-memory
// error after init. When the plan does not fit, the compiler tries the one
// remedy it owns (recomputing activations, which changes time, not values);
// when nothing it may choose fits, the error says how many ranks would.
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

/// The same model compiled for `worldSize` ranks, recomputing activations
/// or not; nullopt when it cannot be compiled so (a batch that does not
/// split over that many ranks). Prints nothing.
using PlanCompiler =
    std::function<std::optional<plan::Plan>(int64_t worldSize, bool recompute)>;

struct MemoryBudget {
  int64_t bytesPerRank = 0; // every rank's predicted peak must be at most this
  /// The plan is a joint graph (--grad) compiled without recomputation:
  /// recomputing is the compiler's to choose.
  bool mayRecompute = false;
  bool recomputing = false;    // the plan recomputes activations already
  int64_t maxWorldSize = 4096; // the largest world size an error suggests
};

/// What fitMemoryBudget chose.
struct BudgetFit {
  plan::Plan plan;
  bool recomputed = false; // the compiler turned recomputation on
  std::string note;        // says so, with both peaks; empty otherwise
};

/// `plan` when its largest predicted rank peak is within the budget; else
/// the plan `compile` gives recomputing activations, when the budget allows
/// that and it fits. Otherwise throws MemoryBudgetError naming the smallest
/// world size (doubling the plan's, up to maxWorldSize) that fits.
BudgetFit fitMemoryBudget(plan::Plan plan, const MemoryBudget &budget,
                          const PlanCompiler &compile);

} // namespace shardc::compiler
