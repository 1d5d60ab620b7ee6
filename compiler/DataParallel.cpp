//===- DataParallel.cpp - one Plan for a data-parallel forward ------------===//
#include "compiler/DataParallel.h"

#include "compiler/BatchLayout.h"

#include "runtime/DataParallel.h"
#include "runtime/Kernels.h"

#include <algorithm>
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

/// A split that failed where a value made of copies (an expand to the
/// batch) met the batch in a way that mixes rows: those copies were
/// something else (T5's position-bias rows copied for a run of equal ids),
/// so rebatchGraph tries again with them kept whole.
struct CopiesMisread {
  std::set<std::string> copies;
};

Graph rebatchOnce(const Graph &graph, int64_t rows, const std::set<std::string> &keepWhole) {
  const int64_t batch = graphBatchRows(graph);
  Graph result = graph;
  auto fail = [&](const std::string &path, const std::string &reason) -> GraphError {
    return GraphError(graph.sourceName + ": " + path + ": data-parallel: " + reason);
  };
  // Every value's shape (rebatched where it holds the batch), and the
  // layout of those computed from the batch (compiler/BatchLayout.h).
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, BatchLayout> layouts;
  std::set<std::string> uniform;  // buffers of one fill: every element equal
  for (const GraphParam &param : graph.params) {
    shapes[param.name] = param.shape;
    if (param.isBuffer && param.init.size() == 1 &&
        (param.init[0].op == "fill" || param.init[0].op == "zeros" || param.init[0].op == "ones"))
      uniform.insert(param.name);
  }
  for (GraphInput &input : result.inputs) {
    input.shape[0] = rows;
    shapes[input.name] = input.shape;
    layouts[input.name] = BatchLayout{};
  }
  // Copies of one value along a dim (an expand to the batch, e.g. a class
  // token or position embeddings) are split with the batch from the start:
  // their node makes copies for this rank's rows only. Every row of them
  // is the same, so any reader gets the same values per row.
  std::vector<GraphNode> &nodes = result.nodes;
  nodes.clear();
  // The copies a value comes from, for values computed from copies only.
  std::map<std::string, std::set<std::string>> fromCopies;
  auto misread = [&](const std::vector<std::string> &values) {
    CopiesMisread error;
    for (const std::string &value : values)
      if (auto it = fromCopies.find(value); it != fromCopies.end())
        error.copies.insert(it->second.begin(), it->second.end());
    if (!error.copies.empty()) throw error;
  };
  auto splitCopies = [&](GraphNode &node, const BatchLayout &layout) {
    const int64_t entries = layout.entries(rows);
    if (node.op == "cat") {
      const int64_t copies = static_cast<int64_t>(node.inputs.size()) / batch * rows;
      node.inputs.assign(static_cast<size_t>(copies), node.inputs[0]);
    } else {  // as_strided with stride 0 along the batch
      std::get<std::vector<int64_t>>(node.attrs.at("size"))[layout.axis] = entries;
    }
    node.shapes[0][layout.axis] = entries;
    shapes[node.names[0]] = node.shapes[0];
    layouts[node.names[0]] = layout;
    fromCopies[node.names[0]] = {node.names[0]};
  };
  // A uniform buffer read as wide as the batch along `dim`: this rank's
  // entries of it, by one slice inserted before its first such reader.
  auto cutUniform = [&](GraphNode &reader, size_t operand, int64_t dim, int64_t entries) {
    const std::string name = reader.inputs[operand];
    const std::string sliced =
        name + ".rows" + std::to_string(rows) + (dim ? ".dim" + std::to_string(dim) : "");
    reader.inputs[operand] = sliced;
    if (shapes.count(sliced)) return;
    GraphNode slice;
    slice.names = {sliced};
    slice.op = "slice";
    slice.inputs = {name};
    slice.numbers = {{"dim", double(dim)}, {"start", 0.0}, {"end", double(entries)},
                     {"step", 1.0}};
    slice.shapes = {shapes.at(name)};
    slice.shapes[0][dim] = entries;
    for (const GraphParam &param : graph.params)
      if (param.name == name) slice.dtype = param.dtype;
    slice.path = reader.path;
    shapes[sliced] = slice.shapes[0];
    nodes.push_back(std::move(slice));
  };
  // A uniform buffer with a multiple of the batch's rows in dim 0 (RAFT's
  // zero initial flow, [B, 2, H, W]) is copies too: split with the batch.
  auto uniformRows = [&](GraphNode &reader, size_t operand) {
    const std::string name = reader.inputs[operand];
    const std::vector<int64_t> &shape = shapes.at(name);
    const std::string sliced = name + ".rows" + std::to_string(rows);
    if (!uniform.count(name) || shape.empty() || shape[0] == 0 || shape[0] % batch != 0 ||
        keepWhole.count(sliced))
      return;
    const BatchLayout layout{0, shape[0] / batch};
    cutUniform(reader, operand, 0, layout.entries(rows));
    layouts[sliced] = layout;
    fromCopies[sliced] = {sliced};
  };
  for (const GraphNode &original : graph.nodes) {
    GraphNode node = original;
    for (size_t i = 0; i < node.inputs.size(); ++i) uniformRows(node, i);
    const bool readsBatch = std::any_of(node.inputs.begin(), node.inputs.end(), [&](auto &in) {
      return layouts.count(in) != 0;
    });
    if (!readsBatch) {
      std::optional<BatchLayout> copies;
      if (!node.inputs.empty() && !keepWhole.count(node.names[0]))
        copies = replicaLayout(node, shapes.at(node.inputs[0]), batch);
      if (copies) splitCopies(node, *copies);
      else
        for (size_t r = 0; r < node.names.size(); ++r) shapes[node.names[r]] = node.shapes[r];
      nodes.push_back(std::move(node));
      continue;
    }
    std::vector<BatchOperand> operands;
    for (const std::string &in : node.inputs) {
      auto layout = layouts.find(in);
      operands.push_back(BatchOperand{&shapes.at(in),
                                      layout == layouts.end() ? std::nullopt
                                                              : std::optional(layout->second),
                                      uniform.count(in) != 0});
    }
    BatchSplit how;
    try {
      how = splitOverBatch(node, operands, batch);
    } catch (const BatchMixError &error) {
      misread(node.inputs);
      throw fail(node.path, error.what());
    }
    // Computed from copies only: from which (a result of real batch rows
    // has no entry).
    std::set<std::string> origins;
    bool copiesOnly = true;
    for (const std::string &in : node.inputs)
      if (layouts.count(in)) {
        auto it = fromCopies.find(in);
        if (it == fromCopies.end()) copiesOnly = false;
        else origins.insert(it->second.begin(), it->second.end());
      }
    for (auto [operand, dim] : how.cut)
      cutUniform(node, operand, dim, how.results[0].entries(rows));
    for (size_t r = 0; r < node.shapes.size(); ++r) {
      std::vector<int64_t> &shape = node.shapes[r];
      const BatchLayout &layout = how.results[r];
      const int64_t at = layout.axis;
      if (at < 0 || at >= static_cast<int64_t>(shape.size()) ||
          shape[at] != layout.entries(batch)) {
        misread(node.inputs);
        throw fail(node.path, "'" + node.op + "' turns the batch (dim " + std::to_string(at) +
                                  ", " + std::to_string(batch) + " rows" +
                                  (layout.factor > 1 ? " of " + std::to_string(layout.factor) +
                                                           " each"
                                                     : "") +
                                  ") into " + runtime::shapeToString(shape) +
                                  "; only ops that keep every batch row apart can be split");
      }
      shape[at] = layout.entries(rows);
      if (node.op == "reshape") node.ints = shape;
      if (node.op == "group_norm" && at == 1) {  // groups of the same channel count
        int64_t &groups = std::get<int64_t>(node.attrs.at("groups"));
        groups = shape[at] / (layout.entries(batch) / groups);
      }
      // Pieces of the batch's dim: whole blocks of rows, so rescaled.
      if ((node.op == "split" || node.op == "slice") && node.integer("dim") == at) {
        if (node.op == "split") {
          node.ints[r] = shape[at];
        } else {
          const int64_t start = node.integer("start") / (batch * layout.factor) * rows *
                                layout.factor;
          node.numbers["start"] = double(start);
          node.numbers["end"] = double(start + shape[at]);
        }
      }
      shapes[node.names[r]] = shape;
      layouts[node.names[r]] = layout;
      if (copiesOnly) fromCopies[node.names[r]] = origins;
    }
    nodes.push_back(std::move(node));
  }
  for (const std::string &output : result.outputs) {
    auto layout = layouts.find(output);
    if (layout != layouts.end() && (layout->second.axis != 0 || layout->second.outer != 1))
      misread({output});
    if (layout == layouts.end())
      throw fail("outputs", "output '" + output +
                                "' is not computed from the batch rows; data-parallel outputs are "
                                "each rank's rows, concatenated");
    if (layout->second.axis != 0 || layout->second.outer != 1)
      throw fail("outputs", "output '" + output + "' does not hold the batch rows as the "
                                "blocks of its dim 0 (they are in dim " +
                                std::to_string(layout->second.axis) +
                                "); data-parallel outputs are each rank's rows concatenated "
                                "along dim 0");
  }
  return result;
}

} // namespace

Graph rebatchGraph(const Graph &graph, int64_t rows) {
  std::set<std::string> keepWhole;
  for (;;) {
    try {
      return rebatchOnce(graph, rows, keepWhole);
    } catch (const CopiesMisread &misread) {
      keepWhole.insert(misread.copies.begin(), misread.copies.end());
    }
  }
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
