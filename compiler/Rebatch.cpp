//===- Rebatch.cpp - a graph's forward for this rank's batch rows ---------===//
//
// rebatchGraph (compiler/DataParallel.h): every value computed from the
// batch gets this rank's rows, wherever it holds them (the rules are
// compiler/BatchLayout.h's); the nodes whose attributes count the batch's
// entries (reshape targets, split sizes, slice bounds, group counts, the
// copies of an expand) are rewritten to match. A sum or mean over the batch
// rows (a loss) becomes this rank's share of it, and sums and scalings of
// shares stay shares: the ranks' shares add up to the global batch's value.
//
//===----------------------------------------------------------------------===//
#include "compiler/BatchLayout.h"
#include "compiler/DataParallel.h"

#include "runtime/Kernels.h"

#include <algorithm>
#include <map>
#include <set>
#include <variant>

namespace shardc::compiler {

namespace {

using Shape = std::vector<int64_t>;

/// A split that failed where a value made of copies (an expand to the
/// batch) met the batch in a way that mixes rows: those copies were
/// something else (T5's position-bias rows copied for a run of equal ids),
/// so rebatchGraph tries again with them kept whole.
struct CopiesMisread {
  std::set<std::string> copies;
};

class Rebatcher {
public:
  Rebatcher(const Graph &graph, int64_t rows, int64_t globalRows,
            const std::set<std::string> &keepWhole, bool checkOutputs = true)
      : graph_(graph), rows_(rows), batch_(graphBatchRows(graph)),
        globalRows_(globalRows > 0 ? globalRows : batch_),
        keepWhole_(keepWhole), checkOutputs_(checkOutputs), result_(graph) {
    // Constants of one fill: every element equal. Only non-persistent ones
    // (the exporter's): a checkpoint's --load may give a model buffer other
    // values.
    for (const GraphParam &param : graph.params) {
      shapes_[param.name] = param.shape;
      if (param.isBuffer && !param.persistent && param.init.size() == 1 &&
          (param.init[0].op == "fill" || param.init[0].op == "zeros" ||
           param.init[0].op == "ones"))
        uniform_.insert(param.name);
    }
    for (GraphInput &input : result_.inputs) {
      input.shape[0] = rows;
      shapes_[input.name] = input.shape;
      layouts_[input.name] = BatchLayout{};
    }
    for (const auto &[name, shape] : shapes_)
      taken_.insert(name);
    for (const GraphNode &node : graph.nodes)
      taken_.insert(node.names.begin(), node.names.end());
  }

  Graph run() {
    checkUpdates();
    result_.nodes.clear();
    for (const GraphNode &original : graph_.nodes) {
      GraphNode node = original;
      for (size_t i = 0; i < node.inputs.size(); ++i) uniformRows(node, i);
      const bool readsBatch = std::any_of(node.inputs.begin(), node.inputs.end(),
                                          [&](auto &in) { return layouts_.count(in) != 0; });
      const bool readsShare = std::any_of(node.inputs.begin(), node.inputs.end(),
                                          [&](auto &in) { return shares_.count(in) != 0; });
      if (readsShare) shareNode(node, readsBatch);
      else if (readsBatch && reduceToShare(node)) continue;  // its nodes are in place
      else if (readsBatch) {
        splitNode(node);
        // dropout's mask: this rank's rows continue the whole batch's elements
        if (node.op == "dropout" && rows_ > 0) {
          node.attrs["global_rows"] = globalRows_;
          node.attrs["row_elements"] =
              plan::numElements(node.shapes[0]) / rows_;
        }
      } else
        keepOrSplitCopies(node);
      result_.nodes.push_back(std::move(node));
    }
    if (checkOutputs_) checkOutputs();
    return std::move(result_);
  }

  /// Where each output computed from the batch holds it (after run()).
  std::map<std::string, BatchLayout> outputLayouts() const {
    std::map<std::string, BatchLayout> result;
    for (const std::string &output : graph_.outputs)
      if (auto layout = layouts_.find(output); layout != layouts_.end())
        result[output] = layout->second;
    return result;
  }

private:
  /// A buffer updated from the inputs (a training-mode batch norm's
  /// running statistics) would get each rank's own rows' value: refused
  /// before any rewrite, as none gives it the global batch's.
  void checkUpdates() const {
    if (graph_.updates.empty())
      return;
    std::set<std::string> fromInputs;
    for (const GraphInput &input : graph_.inputs)
      fromInputs.insert(input.name);
    for (const GraphNode &node : graph_.nodes)
      if (std::any_of(
              node.inputs.begin(), node.inputs.end(),
              [&](const std::string &in) { return fromInputs.count(in) != 0; }))
        fromInputs.insert(node.names.begin(), node.names.end());
    for (const BufferUpdate &update : graph_.updates)
      if (fromInputs.count(update.value))
        throw fail(
            update.path,
            "buffer '" + update.buffer +
                "' is updated from the batch rows (by '" + update.value +
                "', e.g. a training-mode batch norm's running "
                "statistics), and each rank would see its own rows only; run "
                "without --data-parallel (every rank runs the whole batch) or "
                "export the model in eval mode");
  }

