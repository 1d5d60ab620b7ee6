// The model graph a command works on: the file, plus its backward pass when
// --grad names a loss (docs/training.md).
#pragma once

#include "compiler/Graph.h"
#include "tools/shardc/CommandLine.h"

#include <string>
#include <vector>

namespace shardc::cli {

/// Loads MODEL.json, its 16-bit parameters master weights of `masterDtype`
/// when it is not empty (--master-dtype); with a non-empty `gradLoss`, adds
/// the backward pass of that loss (its head and loss fused first with
/// `fuseLinearCrossEntropy`) and notes on stderr the parameters that get no
/// gradient, unless `quiet` (--memory-budget's trials). Throws
/// compiler::GraphError.
compiler::Graph loadModelGraph(const std::string &path, int64_t maxBytes,
                               const std::string &gradLoss, const std::string &masterDtype,
                               bool fuseLinearCrossEntropy = false, bool quiet = false);

/// --master-dtype's value (empty when absent); UsageError unless float32 or
/// float64.
std::string masterDtypeOption(const ParsedArgs &parsed);

/// Notes on stderr the parameters that get no gradient from `loss`.
void noteWithoutGradient(const std::string &loss, const std::vector<std::string> &params);

/// The --grad option's help line.
inline constexpr const char *kGradUsage =
    "  --grad LOSS        add the backward pass: LOSS (a 0-d value of the\n"
    "                     graph) differentiated with respect to every\n"
    "                     parameter; outputs gain LOSS and grad.NAME per\n"
    "                     parameter (docs/training.md)\n";

}  // namespace shardc::cli
