//===- GradientAccumulation.h - K micro-steps per optimizer step -*- C++
//-*-===//
//
// `shardc run --accumulate K` (JitOptions::optimizer.accumulate): each
// rank's rows of the global batch run as K micro-steps of forward and
// backward, one after the other, and one optimizer step follows them, as a
// torch loop calls backward() K times before optimizer.step(). Only one
// micro-step's activations are alive at a time.
//
// It is a rewrite of the rank's joint graph (compiler/DataParallel.h's
// dataParallelStepGraph for one micro-step's rows), so every backend and
// launcher runs it unchanged: the graph repeats the joint graph K times,
// each copy on its slice of the rank's rows, and adds the copies'
// gradients and loss shares. tc-fsdp reduce-scatters each copy's gradient
// into the shard as soon as it is complete (passes/FsdpSharding.cpp), so a
// full gradient lives only within its micro-step, as FSDP2 accumulates.
//
// The loss is the whole global batch's, whatever K: each micro-step's loss
// is its share of the global batch (a mean's rows over the global batch's
// rows), and cross_entropy's counted targets (not ignore_index) are counted
// over every micro-step of every rank before the first forward, so padding that
// falls unevenly on the micro-steps weighs each target once (where a loop that
// divides each micro-batch's mean by K weighs a micro-step's few targets like
// another's many).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "compiler/Graph.h"

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace shardc::compiler {

/// Makes `rebatched` (one rank's forward of one micro-step, rebatchGraph's)
/// return each 0-d share of a mean scaled by 1 / `steps`: a mean over the
/// micro-step's rows becomes its part of the mean over all `steps`
/// micro-steps' rows. The shares of a sum (`sumOutputs`,
/// MicroStepShares::sumOutputs) stay as they are: the micro-steps' sums add
/// up to the whole batch's. Done before differentiating, so each
/// micro-step's gradients carry the scale.
void scaleSharesPerMicroStep(Graph &rebatched, int64_t steps,
                             const std::set<std::string> &sumOutputs);

/// The joint graph `joint` (one micro-step: forward and backward of its
/// inputs' rows, its loss a share of the global batch) repeated for
/// `steps` micro-steps over `steps` times its rows: copy k reads rows
/// [k b, (k + 1) b) of every input. Outputs: the gradients (grad.P) and
/// 0-d shares summed over the copies, in order; batch outputs the copies'
/// rows concatenated. `countTotals` are the nodes summing cross_entropy's
/// counted targets over ranks (rebatchGraph's): they become one sum over
/// ranks of every copy's count, computed before the first copy, divided by
/// `steps` (the copies' shares are scaled by 1 / `steps`). A buffer
/// forward updates (running statistics) is updated by each copy in turn;
/// dropout's step counter once (every copy draws the masks of the same
/// step, at its rows' indices). Throws GraphError naming the graph when
/// `steps` < 1 or an input is specialised to its values.
Graph accumulatedStepGraph(const Graph &joint, int64_t steps,
                           const std::vector<std::string> &countTotals);

} // namespace shardc::compiler