  GraphError fail(const std::string &path, const std::string &reason) const {
    return GraphError(graph_.sourceName + ": " + path + ": data-parallel: " + reason);
  }

  /// Throws CopiesMisread when some of `values` come from copies only.
  void misread(const std::vector<std::string> &values) const {
    CopiesMisread error;
    for (const std::string &value : values)
      if (auto it = fromCopies_.find(value); it != fromCopies_.end())
        error.copies.insert(it->second.begin(), it->second.end());
    if (!error.copies.empty()) throw error;
  }

  /// A node not reading the batch. Copies of one value along a dim (an
  /// expand to the batch: a class token, position embeddings) are split
  /// with the batch from the start: the node makes copies for this rank's
  /// rows only. Every row of them is the same, so any reader gets the same
  /// values per row.
  void keepOrSplitCopies(GraphNode &node) {
    std::optional<BatchLayout> layout;
    if (!node.inputs.empty() && !keepWhole_.count(node.names[0]))
      layout = replicaLayout(node, shapes_.at(node.inputs[0]), batch_);
    if (!layout) {
      for (size_t r = 0; r < node.names.size(); ++r) shapes_[node.names[r]] = node.shapes[r];
      return;
    }
    const int64_t entries = layout->entries(rows_);
    if (node.op == "cat") {
      const int64_t copies = static_cast<int64_t>(node.inputs.size()) / batch_ * rows_;
      node.inputs.assign(static_cast<size_t>(copies), node.inputs[0]);
    } else {  // as_strided with stride 0 along the batch
      std::get<std::vector<int64_t>>(node.attrs.at("size"))[layout->axis] = entries;
    }
    node.shapes[0][layout->axis] = entries;
    shapes_[node.names[0]] = node.shapes[0];
    layouts_[node.names[0]] = *layout;
    fromCopies_[node.names[0]] = {node.names[0]};
  }

  /// A uniform buffer read as wide as the batch along `dim`: this rank's
  /// entries of it, by one slice inserted before its first such reader.
  void cutUniform(GraphNode &reader, size_t operand, int64_t dim, int64_t entries) {
    const std::string name = reader.inputs[operand];
    const std::string sliced =
        name + ".rows" + std::to_string(rows_) + (dim ? ".dim" + std::to_string(dim) : "");
    reader.inputs[operand] = sliced;
    if (shapes_.count(sliced)) return;
    GraphNode slice;
    slice.names = {sliced};
    slice.op = "slice";
    slice.inputs = {name};
    slice.numbers = {{"dim", double(dim)}, {"start", 0.0}, {"end", double(entries)},
                     {"step", 1.0}};
    slice.shapes = {shapes_.at(name)};
    slice.shapes[0][dim] = entries;
    for (const GraphParam &param : graph_.params)
      if (param.name == name) slice.dtype = param.dtype;
    slice.path = reader.path;
    shapes_[sliced] = slice.shapes[0];
    result_.nodes.push_back(std::move(slice));
  }

  /// A uniform buffer with a multiple of the batch's rows in dim 0 (RAFT's
  /// zero initial flow, [B, 2, H, W]) is copies too: split with the batch.
  void uniformRows(GraphNode &reader, size_t operand) {
    const std::string name = reader.inputs[operand];
    const Shape &shape = shapes_.at(name);
    const std::string sliced = name + ".rows" + std::to_string(rows_);
    if (!uniform_.count(name) || shape.empty() || shape[0] == 0 || shape[0] % batch_ != 0 ||
        keepWhole_.count(sliced))
      return;
    const BatchLayout layout{0, shape[0] / batch_};
    cutUniform(reader, operand, 0, layout.entries(rows_));
    layouts_[sliced] = layout;
    fromCopies_[sliced] = {sliced};
  }

