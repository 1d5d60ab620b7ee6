//===- RunReport.h - what `shardc run` tells about memory -------*- C++ -*-===//
#pragma once

#include "runtime/LocalRun.h"
#include "runtime/Plan.h"

#include <cstdint>
#include <string>

namespace shardc::cli {

/// One training step's 0-d floating outputs (the loss), by name, in output
/// order.
using StepScalars = std::vector<std::pair<std::string, double>>;

struct RunSummary {
  std::string model;
  uint64_t seed = 0;
  const plan::Plan *plan = nullptr;
  const runtime::RunResult *result = nullptr;
  /// `shardc run --steps`: every step's scalars (trainingStepScalars); the
  /// JSON report lists them as "training_steps".
  std::vector<StepScalars> trainingSteps;
};

/// A per-rank table (params held, init and forward peaks, bytes after
/// forward, unsharded baseline), then each distinct forward peak explained
/// line by line, with the compiler's prediction beside every measurement.
std::string formatTextReport(const RunSummary &summary);

/// The same figures as JSON (docs/cli.md lists the keys).
std::string formatJsonReport(const RunSummary &summary);

/// Lines naming each non-shardable parameter, its bytes and owner rank;
/// empty when every parameter is shardable.
std::string formatNonShardable(const plan::Plan &plan);

/// The compiler's prediction for every rank and function: peak bytes and
/// what is live at the peak (ranks with identical plans grouped).
std::string formatMemoryPlan(const plan::Plan &plan);

/// Every training step's 0-d floating outputs: step 1's are
/// result.outputs, the others result.stepOutputs.
std::vector<StepScalars> trainingStepScalars(const runtime::RunResult &result);

/// `shardc run --steps` (text report): one line per step with its scalars,
/// printed to round-trip ("step 2: loss = 2.30118275"; float64 with 17
/// digits).
std::string formatTrainingSteps(const std::vector<StepScalars> &steps);

/// True when every measured figure equals its prediction.
bool predictionsHold(const runtime::RunResult &result);

} // namespace shardc::cli
