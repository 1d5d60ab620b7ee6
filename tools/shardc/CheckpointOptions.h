//===- CheckpointOptions.h - shardc run --load / --rename -------*- C++ -*-===//
//
// `--load CKPT` replaces the init chain of every parameter found in the
// checkpoint (after the --rename map) by a load of it (docs/checkpoints.md;
// the rewrite itself is compiler/CheckpointLoad.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "compiler/CheckpointLoad.h"
#include "compiler/Graph.h"

#include <string>

namespace shardc::cli {

/// One `--rename OLD=NEW` (compiler/CheckpointLoad.h, shared with the
/// embedded API's CompiledModel::load).
using compiler::RenameRule;
using compiler::applyCheckpointLoad;
using compiler::renameTensor;

/// Parses "OLD=NEW" (the first '='); throws UsageError otherwise.
RenameRule parseRenameRule(const std::string &text);

/// Without --load, a load without "file" is an error (GraphError naming the
/// JSON path).
void requireLoadFiles(const compiler::Graph &graph);

} // namespace shardc::cli