  /// A node reading the batch: its results' layouts, their shapes and the
  /// attributes that count the batch's entries for this rank's rows.
  void splitNode(GraphNode &node) {
    std::vector<BatchOperand> operands;
    std::set<std::string> origins;  // the copies it comes from, if only from copies
    bool copiesOnly = true;
    for (const std::string &in : node.inputs) {
      auto layout = layouts_.find(in);
      operands.push_back(BatchOperand{&shapes_.at(in),
                                      layout == layouts_.end() ? std::nullopt
                                                               : std::optional(layout->second),
                                      uniform_.count(in) != 0});
      if (layout == layouts_.end()) continue;
      auto copies = fromCopies_.find(in);
      if (copies == fromCopies_.end()) copiesOnly = false;
      else origins.insert(copies->second.begin(), copies->second.end());
    }
    BatchSplit how;
    try {
      how = splitOverBatch(node, operands, batch_);
    } catch (const BatchMixError &error) {
      misread(node.inputs);
      throw fail(node.path, error.what());
    }
    for (auto [operand, dim] : how.cut)
      cutUniform(node, operand, dim, how.results[0].entries(rows_));
    for (size_t r = 0; r < node.shapes.size(); ++r) {
      Shape &shape = node.shapes[r];
      const BatchLayout &layout = how.results[r];
      const int64_t at = layout.axis;
      if (at < 0 || at >= static_cast<int64_t>(shape.size()) ||
          shape[at] != layout.entries(batch_)) {
        misread(node.inputs);
        throw fail(node.path,
                   "'" + node.op + "' turns the batch (dim " + std::to_string(at) + ", " +
                       std::to_string(batch_) + " rows" +
                       (layout.factor > 1 ? " of " + std::to_string(layout.factor) + " each"
                                          : "") +
                       ") into " + runtime::shapeToString(shape) +
                       "; only ops that keep every batch row apart can be split");
      }
      shape[at] = layout.entries(rows_);
      rescaleAttributes(node, r, layout);
      shapes_[node.names[r]] = shape;
      layouts_[node.names[r]] = layout;
      if (copiesOnly) fromCopies_[node.names[r]] = origins;
    }
  }

  /// A sum or mean over the batch rows (BatchLayout.h's reductionOverBatch):
  /// this rank's share of it. A mean over the rank's rows is scaled by their
  /// fraction of the batch, so that the shares add up to the global mean.
  /// False for any other node.
  bool reduceToShare(GraphNode &node) {
    std::vector<BatchOperand> operands;
    for (const std::string &in : node.inputs) {
      auto layout = layouts_.find(in);
      operands.push_back(BatchOperand{&shapes_.at(in),
                                      layout == layouts_.end()
                                          ? std::nullopt
                                          : std::optional(layout->second),
                                      uniform_.count(in) != 0});
    }
    const std::optional<BatchReduction> reduction =
        reductionOverBatch(node, operands);
    if (!reduction)
      return false;
    const std::string name = node.names[0];
    shapes_[name] = node.shapes[0];
    shares_.insert(name);
    if (*reduction == BatchReduction::Sum || rows_ == globalRows_) {
      result_.nodes.push_back(std::move(node));
      return true;
    }
    GraphNode scale;
    scale.op = "mul";
    scale.names = {name};
    scale.shapes = {node.shapes[0]};
    scale.dtype = node.dtype;
    scale.path = node.path;
    node.names[0] = freshName(name + ".rows" + std::to_string(rows_));
    scale.inputs = {node.names[0],
                    constant(double(rows_) / double(globalRows_), node.dtype)};
    shapes_[node.names[0]] = node.shapes[0];
    result_.nodes.push_back(std::move(node));
    result_.nodes.push_back(std::move(scale));
    return true;
  }

  /// A node reading a share: sums and scalings of shares are shares (their
  /// sum over ranks is the global batch's value); anything else is not.
  void shareNode(const GraphNode &node, bool readsBatch) {
    size_t shares = 0;
    std::string share;
    for (const std::string &in : node.inputs)
      if (shares_.count(in)) {
        ++shares;
        share = in;
      }
    if (readsBatch || !keepsShares(node, shares))
      throw fail(node.path, "'" + node.op + "' reads '" + share +
                                "', a sum or mean over the batch rows, " +
                                (readsBatch ? "together with values of single rows"
                                            : "in a way that does not add up over ranks") +
                                "; each rank holds its rows' share of such a value, and only "
                                "sums and scalings of shares (a loss, a weighted sum of "
                                "losses) can be split");
    for (size_t r = 0; r < node.names.size(); ++r) {
      shapes_[node.names[r]] = node.shapes[r];
      shares_.insert(node.names[r]);
    }
  }

