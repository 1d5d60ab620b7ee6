//===- MemoryBudget.cpp - fit a plan into each rank's memory
//---------------===//
#include "compiler/MemoryBudget.h"

#include "runtime/GroupedDigits.h"
#include "runtime/PlanQueries.h"

#include <vector>

namespace shardc::compiler {
namespace {

using runtime::groupedDigits;
using runtime::RankPeak;

/// "1,308,718,140 bytes on rank 0 (in forward)".
std::string describePeak(const RankPeak &peak) {
  return groupedDigits(peak.bytes) + " bytes on rank " +
         std::to_string(peak.rank) + " (in " +
         (peak.function.empty() ? "no function" : peak.function) + ")";
}

/// "with 4 ranks, recomputing activations".
std::string withRanks(int64_t ranks, bool recompute,
                      const MemoryBudget &budget) {
  return "with " + std::to_string(ranks) + " ranks" +
         (recompute && !budget.recomputing ? ", recomputing activations" : "");
}

/// The smallest world size above the plan's (doubling) whose plan fits, as
/// a clause of the error; else the least any of them needs.
std::string whatWouldFit(int64_t worldSize, const MemoryBudget &budget,
                         const PlanCompiler &compile) {
  // Without recomputation first where the compiler may choose: it is the
  // faster plan.
  std::vector<bool> variants{budget.recomputing};
  if (budget.mayRecompute)
    variants.push_back(true);
  struct Tried {
    int64_t ranks;
    bool recompute;
    RankPeak peak;
  };
  std::optional<Tried> least;
  for (int64_t ranks = worldSize * 2; ranks <= budget.maxWorldSize; ranks *= 2)
    for (bool recompute : variants) {
      std::optional<plan::Plan> plan = compile(ranks, recompute);
      if (!plan)
        continue;
      const RankPeak peak = runtime::largestPredictedPeak(*plan);
      if (peak.bytes <= budget.bytesPerRank)
        return "; it fits " + withRanks(ranks, recompute, budget) + ": " +
               groupedDigits(peak.bytes) + " bytes";
      if (!least || peak.bytes < least->peak.bytes)
        least = Tried{ranks, recompute, peak};
    }
  if (!least)
    return "";
  // Padding to the world size and what each rank computes whole grow or
  // stay as the shards shrink: past some world size the peak rises again.
  return "; no world size up to " + std::to_string(budget.maxWorldSize) +
         " fits: the least is " + describePeak(least->peak) + ", " +
         withRanks(least->ranks, least->recompute, budget) +
         (least->peak.function == "forward"
              ? "; activations do not shrink with more ranks (a smaller batch "
                "per rank does)"
              : "");
}

} // namespace

BudgetFit fitMemoryBudget(plan::Plan plan, const MemoryBudget &budget,
                          const PlanCompiler &compile) {
  const RankPeak peak = runtime::largestPredictedPeak(plan);
  if (peak.bytes <= budget.bytesPerRank)
    return {std::move(plan), false, ""};
  const std::string over = "over the memory budget of " +
                           groupedDigits(budget.bytesPerRank) +
                           " bytes per rank";
  std::string recomputing;
  if (budget.mayRecompute) {
    if (std::optional<plan::Plan> recomputed = compile(plan.worldSize, true)) {
      const RankPeak fewer = runtime::largestPredictedPeak(*recomputed);
      if (fewer.bytes <= budget.bytesPerRank)
        return {std::move(*recomputed), true,
                "the plan needs " + describePeak(peak) + ", " + over +
                    ": recomputing activations, it needs " +
                    groupedDigits(fewer.bytes) + " bytes"};
      recomputing = "; recomputing activations, " + describePeak(fewer);
    }
  }
  throw MemoryBudgetError("the plan needs " + describePeak(peak) + ", " + over +
                          recomputing +
                          whatWouldFit(plan.worldSize, budget, compile));
}

} // namespace shardc::compiler
