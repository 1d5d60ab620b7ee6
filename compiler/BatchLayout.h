//===- BatchLayout.h - where each value holds the batch rows ----*- C++ -*-===//
//
// The data-parallel forward (compiler/DataParallel.h) gives each rank some
// rows of the batch. The batch need not stay in dim 0: torch's
// nn.MultiheadAttention moves it to dim 1 ([T, B, E]), windowed attention
// folds it into window rows, an upsampling applies its matrix along the
// last dim with the batch elsewhere. These rules follow the batch through
// every op, and refuse an op that would mix rows of different samples.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "compiler/Graph.h"

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <vector>

namespace shardc::compiler {

/// Where a value holds the batch: dim `axis` has outer * batch * factor
/// entries, batch row b being entries [o * batch * factor + b * factor, ...
/// + factor) for each o < outer. [B, S, H] reshaped to [B * S, H] is axis
/// 0, factor S; [T, B, H] reshaped to [T * B, H] (torch's attention, seq
/// first) is axis 0, outer T: every rank's rows are T blocks of that dim.
struct BatchLayout {
  int64_t axis = 0;
  int64_t factor = 1;
  int64_t outer = 1;
  bool operator==(const BatchLayout &) const = default;
  /// The entries of dim `axis` for `rows` batch rows.
  int64_t entries(int64_t rows) const { return outer * rows * factor; }
};

/// One operand of a node: its shape, and its layout when it is computed
/// from the batch (nullopt: a parameter, a buffer or a value of them only).
struct BatchOperand {
  /// Already split: its batch dim holds this rank's entries, not the batch's.
  const std::vector<int64_t> *shape = nullptr;
  std::optional<BatchLayout> layout;
  /// Not from the batch, every element equal (a `fill` buffer, e.g. the
  /// all-ones attention mask of transformers' encoders): a broadcasting op
  /// may read as many entries of it as of the batch rows.
  bool uniform = false;
};

/// How a node is split: its results' layouts, and the uniform operands it
/// reads only in part, (operand, dim) cut to this rank's entries.
struct BatchSplit {
  std::vector<BatchLayout> results;
  std::vector<std::pair<size_t, int64_t>> cut;
};

/// Why a node cannot be split over the batch, without the node's place.
class BatchMixError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// How `node` is split, given its operands (at least
/// one computed from a batch of `batch` rows). Ops with no rule of their
/// own keep the batch in dim 0. Throws BatchMixError when the node acts
/// along the batch dim (softmax, a reduction, cat along it), contracts over
/// it (matmul, linear), combines it with a value not split with it, or
/// needs it elsewhere (conv's channels).
BatchSplit splitOverBatch(const GraphNode &node, const std::vector<BatchOperand> &operands,
                          int64_t batch);

/// How a node sums or averages over the batch rows: cross_entropy (the
/// mean over its [N, C] rows, the targets split with them),
/// conv_weight_grad (a sum over its samples, input and gradient split
/// alike), or a `sum` / `mean` whose dims include the batch's. On a rank such a
/// node gives its rows' part of the value over the global batch: a share (the
/// shares of a sum add up to it; a mean's share is its rows' mean scaled by
/// their fraction of the batch). nullopt for any other node.
enum class BatchReduction { Sum, Mean };
/// Whether reduction `node` (its `dims` attribute; none: every dim) of an
/// operand of `rank` dims reduces dim `dim`.
bool reducesDim(const GraphNode &node, int64_t rank, int64_t dim);
std::optional<BatchReduction>
reductionOverBatch(const GraphNode &node,
                   const std::vector<BatchOperand> &operands);

/// A value made of copies along one dim, as many as a multiple of `batch`:
/// torch's `expand` of a parameter to the batch (a class token, position
/// embeddings), every row the same. Written as `cat` of k copies of one
/// value, or `as_strided` with stride 0 on that dim. Its layout if it were
/// split with the batch (row b is copies [b * k / batch, (b + 1) * k /
/// batch)); nullopt for any other node.
std::optional<BatchLayout> replicaLayout(const GraphNode &node,
                                         const std::vector<int64_t> &copyShape, int64_t batch);

} // namespace shardc::compiler
