//===- DataParallel.cpp - one Plan for a data-parallel forward ------------===//
#include "compiler/DataParallel.h"

#include "compiler/Autodiff.h"
#include "compiler/GradientAccumulation.h"
#include "compiler/GraphWriter.h"

#include "runtime/DataParallel.h"

#include <algorithm>
#include <optional>

namespace shardc::compiler {

int64_t graphBatchRows(const Graph &graph) {
  if (graph.inputs.empty())
    throw GraphError(graph.sourceName +
                     ": data-parallel: the graph has no inputs, so there is no batch to split");
  int64_t rows = -1;
  for (const GraphInput &input : graph.inputs) {
    if (isReplicatedInput(input))
      continue; // every rank reads it whole
    if (rows < 0) rows = input.shape[0];
    else if (input.shape[0] != rows)
      throw GraphError(graph.sourceName + ": " + input.path + ": data-parallel: input '" +
                       input.name + "' has " + std::to_string(input.shape[0]) +
                       " rows in dim 0, the first input " + std::to_string(rows) +
                       " (every input is the same global batch)");
  }
  if (rows < 0)
    throw GraphError(
        graph.sourceName +
        ": data-parallel: every input of the graph is 0-d "
        "(each rank reads those whole), so there is no batch to split");
  return rows;
}

const GraphInput &firstBatchInput(const Graph &graph) {
  graphBatchRows(graph); // throws when there is none
  return *std::find_if(
      graph.inputs.begin(), graph.inputs.end(),
      [](const GraphInput &input) { return !isReplicatedInput(input); });
}

Graph dataParallelStepGraph(const Graph &graph, int64_t rows,
                            int64_t globalRows,
                            DataParallelTraining &training) {
  // The loss as an output: its split is checked like any output's, so a
  // loss that is not a sum over the batch rows (each rank would count it
  // whole) is refused there.
  Graph withLoss = graph;
  bool defined = false;
  for (const GraphNode &node : graph.nodes)
    defined |= std::find(node.names.begin(), node.names.end(), training.loss) !=
               node.names.end();
  if (defined && std::find(graph.outputs.begin(), graph.outputs.end(),
                           training.loss) == graph.outputs.end())
    withLoss.outputs.push_back(training.loss);
  const int64_t steps = training.optimizer.accumulate;
  if (steps < 1 || rows % steps != 0)
    throw GraphError(
        graph.sourceName + ": gradient accumulation: " + std::to_string(rows) +
        " rows do not split into " + std::to_string(steps) + " micro-steps");
  // With K micro-steps, each rebatched for one micro-step of the global
  // batch (its batch statistics are the micro-step's, as torch computes
  // them in each forward), its 0-d shares scaled by 1 / K.
  MicroStepShares microStep;
  Graph rebatched = rebatchGraph(withLoss, rows / steps, globalRows / steps,
                                 steps > 1 ? &microStep : nullptr);
  if (steps > 1)
    scaleSharesPerMicroStep(rebatched, steps, microStep.sumOutputs);
  JointGraph joint = withGradients(
      rewrittenGraphText(training.graphText, rebatched), graph.sourceName,
      training.loss, training.fuseLinearCrossEntropy);
  training.withoutGradient = joint.withoutGradient;
  Graph step = parseGraph(joint.text, graph.sourceName);
  if (steps > 1)
    step = parseGraph(
        rewrittenGraphText(joint.text, accumulatedStepGraph(
                                           step, steps, microStep.countTotals)),
        graph.sourceName);
  if (training.prepare)
    training.prepare(step);
  return step;
}

namespace {

/// One rank's training step for `rows` rows: its share of the loss,
/// differentiated; its gradients are summed over ranks.
mlir::FailureOr<plan::Plan>
compileTrainingRows(const Graph &graph, int64_t rows, int64_t globalRows,
                    int64_t worldSize, mlir::MLIRContext &context,
                    ShardOptions options, DataParallelTraining &training) {
  Graph step = dataParallelStepGraph(graph, rows, globalRows, training);
  options.sumGradients = true;
  options.splitSummedGradients = training.optimizer.accumulate > 1;
  return compileToPlan(step, worldSize, context, options, &training.optimizer);
}

/// One rank's forward for `rows` of the `globalRows` rows split in `sizes`.
mlir::FailureOr<plan::Plan>
compileForwardRows(const Graph &graph, int64_t rows, int64_t globalRows,
                   const std::vector<int64_t> &sizes, int64_t worldSize,
                   mlir::MLIRContext &context, const ShardOptions &options) {
  Graph rebatched = rebatchGraph(graph, rows, globalRows);
  // A mean's share is scaled by the rank's fraction of the batch, a
  // constant parameter; the ranks' functions share one init.
  const bool twoSizes = sizes.size() > 1 && sizes[1] > 0;
  const bool shareScale =
      std::any_of(rebatched.params.begin(), rebatched.params.end(),
                  [](const GraphParam &param) {
                    return param.name.rfind(kShareScale, 0) == 0;
                  });
  if (twoSizes && shareScale)
    throw GraphError(
        graph.sourceName +
        ": data-parallel: the forward takes a mean over the "
        "batch rows (each rank returns its share of it), which needs a batch "
        "that splits evenly; " +
        std::to_string(globalRows) + " rows over " + std::to_string(worldSize) +
        " ranks do not");
  return compileToPlan(rebatched, worldSize, context, options);
}

} // namespace

void checkTrainingBatchSplits(const std::string &source, int64_t globalRows,
                              int64_t worldSize, int64_t accumulate) {
  if (accumulate > 1 && globalRows % (worldSize * accumulate) != 0)
    throw GraphError(
        source + ": gradient accumulation: the global batch of " +
        std::to_string(globalRows) + " rows does not split evenly over " +
        std::to_string(worldSize) + " ranks x " + std::to_string(accumulate) +
        " micro-steps; give a batch that is a multiple of " +
        std::to_string(worldSize * accumulate));
  // Every rank runs one step function: its constants (the gradients' and
  // the loss share's) are parameters of the one Plan, and their values and
  // shapes follow the rows. So the batch splits evenly, as torch's
  // DistributedSampler makes it.
  if (globalRows % worldSize != 0)
    throw GraphError(
        source + ": data-parallel training: the global batch of " +
        std::to_string(globalRows) + " rows does not split evenly over " +
        std::to_string(worldSize) +
        " ranks; give a batch that is a multiple of the world size");
}

mlir::FailureOr<plan::Plan>
compileDataParallel(const Graph &graph, int64_t globalRows, int64_t worldSize,
                    mlir::MLIRContext &context, const ShardOptions &options,
                    DataParallelTraining *training) {
  if (globalRows < 1)
    throw GraphError(graph.sourceName +
                     ": data-parallel: the global batch has no rows");
  if (training)
    checkTrainingBatchSplits(graph.sourceName, globalRows, worldSize,
                             training->optimizer.accumulate);
  std::vector<int64_t> sizes = runtime::microBatchSizes(globalRows, worldSize);
  std::optional<plan::Plan> result;
  for (int64_t rows : sizes) {
    if (rows == 0) continue;
    mlir::FailureOr<plan::Plan> compiled =
        training ? compileTrainingRows(graph, rows, globalRows, worldSize,
                                       context, options, *training)
                 : compileForwardRows(graph, rows, globalRows, sizes, worldSize,
                                      context, options);
    if (mlir::failed(compiled)) return mlir::failure();
    if (!result) {
      result = std::move(*compiled);
      continue;
    }
    // Only forward depends on the batch: init and the params are shared.
    if (compiled->params.size() != result->params.size())
      throw GraphError(graph.sourceName + ": data-parallel: micro-batches compiled to different "
                                          "parameters");
    for (plan::Function &function : compiled->functions)
      if (function.name == "forward") {
        function.name = runtime::forwardFunctionName(rows, sizes[0]);
        result->functions.push_back(std::move(function));
      }
  }
  // A rank with no rows runs only the collectives (the gathers, and the
  // sums over ranks joined with zeros).
  if (sizes.back() == 0)
    if (const plan::Function *forward = result->function("forward"))
      result->functions.push_back(runtime::collectivesOnly(
          *forward, runtime::forwardFunctionName(0, sizes[0])));
  return std::move(*result);
}

} // namespace shardc::compiler
