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
#include "compiler/SummedCrossEntropy.h"

#include "runtime/Kernels.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
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
      shapes_[input.name] = input.shape;
      if (isReplicatedInput(input))
        continue; // a value every rank holds whole
      input.shape[0] = rows;
      shapes_[input.name] = input.shape;
      layouts_[input.name] = BatchLayout{};
    }
    for (const auto &[name, shape] : shapes_)
      taken_.insert(name);
    for (const GraphNode &node : graph.nodes)
      taken_.insert(node.names.begin(), node.names.end());
    for (const SummedCrossEntropy &summed : findSummedCrossEntropies(graph)) {
      summedMeans_.insert(summed.loss);
      summedProducts_[summed.product] = summed;
      summedGuards_[summed.summed] = summed;
      summedConditions_.insert(summed.any);
    }
  }

  /// Gradient accumulation: this graph is one micro-step of a larger
  /// batch. cross_entropy's counted targets are summed over ranks (and then
  /// over micro-steps) even when this rank holds the whole batch of a
  /// micro-step, and a nonlinear use of a sum over the batch is refused
  /// (a micro-step holds only its part of the sum).
  void accumulateMicroSteps() { accumulating_ = true; }
  /// The all_reduce_sum nodes that sum cross_entropy's counted targets over
  /// ranks (shareOfCountedMean), in graph order.
  const std::vector<std::string> &countTotals() const { return countTotals_; }

  Graph run() {
    result_.nodes.clear();
    for (const GraphNode &original : graph_.nodes)
      process(original);
    checkUpdates();
    for (const std::string &output : result_.outputs)
      shareOfWhole(output);
    if (checkOutputs_) checkOutputs();
    if (accumulating_)
      checkShareKinds();
    return std::move(result_);
  }

  /// The 0-d outputs that are shares of a sum over the batch rows, not of
  /// a mean (after run()).
  std::set<std::string> sumOutputs() const {
    std::set<std::string> result;
    for (const std::string &output : graph_.outputs)
      if (sumShares_.count(output) && !meanShares_.count(output))
        result.insert(output);
    return result;
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
  /// One node of the graph, or of a rewrite, in order: its results' rows,
  /// shares or whole values, and the nodes it becomes.
  void process(GraphNode node) {
    if (summedCrossEntropy(node))
      return;
    for (size_t i = 0; i < node.inputs.size(); ++i)
      uniformRows(node, i);
    auto readsAny = [&](const auto &set) {
      return std::any_of(
          node.inputs.begin(), node.inputs.end(),
          [&](const std::string &in) { return set.count(in) != 0; });
    };
    bool readsShare = readsAny(shares_);
    const bool readsBatch = readsAny(layouts_);
    if (readsShare && !keepsShares(node, readsBatch)) {
      // A use that does not add up over ranks (a batch norm's mean taken
      // from single rows, a product, a share beside a whole value) reads
      // the global batch's value: the ranks' shares summed.
      // Gradient accumulation: a mean's share summed is the micro-step's
      // mean (a batch norm's statistics per micro-step, as a torch loop
      // computes them), but a sum's share summed is the micro-step's part
      // of a sum that the graph's own constants take for the whole batch.
      if (accumulating_ && !firstShare(node, sumShares_).empty()) {
        // A cross_entropy's mean times a count of targets other than the
        // exporter's summed form (summedCrossEntropy): a mean's share times
        // a sum's.
        const bool summedMean =
            node.op == "mul" && !firstShare(node, meanShares_).empty();
        throw fail(
            node.path,
            "'" + node.op + "' reads '" + firstShare(node, sumShares_) +
                "', a sum over the batch's rows, in a way that does not "
                "add up over them (a product of two such sums, as a "
                "mixture of experts' load-balancing loss; a sum beside "
                "a value every row shares): with --accumulate each "
                "micro-step would compute it over its own rows only, "
                "not the whole batch; run the step without --accumulate" +
                (summedMean
                     ? std::string(
                           ". A cross_entropy's mean times a count of targets "
                           "is such a product, unless it is the exporter's "
                           "summed cross_entropy (docs/training.md): export "
                           "the model's mean loss instead; --accumulate "
                           "divides it by the whole batch's counted targets")
                     : std::string()));
      }
      for (std::string &in : node.inputs)
        if (shares_.count(in))
          in = summedOverRanks(in, node.path);
      readsShare = false;
    }
    if (readsShare) {
      const bool ofSum = !firstShare(node, sumShares_).empty();
      const bool ofMean = !firstShare(node, meanShares_).empty();
      for (size_t r = 0; r < node.names.size(); ++r) {
        shapes_[node.names[r]] = node.shapes[r];
        shares_.insert(node.names[r]);
        if (ofSum)
          sumShares_.insert(node.names[r]);
        if (ofMean)
          meanShares_.insert(node.names[r]);
      }
    } else if (readsBatch && reduceToShare(node)) {
      return; // its nodes are in place
    } else if (readsBatch && overWholeBatch(node)) {
      return;
    } else if (readsBatch) {
      splitNode(node);
      // dropout's mask: this rank's rows continue the whole batch's elements
      if (node.op == "dropout" && rows_ > 0) {
        node.attrs["global_rows"] = globalRows_;
        node.attrs["row_elements"] = plan::numElements(node.shapes[0]) / rows_;
      }
    } else {
      const bool fromGlobal = readsAny(global_);
      keepOrSplitCopies(node);
      if (fromGlobal)
        global_.insert(node.names.begin(), node.names.end());
    }
    result_.nodes.push_back(std::move(node));
  }

  /// A cross_entropy summed over its counted targets (SummedCrossEntropy.h)
  /// is a sum over the rows: this rank's mean times this rank's count (0
  /// when it counts none) is its share, with no count summed over ranks,
  /// so micro-steps of gradient accumulation add up like any sum's shares.
  /// The mean stays this rank's own (its one reader is the product); the
  /// guard against a batch counting none is made per rank, on the mean,
  /// and the graph's own guard on the product (which would read the
  /// count summed over ranks) becomes the product itself. True when `node`
  /// is placed (or dropped); false to process it as usual.
  bool summedCrossEntropy(GraphNode &node) {
    if (node.names.empty())
      return false;
    const std::string &name = node.names[0];
    if (summedMeans_.count(name)) {
      for (size_t i = 0; i < node.inputs.size(); ++i)
        uniformRows(node, i);
      shapes_[name] = node.shapes[0];
      result_.nodes.push_back(std::move(node));
      return true;
    }
    if (summedConditions_.count(name))
      return true; // its reader, the guard, no longer reads it
    if (auto product = summedProducts_.find(name);
        product != summedProducts_.end()) {
      const SummedCrossEntropy &summed = product->second;
      const std::string any =
          appendNode(summed.loss + ".any", "gt", true, {summed.count}, {},
                     plan::DType::I64, node.path, {{"value", 0.0}});
      const std::string guarded =
          appendNode(summed.loss + ".counted", "where", true,
                     {any, summed.loss, constant(0.0, dtypeOf(summed.loss))},
                     {}, dtypeOf(summed.loss), node.path);
      std::replace(node.inputs.begin(), node.inputs.end(), summed.loss,
                   guarded);
      return false;
    }
    if (auto guard = summedGuards_.find(name); guard != summedGuards_.end()) {
      node.op = "reshape";
      node.familyOp = false;
      node.attrs.clear();
      node.inputs = {guard->second.product};
      node.ints = node.shapes[0];
      return false;
    }
    return false;
  }

  /// The global batch's value of share `share`: every rank's share summed
  /// (all_reduce_sum), inserted once before its first such reader. With
  /// the whole batch on this rank, the share is that value already.
  /// The first of node's inputs in `set`, or "".
  static std::string firstShare(const GraphNode &node,
                                const std::set<std::string> &set) {
    for (const std::string &in : node.inputs)
      if (set.count(in))
        return in;
    return "";
  }

  std::string summedOverRanks(const std::string &share, const std::string &path,
                              bool always = false) {
    if (rows_ == globalRows_ && !always) {
      global_.insert(share);
      return share;
    }
    auto known = summed_.find(share);
    if (known != summed_.end())
      return known->second;
    const std::string sum =
        appendNode(share + ".all_ranks", "all_reduce_sum", true, {share},
                   shapes_.at(share), dtypeOf(share), path);
    global_.insert(sum);
    summed_[share] = sum;
    return sum;
  }

  /// A 0-d output every rank holds whole, computed from sums over ranks (a
  /// loss with a penalty on the weights, a sum over tokens divided by the
  /// global batch's count): each rank returns its fraction of the batch
  /// times it, so the ranks' values add up to it as shares do, and each
  /// rank's gradient of its part sums to the whole loss's (the sums' own
  /// gradients are summed over ranks by all_reduce_sum's rule).
  void shareOfWhole(const std::string &output) {
    if (!global_.count(output) || shares_.count(output) ||
        !shapes_.at(output).empty())
      return;
    meanShares_.insert(output); // the rows' fraction of the whole's value
    if (rows_ == globalRows_) { // the whole batch here: it is its own share
      shares_.insert(output);
      return;
    }
    const std::string whole = freshName(output + ".all_ranks");
    GraphNode *producer = nullptr;
    for (GraphNode &node : result_.nodes)
      for (std::string &name : node.names)
        if (name == output) {
          name = whole;
          producer = &node;
        }
    if (!producer)
      return; // a parameter returned as it is: not from the batch
    const plan::DType dtype = producer->dtype;
    const std::string path = producer->path;
    for (GraphNode &node : result_.nodes)
      std::replace(node.inputs.begin(), node.inputs.end(), output, whole);
    for (BufferUpdate &update : result_.updates)
      if (update.value == output)
        update.value = whole;
    GraphNode part;
    part.names = {output};
    part.op = "mul";
    part.inputs = {whole, constant(double(rows_) / double(globalRows_), dtype,
                                   kShareScale)};
    part.shapes = {{}};
    part.dtype = dtype;
    part.path = path;
    result_.nodes.push_back(std::move(part));
    shapes_[whole] = {};
    global_.insert(whole);
    global_.erase(output);
    shares_.insert(output);
  }

  /// The buffers forward updates (a training-mode batch norm's running
  /// statistics) must get the global batch's value, the same on every
  /// rank: a share is summed over ranks first; a value of this rank's rows
  /// is refused.
  void checkUpdates() {
    for (BufferUpdate &update : result_.updates) {
      if (shares_.count(update.value))
        update.value = summedOverRanks(update.value, update.path);
      if (layouts_.count(update.value))
        throw fail(
            update.path,
            "buffer '" + update.buffer +
                "' is updated from the batch rows (by '" + update.value +
                "'), one value per row, and each rank holds its own rows only; "
                "run without --data-parallel (every rank runs the whole "
                "batch)");
    }
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
    if (*reduction == BatchReduction::Sum && !statistics_)
      sumShares_.insert(name);
    if (*reduction != BatchReduction::Sum)
      meanShares_.insert(name);
    const bool counted =
        node.op == "cross_entropy" || node.op == "linear_cross_entropy";
    if (*reduction == BatchReduction::Sum ||
        (rows_ == globalRows_ && !(counted && accumulating_))) {
      result_.nodes.push_back(std::move(node));
      return true;
    }
    if (counted) {
      shareOfCountedMean(std::move(node));
      return true;
    }
    GraphNode scale;
    scale.op = "mul";
    scale.names = {name};
    scale.shapes = {node.shapes[0]};
    scale.dtype = node.dtype;
    scale.path = node.path;
    node.names[0] = freshName(name + ".rows" + std::to_string(rows_));
    scale.inputs = {node.names[0], constant(double(rows_) / double(globalRows_),
                                            node.dtype, kShareScale)};
    shapes_[node.names[0]] = node.shapes[0];
    result_.nodes.push_back(std::move(node));
    result_.nodes.push_back(std::move(scale));
    return true;
  }

  /// A node appended to the result: `op` of `inputs`, one result of `shape`.
  std::string appendNode(const std::string &stem, const std::string &op,
                         bool familyOp, std::vector<std::string> inputs,
                         Shape shape, plan::DType dtype,
                         const std::string &path,
                         std::map<std::string, plan::AttrValue> attrs = {}) {
    GraphNode node;
    node.names = {freshName(stem)};
    node.op = op;
    node.familyOp = familyOp;
    node.inputs = std::move(inputs);
    node.shapes = {shape};
    node.dtype = dtype;
    node.path = path;
    node.attrs = std::move(attrs);
    shapes_[node.names[0]] = std::move(shape);
    result_.nodes.push_back(std::move(node));
    return result_.nodes.back().names[0];
  }

  /// cross_entropy's share of the global batch's mean: this rank's mean
  /// times its counted targets (those other than its ignore_index, torch's
  /// -100 by default) over all ranks' (all_reduce_sum), 0 on a rank that
  /// counts none. The shares add up to the whole batch's mean however the
  /// ignored targets fall on the ranks, and whatever rows each rank holds;
  /// a constant fraction of the rows gives the mean of the ranks' means
  /// instead (what DistributedDataParallel computes).
  void shareOfCountedMean(GraphNode node) {
    const std::string name = node.names[0], targets = node.inputs[1],
                      path = node.path;
    const plan::DType dtype = node.dtype;
    const double ignored = static_cast<double>(ignoredTarget(node));
    node.names[0] = freshName(name + ".rows" + std::to_string(rows_));
    const std::string mean = node.names[0];
    shapes_[mean] = {};
    result_.nodes.push_back(std::move(node));
    const std::string kept = appendNode(
        name + ".counted", "ne", true, {targets}, shapes_.at(targets),
        plan::DType::I64, path, {{"value", ignored}});
    // Counts in float32 (exact to 2^24 targets), whatever the loss's dtype;
    // the fraction is rounded to it once.
    const plan::DType f32 = plan::DType::F32;
    const std::string asFloat =
        appendNode(kept + ".float", "cast", true, {kept}, shapes_.at(targets),
                   f32, path, {{"dtype", std::string("float32")}});
    const std::string count =
        appendNode(name + ".count", "sum", true, {asFloat}, {}, f32, path);
    const std::string total = summedOverRanks(count, path, accumulating_);
    if (total != count)
      countTotals_.push_back(total);
    std::string fraction = appendNode(name + ".fraction", "div", false,
                                      {count, total}, {}, f32, path);
    if (dtype != f32)
      fraction =
          appendNode(fraction + ".cast", "cast", true, {fraction}, {}, dtype,
                     path, {{"dtype", std::string(plan::dtypeName(dtype))}});
    // A rank whose targets are all ignored has a mean of none (NaN, as
    // torch's): its share is 0.
    const std::string any =
        appendNode(name + ".any", "gt", true, {count}, {}, plan::DType::I64,
                   path, {{"value", 0.0}});
    const std::string counted =
        appendNode(mean + ".counted", "where", true,
                   {any, mean, constant(0.0, dtype)}, {}, dtype, path);
    GraphNode share;
    share.names = {name};
    share.op = "mul";
    share.inputs = {counted, fraction};
    share.shapes = {{}};
    share.dtype = dtype;
    share.path = path;
    result_.nodes.push_back(std::move(share));
  }

  /// Whether `node`, reading shares (and single rows when `readsBatch`),
  /// is linear in them: its result summed over ranks is its result on the
  /// shares summed over ranks. Sums and scalings of shares are shares.
  bool keepsShares(const GraphNode &node, bool readsBatch) const {
    if (readsBatch)
      return false;
    const size_t shares = static_cast<size_t>(std::count_if(
        node.inputs.begin(), node.inputs.end(),
        [&](const std::string &in) { return shares_.count(in) != 0; }));
    const std::string &op = node.op;
    if (op == "add" || op == "sub") return shares == node.inputs.size();
    if (op == "mul") return shares == 1;  // by a value every rank holds whole
    if (op == "div") return shares == 1 && shares_.count(node.inputs[0]);
    return op == "reshape" || op == "neg_out" || op == "sum" || op == "mean";
  }

  /// The dtype of value `name` (a result of a node placed so far, a
  /// parameter or an input).
  plan::DType dtypeOf(const std::string &name) const {
    for (auto node = result_.nodes.rbegin(); node != result_.nodes.rend();
         ++node)
      if (std::find(node->names.begin(), node->names.end(), name) !=
          node->names.end())
        return node->dtype;
    for (const GraphParam &param : result_.params)
      if (param.name == name)
        return param.dtype;
    for (const GraphInput &input : result_.inputs)
      if (input.name == name)
        return input.dtype;
    throw fail("nodes", "no value named '" + name + "'");
  }

  /// Statistics over the whole batch's rows: `var` over the batch dim, and
  /// `group_norm` with one channel per group whose normalized dims hold the
  /// batch (export --train's batch norm: [1, C, N * H * W]). Each becomes
  /// sums over this rank's rows, summed over ranks (all_reduce_sum), in two
  /// passes as torch's kernels: the mean, then the squares about it. With
  /// the whole batch on this rank the node stays as it is. False for any
  /// other node.
  bool overWholeBatch(GraphNode &node) {
    if (!node.familyOp || !layouts_.count(node.inputs[0]))
      return false;
    const BatchLayout layout = layouts_.at(node.inputs[0]);
    const Shape x = shapes_.at(node.inputs[0]);
    const int64_t rank = static_cast<int64_t>(x.size());
    const bool variance =
        node.op == "var" && reducesDim(node, rank, layout.axis);
    const bool norm = node.op == "group_norm" && rank >= 3 &&
                      layout.axis >= 2 &&
                      std::get<int64_t>(node.attrs.at("groups")) == x[1];
    if (!variance && !norm)
      return false;
    if (rows_ == globalRows_) { // this rank holds every row
      if (norm) {
        node.shapes[0] = x;
        layouts_[node.names[0]] = layout;
      } else {
        global_.insert(node.names[0]);
      }
      shapes_[node.names[0]] = node.shapes[0];
      result_.nodes.push_back(std::move(node));
      return true;
    }
    const std::string name = node.names[0], path = node.path;
    const plan::DType dtype = node.dtype;
    Shape whole =
        x; // the new nodes are written for the graph's batch, then split
    whole[layout.axis] = layout.entries(batch_);
    Shape dims;
    if (norm) {
      for (int64_t d = 2; d < rank; ++d)
        dims.push_back(d);
    } else if (auto listed = node.attrs.find("dims");
               listed != node.attrs.end()) {
      for (int64_t d : std::get<std::vector<int64_t>>(listed->second))
        dims.push_back(d < 0 ? d + rank : d);
    } else {
      for (int64_t d = 0; d < rank; ++d)
        dims.push_back(d);
    }
    // Elements per statistic over the global batch: this rank's count
    // scaled from its rows' entries to the global batch's.
    int64_t local = 1;
    for (int64_t d : dims)
      local *= x[d];
    const int64_t count =
        local / layout.entries(rows_) * layout.entries(globalRows_);
    Shape kept = x; // the statistics' shape, dims kept as 1
    for (int64_t d : dims)
      kept[d] = 1;
    auto emit = [&](const std::string &op, std::vector<std::string> inputs,
                    Shape shape,
                    std::map<std::string, plan::AttrValue> attrs = {},
                    std::string result = "") {
      GraphNode made;
      made.names = {result.empty() ? freshName(name + ".dp." + op) : result};
      made.op = op;
      made.inputs = std::move(inputs);
      made.familyOp = !attrs.empty() || op == "rsqrt";
      made.attrs = std::move(attrs);
      if (op == "reshape")
        made.ints = shape;
      made.shapes = {std::move(shape)};
      made.dtype = dtype;
      made.path = path;
      // The statistics' sums are divided by the micro-step's own count
      // (`count`): not a sum the graph takes for the whole batch.
      const bool wasStatistics = statistics_;
      statistics_ = true;
      process(made);
      statistics_ = wasStatistics;
      return made.names[0];
    };
    const std::map<std::string, plan::AttrValue> keep{{"dims", dims},
                                                      {"keepdim", int64_t{1}}};
    const std::string &input = node.inputs[0];
    const std::string mean = emit("mul",
                                  {emit("sum", {input}, kept, keep),
                                   constant(1.0 / double(count), dtype)},
                                  kept);
    const std::string centered = emit("sub", {input, mean}, whole);
    // The squares about a detached mean: the variance's derivative in the
    // mean is sum(x - mean) = 0, which float sums over a large batch leave
    // as noise times a large factor; without it the gradient is the fused
    // kernel's r * (g - mean(g) - xhat * mean(g * xhat)).
    const std::string about =
        emit("sub", {input, emit("detach", {mean}, kept)}, whole);
    const std::string squares =
        emit("sum", {emit("mul", {about, about}, whole)}, kept, keep);
    if (variance) { // torch's correction (1: the unbiased estimate)
      const int64_t correction =
          node.attrs.count("correction")
              ? std::get<int64_t>(node.attrs.at("correction"))
              : 1;
      const bool keepdim = node.attrs.count("keepdim") &&
                           std::get<int64_t>(node.attrs.at("keepdim")) != 0;
      const std::string sums =
          keepdim ? squares : emit("reshape", {squares}, node.shapes[0]);
      emit("mul", {sums, constant(1.0 / double(count - correction), dtype)},
           node.shapes[0], {}, name);
      return true;
    }
    const std::string spread =
        emit("mul", {squares, constant(1.0 / double(count), dtype)}, kept);
    const std::string eps =
        constant(std::get<double>(node.attrs.at("eps")), dtype);
    const std::string scale =
        emit("rsqrt", {emit("add", {spread, eps}, kept)}, kept);
    if (node.inputs.size() < 3) {
      emit("mul", {centered, scale}, whole, {}, name);
      return true;
    }
    Shape perChannel(static_cast<size_t>(rank - 1),
                     1); // [C, 1, ...]: broadcast over dims 2..
    perChannel[0] = x[1];
    const std::string normalized = emit("mul", {centered, scale}, whole);
    const std::string weight = emit("reshape", {node.inputs[1]}, perChannel);
    const std::string bias = emit("reshape", {node.inputs[2]}, perChannel);
    emit("add", {emit("mul", {normalized, weight}, whole), bias}, whole, {},
         name);
    return true;
  }

  /// A new name, unlike every value of the graph.
  std::string freshName(std::string stem) {
    while (taken_.count(stem))
      stem += "_";
    taken_.insert(stem);
    return stem;
  }

  /// A 0-d constant buffer holding `value`. A mean's share scale depends
  /// on the rank's rows (kShareScale); the statistics' constants do not.
  std::string constant(double value, plan::DType dtype,
                       const char *stem = "data_parallel.const") {
    GraphParam param = fillConstant(
        freshName(stem), value, dtype,
        graph_.params.empty() ? "cpu" : graph_.params.front().device,
        std::string_view(stem) == kShareScale
            ? "the data-parallel share of a mean over the batch"
            : "a constant of the data-parallel batch statistics");
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

  /// Gradient accumulation: a 0-d output adding a mean's share to a sum's
  /// (a token-mean loss plus a summed penalty over the rows) would need the
  /// mean's part scaled by 1 / K and the sum's not.
  void checkShareKinds() const {
    for (const std::string &output : graph_.outputs)
      if (sumShares_.count(output) && meanShares_.count(output))
        throw fail("outputs",
                   "output '" + output +
                       "' adds a mean over the batch's rows to a sum over "
                       "them; with --accumulate the micro-steps' means are "
                       "averaged and their sums added, so one output cannot "
                       "hold both: return the mean's part as a sum divided "
                       "by the global batch's rows, or run the step without "
                       "--accumulate");
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
      if (layout == layouts_.end() && global_.count(output))
        throw fail(
            "outputs",
            "output '" + output +
                "' is computed from the global batch's sums (summed over "
                "ranks), so "
                "every rank holds it whole; data-parallel outputs are each "
                "rank's "
                "rows, or a 0-d sum or mean over the rows (summed over ranks); "
                "a loss "
                "must be such a sum or mean, or sums and scalings of them");
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
  bool accumulating_ = false;
  /// Shares of a sum over the batch rows (not of a mean), and values
  /// computed from them that still add up over ranks.
  std::set<std::string> sumShares_;
  /// Shares of a mean over the batch rows (or a whole value's fraction),
  /// and values computed from them: with gradient accumulation each
  /// micro-step's is scaled by 1 / K, a sum's is not.
  std::set<std::string> meanShares_;
  /// The parts of the graph's summed cross_entropies (summedCrossEntropy):
  /// their means, products by name, guards by name and the guards'
  /// conditions.
  std::set<std::string> summedMeans_;
  std::map<std::string, SummedCrossEntropy> summedProducts_;
  std::map<std::string, SummedCrossEntropy> summedGuards_;
  std::set<std::string> summedConditions_;
  /// Inside overWholeBatch's rewrite of a batch statistic.
  bool statistics_ = false;
  std::vector<std::string> countTotals_;
  const std::set<std::string> &keepWhole_;
  const bool checkOutputs_;
  Graph result_;
  std::map<std::string, Shape> shapes_;  // rebatched where they hold the batch
  std::map<std::string, BatchLayout> layouts_;  // the values computed from the batch
  std::set<std::string> uniform_;
  // Values that are this rank's share of a sum over the batch rows.
  std::set<std::string> shares_;
  // Values computed from the ranks' shares summed (all_reduce_sum): the
  // global batch's, the same on every rank.
  std::set<std::string> global_;
  std::map<std::string, std::string> summed_; // a share -> its sum over ranks
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

Graph rebatchGraph(const Graph &graph, int64_t rows, int64_t globalRows,
                   MicroStepShares *microStep) {
  return withRebatcher(graph, rows, globalRows, true,
                       [&](Rebatcher &rebatcher) {
                         if (microStep)
                           rebatcher.accumulateMicroSteps();
                         Graph result = rebatcher.run();
                         if (microStep) {
                           microStep->countTotals = rebatcher.countTotals();
                           microStep->sumOutputs = rebatcher.sumOutputs();
                         }
                         return result;
                       });
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