  /// Whether `node`, reading `shares` shares and nothing from single rows,
  /// is linear in them: its result summed over ranks is its result on the
  /// shares summed over ranks.
  bool keepsShares(const GraphNode &node, size_t shares) const {
    const std::string &op = node.op;
    if (op == "add" || op == "sub") return shares == node.inputs.size();
    if (op == "mul") return shares == 1;  // by a value every rank holds whole
    if (op == "div") return shares == 1 && shares_.count(node.inputs[0]);
    return op == "reshape" || op == "neg_out" || op == "sum" || op == "mean";
  }

  /// A new name, unlike every value of the graph.
  std::string freshName(std::string stem) {
    while (taken_.count(stem))
      stem += "_";
    taken_.insert(stem);
    return stem;
  }

  /// A 0-d constant buffer holding `value`.
  std::string constant(double value, plan::DType dtype) {
    GraphParam param;
    param.name = freshName("data_parallel.share_scale");
    param.dtype = dtype;
    param.device = graph_.params.empty() ? "cpu" : graph_.params.front().device;
    param.isBuffer = true;
    param.persistent = false;
    InitStep fill;
    fill.op = "fill";
    fill.numbers["value"] = value;
    param.init = {fill};
    param.path = "the data-parallel share of a mean over the batch";
    shapes_[param.name] = {};
    result_.params.push_back(std::move(param));
    return result_.params.back().name;
  }

  /// The attributes of `node` that count result r's batch entries.
  void rescaleAttributes(GraphNode &node, size_t r, const BatchLayout &layout) {
    const int64_t at = layout.axis, entries = node.shapes[r][at];
    if (node.op == "reshape") node.ints = node.shapes[r];
    if (node.op == "group_norm" && at == 1) {  // groups of the same channel count
      int64_t &groups = std::get<int64_t>(node.attrs.at("groups"));
      groups = entries / (layout.entries(batch_) / groups);
    }
    // Pieces of the batch's dim are whole blocks of rows (BatchLayout.cpp).
    if ((node.op == "split" || node.op == "slice") && node.integer("dim") == at) {
      if (node.op == "split") {
        node.ints[r] = entries;
      } else {
        const int64_t start =
            node.integer("start") / (batch_ * layout.factor) * rows_ * layout.factor;
        node.numbers["start"] = double(start);
        node.numbers["end"] = double(start + entries);
      }
    }
  }

  void checkOutputs() const {
    for (const std::string &output : result_.outputs) {
      if (shares_.count(output)) {
        if (!shapes_.at(output).empty())
          throw fail("outputs",
                     "output '" + output + "' " +
                         runtime::shapeToString(shapes_.at(output)) +
                         " is a sum or mean over the batch rows; data-parallel "
                         "returns such values 0-d only (summed over ranks)");
        continue;
      }
      auto layout = layouts_.find(output);
      if (layout == layouts_.end())
        throw fail("outputs", "output '" + output +
                                  "' is not computed from the batch rows; data-parallel "
                                  "outputs are each rank's rows, concatenated");
      if (layout->second.outer != 1) {
        misread({output});
        throw fail("outputs", "output '" + output + "' holds the batch rows as " +
                                  std::to_string(layout->second.outer) +
                                  " interleaved blocks of its dim " +
                                  std::to_string(layout->second.axis) +
                                  "; data-parallel outputs are each rank's rows concatenated");
      }
      if (layout->second.axis != 0) {
        misread({output});
        throw fail("outputs", "output '" + output +
                                  "' does not hold the batch rows as the blocks of its dim 0 "
                                  "(they are in dim " +
                                  std::to_string(layout->second.axis) +
                                  "); data-parallel outputs are each rank's rows concatenated "
                                  "along dim 0");
      }
    }
  }

