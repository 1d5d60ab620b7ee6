// Runs of whole plans on ranks that share GPU 0, for the sections that
// check values and memory at a world size N: runLocal (runtime/LocalRun.h)
// on cuda::gpuSessionRanks, the very run `shardc run --device cuda` makes,
// with every rank's shards copied back.
#pragma once

#include "ExecTestUtil.h"

#include "runtime/LocalRun.h"
#include "runtime/PlanJson.h"
#include "runtime/RuntimeError.h"
#include "runtime/cuda/CudaSession.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace shardc::gpucheck {

/// A plan JSON file (compiled at bundle time: the GPU machine has no
/// compiler).
inline plan::Plan readPlanFile(const std::string &path) {
  std::ifstream in(path);
  if (!in) throw runtime::RuntimeError("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return runtime::planFromJson(text.str(), path);
}

/// Init (and forward with `inputs`, when the plan has one) of `plan` at its
/// world size on GPU 0, every rank's shards kept (RunResult::shards).
inline runtime::RunResult runOnGpuRanks(const plan::Plan &plan, uint64_t seed,
                                        std::vector<runtime::HostTensor> inputs = {}) {
  runtime::RunOptions options;
  options.seed = seed;
  options.keepShards = true;
  options.inputs = std::move(inputs);
  return runtime::runLocal(plan, options, runtime::cuda::gpuSessionRanks(0));
}

/// Each rank's shards as test::exec::RankInit (for concatenated() and
/// paddingIsZero()), with its measured init peak.
inline std::vector<test::exec::RankInit> rankInits(const runtime::RunResult &run) {
  std::vector<test::exec::RankInit> ranks(run.ranks.size());
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    for (const runtime::HostTensor &shard : run.shards[r]) ranks[r].params.push_back(shard.data);
    ranks[r].peakBytes = run.ranks[r].init.peakBytes;
  }
  return ranks;
}

/// True when every rank's init (and forward) peak and live-at-peak equal
/// the prediction.
inline bool peaksAsPredicted(const runtime::RunResult &run) {
  for (const runtime::RankReport &rank : run.ranks) {
    if (rank.init.peakBytes != rank.init.predictedPeakBytes ||
        rank.init.liveAtPeak != rank.init.predictedLiveAtPeak)
      return false;
    if (rank.forward && (rank.forward->peakBytes != rank.forward->predictedPeakBytes ||
                         rank.forward->liveAtPeak != rank.forward->predictedLiveAtPeak))
      return false;
  }
  return true;
}

}  // namespace shardc::gpucheck
