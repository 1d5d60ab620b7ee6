// Facts about a Plan that reports and tools print.
#pragma once

#include "runtime/Plan.h"

#include <set>
#include <string>
#include <vector>

namespace shardc::runtime {

/// A parameter whose init is not shardable: computed in full on `owner`
/// and scattered (docs/design.md, "Sharding").
struct ScatteredParam {
  std::string name;
  int64_t fullBytes = 0;
  int64_t owner = 0;
};

/// Every parameter the init function scatters, in plan order.
std::vector<ScatteredParam> scatteredParams(const plan::Plan &plan);

/// Ranks named by rank-conditional instructions (owners of non-shardable
/// parameters). Every other rank runs exactly the same instructions, so one
/// prediction stands for all of them.
std::set<int64_t> ranksWithOwnWork(const plan::Plan &plan);

/// The plan's parameters (no functions) with the optimizer state
/// (plan::isOptimizerState) as the only persistent ones: what the
/// cooperative writer saves for `--save-optimizer` (docs/training.md).
plan::Plan optimizerStateView(const plan::Plan &plan);
/// True when the plan holds optimizer state (it ends forward with steps).
bool hasOptimizerState(const plan::Plan &plan);

/// The most bytes `rank` holds at once over init and forward, as the
/// memory model predicts (exact on CPU).
int64_t predictedPeakBytes(const plan::Plan &plan, int64_t rank);

/// A rank's predicted peak and the function where it is first reached.
struct RankPeak {
  int64_t rank = 0;
  int64_t bytes = 0;
  std::string function;
};
/// predictedPeakBytes, with the function that reaches it.
RankPeak predictedPeak(const plan::Plan &plan, int64_t rank);
/// The largest predicted peak of any rank (the lowest such rank): the ranks
/// with their own work, and one rank standing for all the others.
RankPeak largestPredictedPeak(const plan::Plan &plan);

}  // namespace shardc::runtime
