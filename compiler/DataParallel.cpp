//===- DataParallel.cpp - one Plan for a data-parallel forward ------------===//
#include "compiler/DataParallel.h"

#include "runtime/DataParallel.h"

#include <optional>

namespace shardc::compiler {

int64_t graphBatchRows(const Graph &graph) {
  if (graph.inputs.empty())
    throw GraphError(graph.sourceName +
                     ": data-parallel: the graph has no inputs, so there is no batch to split");
  int64_t rows = -1;
  for (const GraphInput &input : graph.inputs) {
    if (input.shape.empty())
      throw GraphError(graph.sourceName + ": " + input.path + ": data-parallel: input '" +
                       input.name + "' is 0-d; every input needs the batch as its dim 0");
    if (rows < 0) rows = input.shape[0];
    else if (input.shape[0] != rows)
      throw GraphError(graph.sourceName + ": " + input.path + ": data-parallel: input '" +
                       input.name + "' has " + std::to_string(input.shape[0]) +
                       " rows in dim 0, the first input " + std::to_string(rows) +
                       " (every input is the same global batch)");
  }
  return rows;
}

mlir::FailureOr<plan::Plan> compileDataParallel(const Graph &graph, int64_t globalRows,
                                                int64_t worldSize, mlir::MLIRContext &context,
                                                const ShardOptions &options) {
  if (globalRows < 1)
    throw GraphError(graph.sourceName + ": data-parallel: the global batch has no rows");
  std::vector<int64_t> sizes = runtime::microBatchSizes(globalRows, worldSize);
  std::optional<plan::Plan> result;
  for (int64_t rows : sizes) {
    if (rows == 0) continue;
    mlir::FailureOr<plan::Plan> compiled =
        compileToPlan(rebatchGraph(graph, rows), worldSize, context, options);
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
  if (sizes.back() == 0)
    if (const plan::Function *forward = result->function("forward"))
      result->functions.push_back(
          runtime::collectivesOnly(*forward, runtime::forwardFunctionName(0, sizes[0])));
  return std::move(*result);
}

} // namespace shardc::compiler
