// Checkpoint load time into shards already resident: the reader's own rate.
//
// Usage: shardc-load-bench GRAPH CHECKPOINT WORLD_SIZE [REPEATS]
//
// A LocalSession inits GRAPH, then loads CHECKPOINT into it REPEATS times
// (default 5) with replaceParams, as CompiledModel::load does: the released
// shards' blocks are reused, so no fresh page is faulted in. Prints
// "warm SECONDS", the best of the repeats of the slowest rank's wall time
// (as the run report's init_seconds), parsed by checkpoint_bench.sh, which
// times the cold load (`shardc run --load`, fresh shards) itself. Fails when
// a rank's measured peak differs from the prediction.
#include "compiler/CheckpointLoad.h"
#include "compiler/Graph.h"
#include "compiler/Pipeline.h"
#include "runtime/LocalSession.h"
#include "runtime/checkpoint/LoadPlan.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

namespace compiler = shardc::compiler;
namespace runtime = shardc::runtime;
namespace plan = shardc::plan;

namespace {

plan::Plan compile(const compiler::Graph &graph, int64_t worldSize) {
  mlir::MLIRContext context;
  compiler::loadTcDialects(context);
  mlir::FailureOr<plan::Plan> compiled = compiler::compileToPlan(graph, worldSize, context);
  if (mlir::failed(compiled)) throw std::runtime_error("the graph does not compile");
  return std::move(*compiled);
}

/// The slowest rank's seconds; fails when a rank's peak missed the prediction.
double slowest(const std::vector<runtime::PhaseReport> &reports) {
  double seconds = 0;
  for (const runtime::PhaseReport &report : reports) {
    if (report.peakBytes != report.predictedPeakBytes)
      throw std::runtime_error("measured peak " + std::to_string(report.peakBytes) +
                               " != predicted " + std::to_string(report.predictedPeakBytes));
    seconds = std::max(seconds, report.seconds);
  }
  return seconds;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: shardc-load-bench GRAPH CHECKPOINT WORLD_SIZE [REPEATS]\n");
    return 2;
  }
  try {
    const std::string checkpoint = argv[2];
    const int64_t worldSize = std::atoll(argv[3]);
    const int repeats = argc > 4 ? std::max(1, std::atoi(argv[4])) : 5;
    compiler::Graph graph = compiler::loadGraph(argv[1]);
    plan::Plan initPlan = compile(graph, worldSize);
    compiler::applyCheckpointLoad(graph, checkpoint, {});
    plan::Plan loadPlan = compile(graph, worldSize);
    runtime::checkpoint::checkPlanLoads(loadPlan);

    double warm = 1e30;
    runtime::LocalSession session(initPlan, 0);
    slowest(session.init());
    for (int r = 0; r < repeats; ++r) warm = std::min(warm, slowest(session.replaceParams(loadPlan)));
    std::printf("warm %.6f\n", warm);
    return 0;
  } catch (const std::exception &error) {
    std::fprintf(stderr, "shardc-load-bench: error: %s\n", error.what());
    return 1;
  }
}
