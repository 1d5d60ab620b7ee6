// `--optimizer` and its settings (docs/training.md): a training step on top
// of --grad, for `shardc run` (with --steps) and `shardc compile`.
#pragma once

#include "compiler/Pipeline.h"
#include "tools/shardc/CommandLine.h"

#include <optional>

namespace shardc::cli {

/// The options that take a value (for parseArgs).
inline const std::set<std::string> kTrainValueOptions{
    "--optimizer",   "--lr",     "--momentum",       "--weight-decay",
    "--betas",       "--eps",    "--load-optimizer", "--warmup-steps",
    "--decay-steps", "--min-lr", "--clip-grad-norm", "--no-weight-decay",
    "--accumulate"};

/// The optimizer the command line asks for, or nullopt without
/// --optimizer. Throws UsageError for a bad value, for settings without
/// --optimizer or for the wrong optimizer, and without --grad.
std::optional<compiler::OptimizerOptions> parseOptimizerOptions(const ParsedArgs &parsed);

/// --accumulate K splits each rank's rows of the global batch into K
/// micro-steps, so it makes the step data-parallel (at --world-size 1 the
/// rank's rows are the whole batch): adds --data-parallel to `parsed`.
void implyDataParallel(ParsedArgs &parsed);

/// --recompute-activations changes what a backward keeps from its forward:
/// without --grad there is no backward. Throws UsageError then.
/// (--fuse-linear-cross-entropy also fuses a loss evaluated alone.)
void requireGradForBackwardOptions(const ParsedArgs &parsed);

}  // namespace shardc::cli
