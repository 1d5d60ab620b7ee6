// Data-parallel forward (`shardc run --data-parallel`, JitOptions::
// data_parallel; docs/cli.md): every forward input is the global batch,
// split along dim 0 over the ranks; each rank runs forward on its own rows
// only and borrows the other ranks' shards through the same all-gathers.
//
// The Plan stays SPMD: it holds one forward function per distinct
// micro-batch size. "forward" is rank 0's (the largest slice); a rank with
// another number of rows K runs forwardFunctionName(K). A rank with no rows
// runs a function with only the forward's collectives (and the allocations
// they fill), so the other ranks' all-gathers complete and its memory is
// predicted from what it really does.
#pragma once

#include "runtime/HostTensor.h"
#include "runtime/Plan.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shardc::runtime {

/// Rows [begin, begin + rows) of a global batch of `batch` rows on `rank` of
/// `worldSize`: the first batch % worldSize ranks get one row more.
struct BatchSlice {
  int64_t begin = 0;
  int64_t rows = 0;
};
BatchSlice batchSlice(int64_t batch, int64_t worldSize, int64_t rank);

/// The distinct micro-batch sizes of `batch` rows over `worldSize` ranks,
/// largest (rank 0's) first: one or two sizes.
std::vector<int64_t> microBatchSizes(int64_t batch, int64_t worldSize);

/// The plan function a rank with `rows` rows runs when rank 0 has
/// `firstRows`: "forward" for firstRows, else "forward.rows<K>".
std::string forwardFunctionName(int64_t rows, int64_t firstRows);

/// `forward` reduced to its collectives: every all_gather with the alloc
/// and free of the buffers it fills, and every all_reduce_sum joined with
/// zeros (this rank adds nothing to the sum of a count or a statistic); no
/// inputs, no outputs. What a rank with no rows of the batch runs.
plan::Function collectivesOnly(const plan::Function &forward, const std::string &name);

/// The global batch of `inputs`: their common dim 0, the 0-d inputs aside
/// (every rank reads those whole). Throws RuntimeError when none has rows
/// or they disagree.
int64_t globalBatchRows(const std::vector<HostTensor> &inputs);

/// What one rank runs in a data-parallel forward.
struct RankForward {
  std::string function;             // plan function name
  BatchSlice slice;                 // its rows of the global batch
  std::vector<HostTensor> inputs;   // its rows of every input, 0-d ones whole (none: 0 rows)
};

/// Rank `rank`'s function and input rows. `globalInputs` are ordered like
/// "forward"'s inputs with the global batch in dim 0; checks that the plan
/// was compiled for that batch (it holds every function the split needs).
RankForward rankForward(const plan::Plan &plan, const std::vector<HostTensor> &globalInputs,
                        int64_t rank);

/// Rows [begin, begin + rows) of `tensor` along dim 0.
HostTensor sliceRows(const HostTensor &tensor, int64_t begin, int64_t rows);

/// `tensor` with dim `dim` moved to the front ([S, B, E] with dim 1 gives
/// [B, S, E]), or back from the front with `toFront` false: the batch of a
/// sequence-first input or output (`shardc run --batch-dim`).
HostTensor moveBatchDim(const HostTensor &tensor, int64_t dim, bool toFront);

/// Moves the batch of every output named in `dims` from dim 0 back to its
/// dim there (the outputs a data-parallel forward gave batch-first).
void restoreBatchDims(std::vector<HostTensor> &outputs,
                      const std::map<std::string, int64_t> &dims);

/// One 0-d output of every rank (in rank order), each the rank's share of
/// a value over the global batch (compiler/DataParallel.h): their sum, in
/// long double and rounded once. Throws RuntimeError for int64 or a
/// mismatched share.
HostTensor sumRankShares(const std::vector<const HostTensor *> &shares);

/// The global outputs: every rank's outputs concatenated along dim 0 in rank
/// order, but 0-d outputs (the ranks' shares of a loss over the global
/// batch, compiler/DataParallel.h) summed in rank order in long double and
/// rounded once; ranks with no rows hold no outputs and are skipped.
/// perRank[0] must have them all (rank 0 always has rows).
/// Per output of `f`: whether its buffer is `replicated`.
std::vector<bool> replicatedOutputs(const plan::Function &f);

/// `replicated[i]`: output i is the same on every rank (plan::Buffer::
/// replicated), rank 0's is taken; missing entries are false.
std::vector<HostTensor> concatRankOutputs(const std::vector<std::vector<HostTensor>> &perRank,
                                          const std::vector<bool> &replicated = {});

/// Orders `given` like "forward"'s inputs for a data-parallel run, checking
/// each: name known and given once, dtype as forward's, shape as forward's
/// but for dim 0 (the global batch, the same for every input). Throws
/// RuntimeError.
std::vector<HostTensor> matchGlobalInputs(const plan::Plan &plan,
                                          const std::vector<HostTensor> &given);

/// Deterministic inputs (makeDeterministicInputs) for a global batch of
/// `globalRows` rows: forward's inputs with dim 0 set to globalRows.
std::vector<HostTensor> makeGlobalInputs(const plan::Plan &plan, int64_t globalRows,
                                         uint64_t seed,
                                         const std::map<std::string, int64_t> &intBounds);

}  // namespace shardc::runtime
