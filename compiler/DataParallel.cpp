//===- DataParallel.cpp - one Plan for a data-parallel forward ------------===//
#include "compiler/DataParallel.h"

#include "runtime/DataParallel.h"
#include "runtime/Kernels.h"

#include <map>
#include <optional>
#include <set>
#include <variant>

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

namespace {

/// Whether `node` acts along dim 0 (the batch) of its first operand, of
/// rank `rank`: a `dim`, `dim0` or `dim1` of 0, a family op's `dim` or
/// `dims` naming dim 0 (negative dims counted from the end: cumsum, topk,
/// gather, the reductions), a permute that moves dim 0, or an as_strided
/// read (its strides may cross batch rows). rank 0: the first operand holds
/// no batch rows (gather from a parameter table at batch indices keeps the
/// rows apart), so only the plain ops' keys count.
bool actsAlongDim0(const GraphNode &node, size_t rank) {
  for (const char *key : {"dim", "dim0", "dim1"})
    if (auto it = node.numbers.find(key); it != node.numbers.end() && it->second == 0)
      return true;
  if (node.familyOp && rank > 0) {
    auto isDim0 = [&](int64_t d) { return d == 0 || d == -static_cast<int64_t>(rank); };
    if (auto it = node.attrs.find("dim"); it != node.attrs.end() &&
        std::holds_alternative<int64_t>(it->second) && isDim0(std::get<int64_t>(it->second)))
      return true;
    if (auto it = node.attrs.find("dims"); it != node.attrs.end() &&
        std::holds_alternative<std::vector<int64_t>>(it->second))
      for (int64_t d : std::get<std::vector<int64_t>>(it->second))
        if (isDim0(d)) return true;
    if (node.op == "as_strided") return true;
  }
  return node.op == "permute" && !node.ints.empty() && node.ints[0] != 0;
}

} // namespace

Graph rebatchGraph(const Graph &graph, int64_t rows) {
  const int64_t batch = graphBatchRows(graph);
  Graph result = graph;
  auto fail = [&](const std::string &path, const std::string &reason) -> GraphError {
    return GraphError(graph.sourceName + ": " + path + ": data-parallel: " + reason);
  };
  // name -> new shape, and its rows per batch row: 1, or f where a reshape
  // merged the batch with the next dims ([B, S, H] -> [B*S, H]: each batch
  // row is f consecutive rows, still apart from the other batch rows).
  std::map<std::string, std::vector<int64_t>> batchValues;
  std::map<std::string, int64_t> rowsPerBatchRow;
  for (GraphInput &input : result.inputs) {
    input.shape[0] = rows;
    batchValues[input.name] = input.shape;
    rowsPerBatchRow[input.name] = 1;
  }
  for (GraphNode &node : result.nodes) {
    std::vector<const std::vector<int64_t> *> batchOperands;
    int64_t factor = 0;  // of the first batch operand
    for (const std::string &in : node.inputs)
      if (auto it = batchValues.find(in); it != batchValues.end()) {
        batchOperands.push_back(&it->second);
        if (factor == 0) factor = rowsPerBatchRow[in];
      }
    if (batchOperands.empty()) continue;  // parameters only: no batch rows
    const auto first = batchValues.find(node.inputs[0]);
    if (actsAlongDim0(node, first == batchValues.end() ? 0 : first->second.size()))
      throw fail(node.path, "'" + node.op + "' acts along dim 0, the batch; each rank holds only "
                            "its rows, so the forward cannot be split over ranks");
    if (node.op == "matmul" && node.inputs.size() == 2 && batchValues.count(node.inputs[1]) &&
        node.shapes[0].size() == 2)
      throw fail(node.path, "'matmul' contracts over dim 0, the batch");
    // A reshape may merge the batch with the dims after it, or split such
    // rows back: row-major, batch row b stays the block of rows
    // [b*f, (b+1)*f) whenever the result's dim 0 is a multiple of the batch.
    if (node.op == "reshape" && !node.shapes[0].empty() && node.shapes[0][0] % batch == 0)
      factor = node.shapes[0][0] / batch;
    for (std::vector<int64_t> &shape : node.shapes) {
      if (shape.empty() || shape[0] != batch * factor)
        throw fail(node.path, "'" + node.op + "' turns the batch (dim 0, " +
                                  std::to_string(batch) + " rows" +
                                  (factor > 1 ? " of " + std::to_string(factor) + " each" : "") +
                                  ") into " + runtime::shapeToString(shape) +
                                  "; only ops that keep every batch row apart can be split");
      shape[0] = rows * factor;
    }
    if (node.op == "reshape") {
      std::vector<int64_t> in = *batchOperands[0];
      if (plan::numElements(in) != plan::numElements(node.shapes[0]))
        throw fail(node.path, "'reshape' mixes the batch (dim 0) with other dims");
      if (!node.ints.empty() && node.ints[0] == batch * factor) node.ints[0] = rows * factor;
    }
    for (size_t r = 0; r < node.names.size(); ++r) {
      batchValues[node.names[r]] = node.shapes[r];
      rowsPerBatchRow[node.names[r]] = factor;
    }
  }
  for (const std::string &output : result.outputs)
    if (!batchValues.count(output))
      throw fail("outputs", "output '" + output +
                                "' is not computed from the batch rows; data-parallel outputs are "
                                "each rank's rows, concatenated");
  return result;
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
