//===- BatchLayout.cpp - where each value holds the batch rows ------------===//
#include "compiler/BatchLayout.h"

#include "runtime/Kernels.h"
#include "runtime/OpTable.h"

#include <algorithm>
#include <functional>
#include <variant>

namespace shardc::compiler {

namespace {

using Shape = std::vector<int64_t>;

[[noreturn]] void mix(const std::string &reason) { throw BatchMixError(reason); }

std::string quoted(const std::string &name) { return "'" + name + "'"; }

int64_t rankOf(const BatchOperand &operand) {
  return static_cast<int64_t>(operand.shape->size());
}

/// Rules see the node, its operands and the batch size.
struct NodeBatch {
  const GraphNode &node;
  const std::vector<BatchOperand> &operands;
  int64_t batch;
  std::vector<std::pair<size_t, int64_t>> &cut;

  int64_t resultRank() const { return static_cast<int64_t>(node.shapes[0].size()); }

  std::string where(const BatchLayout &layout) const {
    return "dim " + std::to_string(layout.axis);
  }

  const BatchOperand &first() const {
    for (const BatchOperand &operand : operands)
      if (operand.layout) return operand;
    mix("no operand holds the batch");  // callers guarantee one does
  }

  /// The one result layout every batch operand maps to: `toResult` gives
  /// the result dim of operand i's batch dim.
  BatchLayout agreed(const std::function<int64_t(size_t, int64_t)> &toResult) const {
    std::optional<BatchLayout> result;
    size_t from = 0;
    for (size_t i = 0; i < operands.size(); ++i) {
      if (!operands[i].layout) continue;
      BatchLayout mapped = *operands[i].layout;
      mapped.axis = toResult(i, mapped.axis);
      if (result && !(*result == mapped))
        mix(quoted(node.op) + " pairs " + quoted(node.inputs[from]) + "'s batch rows (" +
            where(*operands[from].layout) + ") with " + quoted(node.inputs[i]) + "'s (" +
            where(*operands[i].layout) + ") so that rows of different samples meet");
      if (!result) from = i;
      result = mapped;
    }
    return *result;
  }

  /// A broadcasting op: operands aligned from their last dims. An operand
  /// not split with the batch must have 1 entry where the result has the
  /// batch (it is then read whole by every row).
  BatchLayout broadcasting() const {
    const int64_t rank = resultRank();
    BatchLayout result = agreed([&](size_t i, int64_t axis) {
      return axis + (rank - rankOf(operands[i]));
    });
    for (size_t i = 0; i < operands.size(); ++i) {
      if (operands[i].layout) continue;
      const int64_t dim = result.axis - (rank - rankOf(operands[i]));
      if (dim < 0 || (*operands[i].shape)[dim] == 1) continue;
      if (operands[i].uniform && (*operands[i].shape)[dim] == result.entries(batch)) {
        cut.emplace_back(i, dim);
        continue;
      }
      mix(quoted(node.op) + " pairs the batch rows (dim " + std::to_string(result.axis) +
            " of its result) with dim " + std::to_string(dim) + " of " +
            quoted(node.inputs[i]) + " " + runtime::shapeToString(*operands[i].shape) +
            ", which is not computed from the batch");
    }
    return result;
  }

  /// An op that keeps every dim where it is; every operand must hold the
  /// batch, in the same dim.
  BatchLayout inPlace() const {
    BatchLayout result = agreed([](size_t, int64_t axis) { return axis; });
    for (size_t i = 0; i < operands.size(); ++i) {
      if (operands[i].layout) continue;
      const Shape &shape = *operands[i].shape;
      if (operands[i].uniform && result.axis < static_cast<int64_t>(shape.size()) &&
          shape[result.axis] == result.entries(batch)) {
        cut.emplace_back(i, result.axis);
        continue;
      }
      mix(quoted(node.op) + " combines batch rows with " + quoted(node.inputs[i]) +
          ", which is not computed from the batch");
    }
    return result;
  }

  void notAlong(int64_t dim, const BatchLayout &layout) const {
    if (dim == layout.axis)
      mix(quoted(node.op) + " acts along " + where(layout) +
          ", the batch; each rank holds only its rows, so the forward cannot be split over "
          "ranks");
  }

