#include "runtime/PlanQueries.h"
#include "runtime/MemoryModel.h"

#include <algorithm>

namespace shardc::runtime {

std::vector<ScatteredParam> scatteredParams(const plan::Plan &plan) {
  std::vector<ScatteredParam> result;
  const plan::Function *init = plan.function("init");
  if (!init)
    return result;
  for (const plan::Instruction &instruction : init->body) {
    if (instruction.op != plan::OpCode::Scatter || instruction.outputs.size() != 1)
      continue;
    const plan::Buffer &target = init->buffers.at(instruction.outputs[0]);
    if (!target.param)
      continue;
    const plan::Param &param = plan.params.at(*target.param);
    auto root = instruction.attrs.find("root");
    int64_t owner = root == instruction.attrs.end()
                        ? 0
                        : std::get<int64_t>(root->second);
    result.push_back({param.name, param.fullBytes(), owner});
  }
  return result;
}

std::set<int64_t> ranksWithOwnWork(const plan::Plan &plan) {
  std::set<int64_t> ranks;
  for (const plan::Function &function : plan.functions)
    for (const plan::Instruction &instruction : function.body)
      if (auto rank = instruction.attrs.find("rank"); rank != instruction.attrs.end())
        ranks.insert(std::get<int64_t>(rank->second));
  return ranks;
}

int64_t predictedPeakBytes(const plan::Plan &plan, int64_t rank) {
  return predictedPeak(plan, rank).bytes;
}

RankPeak predictedPeak(const plan::Plan &plan, int64_t rank) {
  RankPeak peak{rank, 0, ""};
  std::vector<LiveAllocation> carried;
  for (const plan::Function &function : plan.functions) {
    MemoryPrediction prediction = predictMemory(plan, function.name, rank, carried);
    if (prediction.peakBytes > peak.bytes || peak.function.empty())
      peak = {rank, prediction.peakBytes, function.name};
    if (function.name == "init")
      carried = prediction.paramsAtEnd;
  }
  return peak;
}

RankPeak largestPredictedPeak(const plan::Plan &plan) {
  std::set<int64_t> ranks = ranksWithOwnWork(plan);
  // Every rank without its own work runs the same instructions: the lowest
  // one stands for them all.
  for (int64_t rank = 0; rank < plan.worldSize; ++rank)
    if (!ranks.count(rank)) {
      ranks.insert(rank);
      break;
    }
  RankPeak largest;
  for (int64_t rank : ranks)
    if (RankPeak peak = predictedPeak(plan, rank);
        peak.bytes > largest.bytes || largest.function.empty())
      largest = peak;
  return largest;
}

plan::Plan optimizerStateView(const plan::Plan &plan) {
  plan::Plan view;
  view.worldSize = plan.worldSize;
  view.params = plan.params;
  for (plan::Param &p : view.params) {
    p.persistent = plan::isResumeState(p.name);
    if (p.persistent) p.tiedNames.clear();
  }
  return view;
}

bool hasOptimizerState(const plan::Plan &plan) {
  return std::any_of(plan.params.begin(), plan.params.end(),
                     [](const plan::Param &p) { return plan::isOptimizerState(p.name); });
}

}  // namespace shardc::runtime
