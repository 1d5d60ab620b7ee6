//===- MemoryBudget.cpp - fit a plan into each rank's memory --------------===//
#include "compiler/MemoryBudget.h"

#include "runtime/GroupedDigits.h"
#include "runtime/PlanQueries.h"

#include <algorithm>
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

/// A choice the search found, as the error words it.
struct Tried {
  PlanChoice choice;
  RankPeak peak;
};

/// "with 4 ranks, recomputing activations" / "accumulating gradients over
/// 4 micro-steps".
std::string describeChoice(const PlanChoice &choice, const MemoryBudget &budget,
                           bool byRanks) {
  std::string text =
      byRanks ? "with " + std::to_string(choice.worldSize) + " ranks"
              : "accumulating gradients over " +
                    std::to_string(choice.accumulate) + " micro-steps";
  if (choice.recompute && !budget.recomputing)
    text += ", recomputing activations";
  return text;
}

/// Compiles each choice `next` gives (doubling its count from `first`)
/// with and, where the compiler may choose, without recomputation (the
/// faster plan first), until one fits; the least tried otherwise.
template <typename Next>
std::pair<std::optional<Tried>, bool>
firstThatFits(const MemoryBudget &budget, const PlanCompiler &compile,
              int64_t first, int64_t last, Next next) {
  std::vector<bool> variants{budget.recomputing};
  if (budget.mayRecompute)
    variants.push_back(true);
  std::optional<Tried> least;
  for (int64_t count = first; count <= last; count *= 2)
    for (bool recompute : variants) {
      PlanChoice choice = next(count);
      choice.recompute = recompute;
      std::optional<plan::Plan> plan = compile(choice);
      if (!plan)
        continue;
      const RankPeak peak = runtime::largestPredictedPeak(*plan);
      if (peak.bytes <= budget.bytesPerRank)
        return {Tried{choice, peak}, true};
      if (!least || peak.bytes < least->peak.bytes)
        least = Tried{choice, peak};
    }
  return {least, false};
}

/// The smallest world size above the plan's (doubling) whose plan fits, as
/// a clause of the error; else the least any of them needs.
std::string moreRanks(const PlanChoice &asked, const MemoryBudget &budget,
                      const PlanCompiler &compile) {
  auto [tried, fits] =
      firstThatFits(budget, compile, asked.worldSize * 2, budget.maxWorldSize,
                    [&](int64_t ranks) {
                      return PlanChoice{ranks, false, asked.accumulate};
                    });
  if (!tried)
    return "";
  if (fits)
    return "; it fits " + describeChoice(tried->choice, budget, true) + ": " +
           groupedDigits(tried->peak.bytes) + " bytes";
  // Padding to the world size and what each rank computes whole grow or
  // stay as the shards shrink: past some world size the peak rises again.
  return "; no world size up to " + std::to_string(budget.maxWorldSize) +
         " fits: the least is " + describePeak(tried->peak) + ", " +
         describeChoice(tried->choice, budget, true) +
         (tried->peak.function == "forward"
              ? "; activations do not shrink with more ranks (a smaller batch "
                "per rank does)"
              : "");
}

/// Data-parallel training: the fewest micro-steps (doubling) that fit at
/// the plan's world size, as a clause of the error.
std::string moreMicroSteps(const PlanChoice &asked, const MemoryBudget &budget,
                           const PlanCompiler &compile) {
  if (budget.accumulate < 1)
    return "";
  auto [tried, fits] =
      firstThatFits(budget, compile, budget.accumulate * 2,
                    budget.maxAccumulate, [&](int64_t steps) {
                      return PlanChoice{asked.worldSize, false, steps};
                    });
  if (!fits)
    return "";
  return "; at " + std::to_string(asked.worldSize) + " ranks it fits " +
         describeChoice(tried->choice, budget, false) + ": " +
         groupedDigits(tried->peak.bytes) + " bytes";
}

} // namespace

BudgetFit fitMemoryBudget(plan::Plan plan, const MemoryBudget &budget,
                          const PlanCompiler &compile) {
  const RankPeak peak = runtime::largestPredictedPeak(plan);
  if (peak.bytes <= budget.bytesPerRank)
    return {std::move(plan), false, ""};
  const PlanChoice asked{plan.worldSize, budget.recomputing,
                         std::max<int64_t>(budget.accumulate, 1)};
  const std::string over = "over the memory budget of " +
                           groupedDigits(budget.bytesPerRank) +
                           " bytes per rank";
  std::string recomputing;
  if (budget.mayRecompute) {
    PlanChoice recompute = asked;
    recompute.recompute = true;
    if (std::optional<plan::Plan> recomputed = compile(recompute)) {
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
                          recomputing + moreRanks(asked, budget, compile) +
                          moreMicroSteps(asked, budget, compile));
}

} // namespace shardc::compiler