  const Graph &graph_;
  const int64_t rows_, batch_;
  const int64_t globalRows_; // the batch a mean's shares add up to
  const std::set<std::string> &keepWhole_;
  const bool checkOutputs_;
  Graph result_;
  std::map<std::string, Shape> shapes_;  // rebatched where they hold the batch
  std::map<std::string, BatchLayout> layouts_;  // the values computed from the batch
  std::set<std::string> uniform_;
  // Values that are this rank's share of a sum over the batch rows.
  std::set<std::string> shares_;
  std::set<std::string> taken_; // every name of the graph, for new ones
  // The copies a value comes from, for values computed from copies only.
  std::map<std::string, std::set<std::string>> fromCopies_;
};

/// Runs `use` on a Rebatcher for `rows` rows, again with the misread
/// copies kept whole until none is.
template <typename Use>
auto withRebatcher(const Graph &graph, int64_t rows, int64_t globalRows,
                   bool checkOutputs, Use use) {
  std::set<std::string> keepWhole;
  for (;;) {
    try {
      Rebatcher rebatcher(graph, rows, globalRows, keepWhole, checkOutputs);
      return use(rebatcher);
    } catch (const CopiesMisread &misread) {
      keepWhole.insert(misread.copies.begin(), misread.copies.end());
    }
  }
}

/// A permute node `name` of `input` (of shape `from`) with result dim k
/// being dims[k].
GraphNode permuteNode(const std::string &name, const std::string &input, const Shape &from,
                      const Shape &dims, plan::DType dtype, const std::string &path) {
  GraphNode node;
  node.names = {name};
  node.op = "permute";
  node.inputs = {input};
  node.ints = dims;
  Shape to;
  for (int64_t d : dims) to.push_back(from[d]);
  node.shapes = {to};
  node.dtype = dtype;
  node.path = path;
  return node;
}

/// Every read of value `from` (node operands, graph outputs) reads `to`.
void renameUses(Graph &graph, const std::string &from, const std::string &to) {
  for (GraphNode &node : graph.nodes)
    std::replace(node.inputs.begin(), node.inputs.end(), from, to);
  std::replace(graph.outputs.begin(), graph.outputs.end(), from, to);
  for (BufferUpdate &update : graph.updates)
    if (update.value == from)
      update.value = to;
}

} // namespace

Graph rebatchGraph(const Graph &graph, int64_t rows, int64_t globalRows) {
  return withRebatcher(graph, rows, globalRows, true,
                       [](Rebatcher &rebatcher) { return rebatcher.run(); });
}

Graph batchFirstGraph(const Graph &graph, const BatchDims &inputDims, BatchDims &outputDims) {
  Graph result = graph;
  std::vector<GraphNode> front;
  for (const auto &[inputName, given] : inputDims) {
    const std::string &name = inputName;  // a plain reference: lambdas capture it
    auto input = std::find_if(result.inputs.begin(), result.inputs.end(),
                              [&](const GraphInput &in) { return in.name == name; });
    if (input == result.inputs.end())
      throw GraphError(graph.sourceName + ": --batch-dim " + name + "=" + std::to_string(given) +
                       ": the graph has no input '" + name + "'");
    const int64_t rank = static_cast<int64_t>(input->shape.size());
    const int64_t dim = given < 0 ? given + rank : given;
    if (dim < 0 || dim >= rank)
      throw GraphError(graph.sourceName + ": --batch-dim " + name + "=" + std::to_string(given) +
                       ": input '" + name + "' " + runtime::shapeToString(input->shape) +
                       " has no dim " + std::to_string(given));
    if (dim == 0) continue;
    // The input arrives batch-first; forward reads it in its own layout.
    const Shape original = input->shape;
    input->shape.erase(input->shape.begin() + dim);
    input->shape.insert(input->shape.begin(), original[dim]);
    Shape back;  // result dim k of the original layout is batch-first dim back[k]
    for (int64_t k = 0; k < rank; ++k) back.push_back(k < dim ? k + 1 : k == dim ? 0 : k);
    const std::string restored = name + ".batch_dim" + std::to_string(dim);
    renameUses(result, name, restored);
    front.push_back(
        permuteNode(restored, name, input->shape, back, input->dtype, input->path));
  }
  result.nodes.insert(result.nodes.begin(), front.begin(), front.end());
  // Outputs holding the batch in one other dim give it in dim 0.
  const std::map<std::string, BatchLayout> layouts = withRebatcher(
      result, graphBatchRows(result), 0, false, [](Rebatcher &rebatcher) {
        rebatcher.run();
        return rebatcher.outputLayouts();
      });
  for (const auto &[output, layout] : layouts) {
    if (layout.axis == 0 || layout.outer != 1) continue;
    const std::string inner = output + ".batch_dim" + std::to_string(layout.axis);
    const GraphNode *producer = nullptr;
    for (GraphNode &node : result.nodes)
      for (std::string &name : node.names)
        if (name == output) {
          name = inner;
          producer = &node;
        }
    if (!producer) continue;  // an input returned as it is
    const size_t which = static_cast<size_t>(
        std::find(producer->names.begin(), producer->names.end(), inner) -
        producer->names.begin());
    const Shape shape = producer->shapes[which];
    const plan::DType dtype = producer->dtype;
    const std::string path = producer->path;
    renameUses(result, output, inner);
    std::replace(result.outputs.begin(), result.outputs.end(), inner, output);
    Shape toFront{layout.axis};
    for (int64_t k = 0; k < static_cast<int64_t>(shape.size()); ++k)
      if (k != layout.axis) toFront.push_back(k);
    result.nodes.push_back(permuteNode(output, inner, shape, toFront, dtype, path));
    outputDims[output] = layout.axis;
  }
  return result;
}

} // namespace shardc::compiler
