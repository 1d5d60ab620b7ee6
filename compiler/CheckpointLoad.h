//===- CheckpointLoad.h - init chains that load from a checkpoint -*- C++ -*-===//
//
// What `shardc run --load CKPT [--rename OLD=NEW]` and the embedded API's
// CompiledModel::load do to a graph before compiling it: every parameter
// found in the checkpoint (after the rename map) gets its init chain replaced
// by a load of it (docs/checkpoints.md). Shared by the CLI and the JIT.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "compiler/Graph.h"

#include <string>
#include <utility>
#include <vector>

namespace shardc::compiler {

/// One rename rule (`--rename OLD=NEW`): a checkpoint tensor whose name
/// starts with OLD is the parameter named NEW + the rest of it.
using RenameRule = std::pair<std::string, std::string>;

/// The parameter name a checkpoint tensor maps to (the first matching rule;
/// unchanged when none matches).
std::string renameTensor(const std::string &tensor, const std::vector<RenameRule> &rules);

/// Rewrites the graph's init chains for loading `checkpoint`:
///  - a parameter found in the checkpoint (after renaming) whose chain does
///    not start with a load gets the chain [load]; one whose chain starts with
///    a load without "file" keeps its chain, loading from the checkpoint
///    (its pointwise ops still apply); a load with its own "file" is kept;
///  - a parameter not found keeps its chain, unless it starts with a load
///    without "file": then it is an error (CheckpointError);
/// Two tensors renamed onto one name are an error. Returns the names of the
/// parameters that keep their own init (not in the checkpoint).
std::vector<std::string> applyCheckpointLoad(Graph &graph, const std::string &checkpoint,
                                             const std::vector<RenameRule> &rules);

} // namespace shardc::compiler
