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

#include <map>
#include <string>

namespace shardc::compiler {

/// `graph` with its batch set to `rows`: dim 0 of every input and of every
/// value computed from the batch rows (reshape targets included). Throws
/// GraphError naming the node when the forward mixes rows of the batch
/// (an op along dim 0 of a batch value, a reduction such as cross_entropy
/// over it, a reshape that folds dim 0 into another), or when an output is
/// not a batch value (the outputs are concatenated over ranks).
Graph rebatchGraph(const Graph &graph, int64_t rows);

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

/// The graph's global batch: the common dim 0 of its inputs. Throws
/// GraphError when there is no input or they disagree.
int64_t graphBatchRows(const Graph &graph);

/// compileToPlan for a data-parallel forward of `globalRows` rows over
/// `worldSize` ranks: "init" and "forward" (rank 0's micro-batch), plus
/// "forward.rows<K>" for the other size and for 0 rows when some rank has
/// none. Errors go to the context's diagnostic handler (failure) or are
/// thrown as GraphError (a graph that cannot be split).
mlir::FailureOr<plan::Plan> compileDataParallel(const Graph &graph, int64_t globalRows,
                                                int64_t worldSize, mlir::MLIRContext &context,
                                                const ShardOptions &options = {});

} // namespace shardc::compiler
