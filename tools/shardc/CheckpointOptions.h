//===- CheckpointOptions.h - shardc run --load / --rename -------*- C++ -*-===//
//
// `--load CKPT` replaces the init chain of every parameter found in the
// checkpoint (after the --rename map) by a load of it (docs/checkpoints.md).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "compiler/Graph.h"

#include <string>
#include <utility>
#include <vector>

namespace shardc::cli {

/// One `--rename OLD=NEW`: a checkpoint tensor whose name starts with OLD is
/// the parameter named NEW + the rest of it.
using RenameRule = std::pair<std::string, std::string>;

/// Parses "OLD=NEW" (the first '='); throws UsageError otherwise.
RenameRule parseRenameRule(const std::string &text);

/// The parameter name a checkpoint tensor maps to (the first matching rule;
/// unchanged when none matches).
std::string renameTensor(const std::string &tensor, const std::vector<RenameRule> &rules);

/// Rewrites the graph's init chains for `--load checkpoint`:
///  - a parameter found in the checkpoint (after renaming) whose chain does
///    not start with a load gets the chain [load]; one whose chain starts with
///    a load without "file" keeps its chain, loading from the checkpoint
///    (its pointwise ops still apply); a load with its own "file" is kept;
///  - a parameter not found keeps its chain, unless it starts with a load
///    without "file": then it is an error (CheckpointError);
/// Two tensors renamed onto one name are an error. Returns the names of the
/// parameters that keep their own init (not in the checkpoint).
std::vector<std::string> applyCheckpointLoad(compiler::Graph &graph,
                                             const std::string &checkpoint,
                                             const std::vector<RenameRule> &rules);

/// Without --load, a load without "file" is an error (GraphError naming the
/// JSON path).
void requireLoadFiles(const compiler::Graph &graph);

} // namespace shardc::cli
