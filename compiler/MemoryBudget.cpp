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

/// The plan as asked.
PlanChoice askedChoice(int64_t worldSize, const MemoryBudget &budget) {
  return PlanChoice{.worldSize = worldSize,
                    .recompute = budget.recomputing,
                    .prefetch = budget.prefetching,
                    .fuse = budget.fusing,
                    .accumulate = std::max<int64_t>(budget.accumulate, 1)};
}

/// `base` as asked, then with each combination of the remedies the
/// compiler may choose, the cheaper first: no prefetching (a gather no
/// longer overlaps compute), fusing the head and its loss (its GEMM twice
/// more: a few percent of a large model's step), recomputing activations
/// (a unit's forward again: about a third more).
std::vector<PlanChoice> remedies(PlanChoice base, const MemoryBudget &budget) {
  std::vector<PlanChoice> choices{base};
  for (bool recompute : {false, true})
    for (bool fuse : {false, true})
      for (bool noPrefetch : {false, true}) {
        if ((recompute && !budget.mayRecompute) || (fuse && !budget.mayFuse) ||
            (noPrefetch && !budget.prefetching) ||
            !(recompute || fuse || noPrefetch))
          continue;
        PlanChoice choice = base;
        choice.recompute = base.recompute || recompute;
        choice.fuse = base.fuse || fuse;
        choice.prefetch = base.prefetch && !noPrefetch;
        choices.push_back(choice);
      }
  return choices;
}

/// What a choice changes from the plan as asked: "recomputing activations,
/// without prefetching"; empty when nothing.
std::string describeRemedy(const PlanChoice &choice,
                           const MemoryBudget &budget) {
  std::string text;
  auto add = [&](const char *remedy) {
    text += (text.empty() ? "" : ", ") + std::string(remedy);
  };
  if (choice.recompute && !budget.recomputing)
    add("recomputing activations");
  if (choice.fuse && !budget.fusing)
    add("fusing the head and its loss");
  if (!choice.prefetch && budget.prefetching)
    add("without prefetching");
  return text;
}

/// "with 4 ranks, recomputing activations" / "accumulating gradients over
/// 4 micro-steps".
std::string describeChoice(const PlanChoice &choice, const MemoryBudget &budget,
                           bool byRanks) {
  std::string text =
      byRanks ? "with " + std::to_string(choice.worldSize) + " ranks"
              : "accumulating gradients over " +
                    std::to_string(choice.accumulate) + " micro-steps";
  const std::string remedy = describeRemedy(choice, budget);
  return remedy.empty() ? text : text + ", " + remedy;
}

/// A choice compiled, with its largest rank peak.
struct Tried {
  PlanChoice choice;
  RankPeak peak;
};

/// Compiles `asked` with its `count` field doubled from `first` to `last`,
/// each with each remedy, until one fits; the least tried otherwise.
std::pair<std::optional<Tried>, bool>
firstThatFits(const MemoryBudget &budget, const PlanCompiler &compile,
              const PlanChoice &asked, int64_t PlanChoice::*count,
              int64_t first, int64_t last) {
  std::optional<Tried> least;
  for (int64_t n = first; n <= last; n *= 2) {
    PlanChoice base = asked;
    base.*count = n;
    for (const PlanChoice &choice : remedies(base, budget)) {
      std::optional<plan::Plan> plan = compile(choice);
      if (!plan)
        continue;
      const RankPeak peak = runtime::largestPredictedPeak(*plan);
      if (peak.bytes <= budget.bytesPerRank)
        return {Tried{choice, peak}, true};
      if (!least || peak.bytes < least->peak.bytes)
        least = Tried{choice, peak};
    }
  }
  return {least, false};
}

/// The smallest world size above the plan's (doubling) whose plan fits, as
/// a clause of the error; else the least any of them needs.
std::string moreRanks(const PlanChoice &asked, const MemoryBudget &budget,
                      const PlanCompiler &compile) {
  auto [tried, fits] =
      firstThatFits(budget, compile, asked, &PlanChoice::worldSize,
                    asked.worldSize * 2, budget.maxWorldSize);
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
      firstThatFits(budget, compile, asked, &PlanChoice::accumulate,
                    budget.accumulate * 2, budget.maxAccumulate);
  if (!fits)
    return "";
  return "; at " + std::to_string(asked.worldSize) + " ranks it fits " +
         describeChoice(tried->choice, budget, false) + ": " +
         groupedDigits(tried->peak.bytes) + " bytes";
}

} // namespace

BudgetFit fitMemoryBudget(plan::Plan plan, const MemoryBudget &budget,
                          const PlanCompiler &compile) {
  const PlanChoice asked = askedChoice(plan.worldSize, budget);
  const RankPeak peak = runtime::largestPredictedPeak(plan);
  if (peak.bytes <= budget.bytesPerRank)
    return {std::move(plan), asked, ""};
  const std::string needs =
      "the plan needs " + describePeak(peak) + ", over the memory budget of " +
      groupedDigits(budget.bytesPerRank) + " bytes per rank";
  // The remedies at this world size: the first that fits is the plan;
  // otherwise the error gives the least of them, if it needs less.
  std::optional<Tried> least;
  const std::vector<PlanChoice> choices = remedies(asked, budget);
  for (auto choice = choices.begin() + 1; choice != choices.end(); ++choice) {
    std::optional<plan::Plan> remedied = compile(*choice);
    if (!remedied)
      continue;
    const RankPeak fewer = runtime::largestPredictedPeak(*remedied);
    if (fewer.bytes <= budget.bytesPerRank)
      return {std::move(*remedied), *choice,
              needs + ": " + describeRemedy(*choice, budget) + ", it needs " +
                  groupedDigits(fewer.bytes) + " bytes"};
    if (fewer.bytes < (least ? least->peak.bytes : peak.bytes))
      least = Tried{*choice, fewer};
  }
  const std::string remedied =
      least ? "; " + describeRemedy(least->choice, budget) + ", " +
                  describePeak(least->peak)
            : "";
  throw MemoryBudgetError(needs + remedied + moreRanks(asked, budget, compile) +
                          moreMicroSteps(asked, budget, compile));
}

} // namespace shardc::compiler