  /// The ops with no rule of their own (convolutions, pooling, norms over
  /// channels, attention, the experts): the batch in dim 0 of every batch
  /// operand and of every result.
  BatchLayout leading() const {
    BatchLayout result = agreed([](size_t, int64_t axis) { return axis; });
    if (result.axis != 0)
      mix(quoted(node.op) + " needs the batch in dim 0, where " +
          quoted(node.inputs[&first() - operands.data()]) + " holds it in " + where(result));
    return result;
  }
};

int64_t normalized(int64_t dim, int64_t rank) { return dim < 0 ? dim + rank : dim; }

int64_t intAttr(const GraphNode &node, const char *key) {
  return std::get<int64_t>(node.attrs.at(key));
}

BatchLayout reshaped(const NodeBatch &nb) {
  const Shape &in = *nb.operands[0].shape;
  const BatchLayout layout = *nb.operands[0].layout;
  const Shape &out = nb.node.shapes[0];
  // Row-major, the batch index is one digit of the element index: stride
  // factor * (the dims after it), range batch. A result dim keeps the
  // batch rows apart when that digit lies inside it: the dims after it
  // divide the stride, and its size is a whole number of batch digits.
  // With two or more rows one dim at most fits; a single row fits several
  // (its digit has range 1: [1, T, D] -> [1, T, H, E] fits dim 0 and, as T
  // rows of E * H, dim 1), and the first is the one that keeps it where the
  // model keeps a batch.
  int64_t inner = layout.factor;
  for (size_t d = static_cast<size_t>(layout.axis) + 1; d < in.size(); ++d) inner *= in[d];
  int64_t after = 1;  // the product of the result dims after d
  std::optional<BatchLayout> first;
  for (size_t d = out.size(); d-- > 0;) {
    if (after > 0 && inner % after == 0) {
      const int64_t factor = inner / after;
      if (out[d] > 0 && out[d] % (nb.batch * factor) == 0)
        first = BatchLayout{static_cast<int64_t>(d), factor,
                            out[d] / (nb.batch * factor)};
    }
    after *= out[d];
  }
  if (first)
    return *first;
  mix("'reshape' turns the batch (dim " + std::to_string(layout.axis) + ", " +
      std::to_string(nb.batch) + " rows" +
      (layout.factor > 1 ? " of " + std::to_string(layout.factor) + " each" : "") + ") into " +
      runtime::shapeToString(out) + "; only ops that keep every batch row apart can be split");
}

BatchLayout matmul(const NodeBatch &nb) {
  const int64_t rank = nb.resultRank();
  const int64_t rankA = rankOf(nb.operands[0]), rankB = rankOf(nb.operands[1]);
  BatchLayout result = nb.agreed([&](size_t i, int64_t axis) {
    const int64_t r = i == 0 ? rankA : rankB;
    if (i == 0 ? axis == r - 1 : (r == 1 || axis == r - 2))
      mix("'matmul' contracts over dim " + std::to_string(axis) + " of " +
          quoted(nb.node.inputs[i]) + ", the batch");
    if (i == 0) return rankB == 1 ? axis : axis + (rank - r);
    if (rankA == 1) return axis == r - 1 ? rank - 1 : axis;
    return axis + (rank - r);
  });
  // A shared leading dim must be 1 in an operand not split with the batch.
  for (size_t i = 0; i < 2; ++i) {
    const int64_t r = i == 0 ? rankA : rankB;
    if (nb.operands[i].layout || r < 2) continue;
    const int64_t dim = result.axis - (rank - r);
    if (dim >= 0 && dim < r - 2 && (*nb.operands[i].shape)[dim] != 1)
      mix("'matmul' pairs the batch rows with dim " + std::to_string(dim) + " of " +
          quoted(nb.node.inputs[i]) + ", which is not computed from the batch");
  }
  return result;
}

BatchLayout familyOp(const NodeBatch &nb, const plan::OpInfo &info) {
  const GraphNode &node = nb.node;
  const int64_t rank = rankOf(nb.first());
  switch (info.family) {
  case plan::OpFamily::Unary:
  case plan::OpFamily::Cast:
    return nb.inPlace();
  case plan::OpFamily::Compare:
  case plan::OpFamily::Where:
    return nb.broadcasting();
  case plan::OpFamily::Random: {
    // dropout: element j of a rank's rows is the whole batch's element
    // r * (the rank's elements) + j only when the rows lead, one block;
    // the step counter (operand 1) is every rank's whole
    if (!nb.operands[0].layout)
      mix("'dropout' reads the batch only through its step counter " +
          quoted(node.inputs[1]));
    BatchLayout layout = *nb.operands[0].layout;
    if (layout.axis != 0 || layout.outer != 1)
      mix("'dropout' masks a tensor whose batch rows are " + nb.where(layout) +
          ", not its leading dim; its mask follows the whole tensor's element "
          "order, which "
          "a rank's rows do not continue there");
    return layout;
  }
  case plan::OpFamily::Scan: {
    BatchLayout layout = nb.inPlace();
    nb.notAlong(normalized(intAttr(node, "dim"), rank), layout);
    return layout;
  }
  case plan::OpFamily::Index: {
    // gather from a table not split with the batch, at batch indices: each
    // row reads with its own indices, whatever `dim` is.
    if (node.op == "gather" && !nb.operands[0].layout) return *nb.operands[1].layout;
    BatchLayout layout = nb.inPlace();
    nb.notAlong(normalized(intAttr(node, "dim"), rank), layout);
    return layout;
  }
  case plan::OpFamily::Reduce: {
    BatchLayout layout = nb.inPlace();
    auto dims = node.attrs.find("dims");
    if (dims == node.attrs.end())
      mix(quoted(node.op) + " reduces every dim, the batch's (" + nb.where(layout) +
          ") too; each rank holds only its rows, so the forward cannot be split over ranks");
    const bool keep = node.attrs.count("keepdim") && intAttr(node, "keepdim") != 0;
    int64_t before = 0;
    for (int64_t d : std::get<std::vector<int64_t>>(dims->second)) {
      d = normalized(d, rank);
      nb.notAlong(d, layout);
      if (d < layout.axis) ++before;
    }
    layout.axis -= keep ? 0 : before;
    return layout;
  }
  case plan::OpFamily::GroupNorm: {
    // The batch folded into the channels ([1, B * C, H * W], an instance
    // norm written as batch_norm over one sample): every group must lie in
    // one row's channels, and there must be no per-channel weight.
    const BatchLayout layout = *nb.operands[0].layout;
    if (layout.axis != 1 || nb.operands.size() > 1) return nb.leading();
    const int64_t perGroup = layout.entries(nb.batch) / intAttr(node, "groups");
    if (layout.factor % perGroup != 0)
      mix("'group_norm' normalizes groups of " + std::to_string(perGroup) +
          " channels across the batch rows folded into dim 1");
    return layout;
  }
  case plan::OpFamily::AllReduce:
    // The data-parallel rewrite puts it after a sum over the rows, never
    // on rows: rows of different ranks are different samples.
    mix("'all_reduce_sum' adds the ranks' values elementwise, and each rank "
        "holds other batch "
        "rows (" +
        nb.where(*nb.operands[0].layout) +
        "); only a sum over the rows can be "
        "summed over ranks");
  case plan::OpFamily::Conv:
    if (node.op == "conv_weight_grad") // reductionOverBatch takes the rest
      mix("'conv_weight_grad' sums over the batch rows of its input and "
          "gradient, and "
          "here they are not the same rows in dim 0 of both");
    return nb.leading();
  case plan::OpFamily::View:
    mix("'as_strided' reads its input through strides that may cross batch rows; only ops "
        "that keep every batch row apart can be split");
  default:
    return nb.leading();
  }
}

BatchLayout plainOp(const NodeBatch &nb) {
  const GraphNode &node = nb.node;
  const std::string &op = node.op;
  if (op == "add" || op == "sub" || op == "mul" || op == "div") return nb.broadcasting();
  if (op == "gelu" || op == "silu" || op == "relu" || op == "detach")
    return nb.inPlace();
  if (op == "reshape") return reshaped(nb);
  if (op == "matmul") return matmul(nb);
  if (op == "permute" || op == "transpose") {
    BatchLayout layout = *nb.operands[0].layout;
    if (op == "transpose") {
      const int64_t d0 = node.integer("dim0"), d1 = node.integer("dim1");
      layout.axis = layout.axis == d0 ? d1 : layout.axis == d1 ? d0 : layout.axis;
    } else {
      layout.axis = std::find(node.ints.begin(), node.ints.end(), layout.axis) - node.ints.begin();
    }
    return layout;
  }
  if (op == "embedding") {
    // A table [V, D] computed from the batch, read at constant ids (the
    // exporter's interpolation along a dim): fine while the batch is in D.
    if (!nb.operands[0].layout) return *nb.operands[1].layout;
    BatchLayout layout = *nb.operands[0].layout;
    if (nb.operands[1].layout || layout.axis == 0)
      mix("'embedding' looks up rows of " + quoted(node.inputs[0]) +
          " at ids that cross its batch rows");
    layout.axis = nb.resultRank() - 1;
    return layout;
  }
  if (op == "linear" || op == "layer_norm" || op == "rms_norm") {
    for (size_t i = 1; i < nb.operands.size(); ++i)
      if (nb.operands[i].layout)
        mix(quoted(op) + "'s " + quoted(node.inputs[i]) + " is computed from the batch");
    const BatchLayout layout = *nb.operands[0].layout;
    if (layout.axis == rankOf(nb.operands[0]) - 1)
      mix(quoted(op) + (op == "linear" ? " contracts over " : " normalizes over ") +
          nb.where(layout) + ", the batch");
    return layout;
  }
  if (op == "cat" && nb.first().layout->axis == node.integer("dim")) {
    // Joined along the batch's dim (RAFT runs both frames through one
    // encoder): each operand's blocks follow the previous one's.
    const BatchLayout &first = *nb.first().layout;
    BatchLayout joined{first.axis, first.factor, 0};
    for (size_t i = 0; i < nb.operands.size(); ++i) {
      const std::optional<BatchLayout> &layout = nb.operands[i].layout;
      if (!layout)
        mix("'cat' joins batch rows with " + quoted(node.inputs[i]) +
            ", which is not computed from the batch");
      if (layout->axis != first.axis || layout->factor != first.factor)
        mix("'cat' joins " + quoted(node.inputs[i]) + ", whose batch rows are laid out "
            "otherwise than the first operand's, along the batch's dim");
      joined.outer += layout->outer;
    }
    return joined;
  }
  if (op == "softmax" || op == "slice" || op == "split" || op == "cat") {
    BatchLayout layout = nb.inPlace();
    nb.notAlong(node.integer("dim"), layout);
    return layout;
  }
  if (op == "rotary_embedding") {
    BatchLayout layout = nb.inPlace();
    if (layout.axis >= 2)
      mix("'rotary_embedding' counts positions along dim 2, and the batch is in " +
          nb.where(layout));
    return layout;
  }
  if (op == "scaled_dot_product_attention")
    for (size_t i = 0; i < nb.operands.size(); ++i)
      if (!nb.operands[i].layout && (*nb.operands[i].shape)[0] != 1)
        mix("'scaled_dot_product_attention' pairs the batch rows with dim 0 of " +
            quoted(node.inputs[i]) + " " + runtime::shapeToString(*nb.operands[i].shape) +
            ", which is not computed from the batch");
  return nb.leading();  // scaled_dot_product_attention, cross_entropy
}

/// Pieces of the batch's dim (split sizes, a slice's bounds) that are whole
/// blocks of batch rows: each piece's layout; nullopt for another dim.
std::optional<std::vector<BatchLayout>> piecesOfBatch(const NodeBatch &nb) {
  const GraphNode &node = nb.node;
  if ((node.op != "split" && node.op != "slice") || node.integer("dim") != nb.first().layout->axis)
    return std::nullopt;
  const BatchLayout layout = *nb.first().layout;
  const int64_t block = nb.batch * layout.factor;
  std::vector<int64_t> sizes = node.ints;
  if (node.op == "slice") {
    if (node.integer("step") != 1 || node.integer("start") % block != 0)
      mix("'slice' takes entries of dim " + std::to_string(layout.axis) +
          ", the batch's, that are not whole blocks of its " + std::to_string(nb.batch) +
          " rows");
    sizes = {node.integer("end") - node.integer("start")};
  }
  std::vector<BatchLayout> pieces;
  for (int64_t size : sizes) {
    if (size % block != 0)
      mix(quoted(node.op) + " cuts dim " + std::to_string(layout.axis) +
          ", the batch's, into a piece of " + std::to_string(size) +
          " entries, not whole blocks of its " + std::to_string(nb.batch) + " rows");
    pieces.push_back({layout.axis, layout.factor, size / block});
  }
  return pieces;
}

} // namespace

BatchSplit splitOverBatch(const GraphNode &node, const std::vector<BatchOperand> &operands,
                          int64_t batch) {
  BatchSplit split;
  NodeBatch nb{node, operands, batch, split.cut};
  if (!node.familyOp)
    if (std::optional<std::vector<BatchLayout>> pieces = piecesOfBatch(nb)) {
      split.results = std::move(*pieces);
      return split;
    }
  BatchLayout layout;
  if (node.familyOp) {
    std::optional<plan::OpCode> code = plan::parseOpCode(node.op);
    layout = code ? familyOp(nb, plan::opInfo(*code)) : nb.leading();
  } else {
    layout = plainOp(nb);
  }
  split.results.assign(node.names.size(), layout);
  return split;
}

bool reducesDim(const GraphNode &node, int64_t rank, int64_t dim) {
  auto dims = node.attrs.find("dims");
  if (dims == node.attrs.end())
    return true; // no dims: every dim
  for (int64_t d : std::get<std::vector<int64_t>>(dims->second))
    if (normalized(d, rank) == dim)
      return true;
  return false;
}

std::optional<BatchReduction>
reductionOverBatch(const GraphNode &node,
                   const std::vector<BatchOperand> &operands) {
  if (operands.empty() || !operands[0].layout)
    return std::nullopt;
  const BatchLayout &layout = *operands[0].layout;
  if (node.op == "cross_entropy" || node.op == "linear_cross_entropy") {
    // The targets hold the same rows as the logits' (a fused head's
    // input's) dim 0; a fused head's weight is not from the batch.
    const size_t count = node.op == "cross_entropy" ? 2 : 3;
    if (layout.axis != 0 || operands.size() != count || !operands[1].layout ||
        !(*operands[1].layout == layout) || (count == 3 && operands[2].layout))
      return std::nullopt;
    return BatchReduction::Mean;
  }
  if (node.op == "conv_weight_grad") {
    // Sums over its samples: the input's and the gradient's rows must be
    // the same samples.
    if (layout.axis != 0 || operands.size() != 2 || !operands[1].layout ||
        !(*operands[1].layout == layout))
      return std::nullopt;
    return BatchReduction::Sum;
  }
  if (!node.familyOp || (node.op != "sum" && node.op != "mean") ||
      !reducesDim(node, rankOf(operands[0]), layout.axis))
    return std::nullopt;
  return node.op == "sum" ? BatchReduction::Sum : BatchReduction::Mean;
}

std::optional<BatchLayout> replicaLayout(const GraphNode &node, const Shape &copyShape,
                                         int64_t batch) {
  if (batch < 1 || node.inputs.empty()) return std::nullopt;
  if (node.op == "as_strided") {
    const auto &size = std::get<std::vector<int64_t>>(node.attrs.at("size"));
    const auto &stride = std::get<std::vector<int64_t>>(node.attrs.at("stride"));
    for (size_t d = 0; d < size.size(); ++d)
      if (stride[d] == 0 && size[d] > 0 && size[d] % batch == 0)
        return BatchLayout{static_cast<int64_t>(d), size[d] / batch};
    return std::nullopt;
  }
  if (node.op != "cat") return std::nullopt;
  const int64_t copies = static_cast<int64_t>(node.inputs.size());
  if (copies % batch != 0) return std::nullopt;
  for (const std::string &input : node.inputs)
    if (input != node.inputs[0]) return std::nullopt;
  const int64_t dim = node.integer("dim");
  return BatchLayout{dim, copies / batch * copyShape[dim]};
}

} // namespace shardc::compiler
