//===- SummedCrossEntropy.h - a loss summed over the counted targets -*- C++
//-*-===//
//
// cross_entropy(reduction='sum') (transformers' loss when the Trainer passes
// num_items_in_batch) has no op of its own: the exporter writes it as the
// mean over the counted targets times their count, 0 when none counts
// (docs/exporter.md):
//
//   loss    = cross_entropy(logits, targets)             the mean
//   kept    = ne(targets, value = ignore_index)
//   [cast]  the count as float
//   count   = sum(kept)                                   0-d
//   product = mul(loss, count)                            either order
//   any     = ne(count, value = 0)
//   summed  = where(any, product, 0)
//
// Data parallelism and gradient accumulation (compiler/Rebatch.cpp) read
// the whole form as what it is, a sum over the rows: each rank's (each
// micro-step's) own mean times its own count, so the parts add up without
// a count summed over ranks first.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "compiler/Graph.h"

#include <string>
#include <vector>

namespace shardc::compiler {

/// The value names of one summed cross_entropy in a graph.
struct SummedCrossEntropy {
  std::string loss;    // cross_entropy or linear_cross_entropy: the mean
  std::string count;   // the counted targets (sum)
  std::string product; // the mean times the count
  std::string any;     // ne(count, 0)
  std::string summed;  // where(any, product, 0): the summed loss
};

/// Every summed cross_entropy of `graph` whose mean, product and condition
/// are read by nothing but the form itself (the count may be read
/// elsewhere) and are no outputs; in graph order.
std::vector<SummedCrossEntropy> findSummedCrossEntropies(const Graph &graph);

} // namespace shardc::compiler
