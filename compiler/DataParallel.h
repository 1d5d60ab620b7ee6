//===- DataParallel.h - one Plan for a data-parallel forward ----*- C++ -*-===//
//
// `shardc run --data-parallel` and JitOptions::data_parallel: the graph's
// inputs are the global batch (dim 0); each rank runs forward on its slice
// (runtime/DataParallel.h). The Plan is SPMD, so it carries one forward per
// distinct micro-batch size (at most two, plus the collectives-only
// function of a rank with no rows); init is shared.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "compiler/Pipeline.h"

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace shardc::compiler {

/// `graph` with its batch set to `rows`: dim 0 of every input and of every
/// value computed from the batch rows (reshape targets included). A sum or
/// mean over the batch rows (cross_entropy, a loss's mean) becomes this
/// rank's share of it, which sums and scalings keep; a 0-d share may be an
/// output (summed over ranks). A mean's shares add up over `globalRows`
/// rows (0: the graph's own batch). A share used any other way (a batch
/// norm's mean subtracted from the rows, a product) is first summed over
/// ranks (`all_reduce_sum`): every rank then holds the global batch's
/// value. `var` over the batch rows and `group_norm` normalizing each
/// channel over them (a training-mode batch norm) become such sums, in two
/// passes. Throws GraphError naming the node when the forward mixes rows of
/// the batch in another way (an op along dim 0 of a batch value, a reshape
/// that folds dim 0 into another), when a buffer is updated from single
/// rows, or when an output is neither a batch value (concatenated over
/// ranks) nor a 0-d share.
/// cross_entropy's share is its mean times this rank's counted targets
/// (those other than its ignore_index) over all ranks' (a count summed over
/// ranks), so the shares add up to the global batch's mean (a rank with no rows
/// joins that sum with zeros: runtime::collectivesOnly). With `microStep`
/// the graph is one micro-step of gradient accumulation: see
/// MicroStepShares.
struct MicroStepShares;
Graph rebatchGraph(const Graph &graph, int64_t rows, int64_t globalRows = 0,
                   MicroStepShares *microStep = nullptr);

/// What gradient accumulation (compiler/GradientAccumulation.h) needs from
/// rebatchGraph's split of one micro-step.
struct MicroStepShares {
  /// The nodes that sum cross_entropy's counted targets over ranks, there
  /// even when `rows` is the whole `globalRows` (the accumulated step sums
  /// them over the micro-steps too).
  std::vector<std::string> countTotals;
  /// The 0-d outputs that are shares of a sum over the batch rows (a
  /// `loss.sum()`, a sum divided by a count given as an input), not of a
  /// mean: the micro-steps' shares add up to the whole batch's sum as they
  /// are, where a mean's are scaled by 1 / K. An output mixing the two
  /// kinds is refused.
  std::set<std::string> sumOutputs;
};

/// The name stem of a mean's share scale (a constant buffer rebatchGraph
/// adds): the one value that depends on the rank's rows.
inline constexpr const char *kShareScale = "data_parallel.share_scale";

/// Inputs and outputs that hold the batch in a dim other than 0 (torch's
/// sequence-first [S, B, E]): name -> that dim.
using BatchDims = std::map<std::string, int64_t>;

/// `graph` rewritten so that every input of `inputDims` takes its batch in
/// dim 0 (its shape with that dim moved to the front, then a `permute` back
/// to the layout forward expects) and every output that holds the batch in
/// one other dim gives it in dim 0 (a `permute` at the end); `outputDims`
/// receives those outputs' dims. What `shardc run --data-parallel
/// --batch-dim` splits; the caller moves the inputs' dims to the front and
/// the outputs' back (runtime::moveBatchDim). Throws GraphError for an
/// unknown input or a dim out of range.
Graph batchFirstGraph(const Graph &graph, const BatchDims &inputDims, BatchDims &outputDims);

/// A 0-d input (a count, a step, a temperature: transformers' Trainer
/// passes `num_items_in_batch`, the labels counted over every rank and
/// micro-step) has no batch to split: every rank, and every micro-step of
/// gradient accumulation, reads it whole, as a parameter.
inline bool isReplicatedInput(const GraphInput &input) {
  return input.shape.empty();
}

/// The graph's global batch: the common dim 0 of its inputs, the 0-d ones
/// aside. Throws GraphError when there is no input with a dim 0 or they
/// disagree.
int64_t graphBatchRows(const Graph &graph);

/// The graph's first input that holds the batch (not 0-d); throws as
/// graphBatchRows.
const GraphInput &firstBatchInput(const Graph &graph);

/// A data-parallel training step (`shardc run --grad LOSS --optimizer ...
/// --data-parallel`): each rank differentiates its share of the loss over
/// the global batch (rebatchGraph, then withGradients), and the
/// reduce-scatter sums the ranks' gradients into each shard.
struct DataParallelTraining {
  /// The graph file's text `graph` was read from (withGradients works on
  /// a file's text).
  std::string graphText;
  std::string loss;
  /// withGradients' fuseLinearCrossEntropy (--fuse-linear-cross-entropy).
  bool fuseLinearCrossEntropy = false;
  OptimizerOptions optimizer;
  /// Run on each joint graph before it is compiled (--load's rewrite of the
  /// init chains); may be empty.
  std::function<void(Graph &)> prepare;
  /// Filled in: the parameters the loss does not depend on.
  std::vector<std::string> withoutGradient;
};

/// The joint graph one rank runs in a data-parallel training step of
/// `rows` of the `globalRows` rows: `graph` rebatched, its loss this rank's
/// share, differentiated, repeated for `training.optimizer.accumulate`
/// micro-steps of rows / accumulate rows each, then `training.prepare`d.
/// Compile it with ShardOptions::sumGradients. Throws GraphError.
Graph dataParallelStepGraph(const Graph &graph, int64_t rows,
                            int64_t globalRows, DataParallelTraining &training);

/// Throws GraphError (naming `source`) unless `globalRows` splits evenly
/// over `worldSize` ranks and `accumulate` micro-steps each, as
/// data-parallel training needs.
void checkTrainingBatchSplits(const std::string &source, int64_t globalRows,
                              int64_t worldSize, int64_t accumulate = 1);

/// compileToPlan for a data-parallel forward of `globalRows` rows over
/// `worldSize` ranks: "init" and "forward" (rank 0's micro-batch), plus
/// "forward.rows<K>" for the other size and for 0 rows when some rank has
/// none. Errors go to the context's diagnostic handler (failure) or are
/// thrown as GraphError (a graph that cannot be split). With `training`,
/// forward is that training step, and the batch must split evenly.
mlir::FailureOr<plan::Plan>
compileDataParallel(const Graph &graph, int64_t globalRows, int64_t worldSize,
                    mlir::MLIRContext &context,
                    const ShardOptions &options = {},
                    DataParallelTraining *training = nullptr);

} // namespace shardc::compiler
