//===- GraphWriter.h - a rewritten graph back to the file format -*- C++
//-*-===//
//
// Reverse-mode differentiation (compiler/Autodiff.h) works on a graph file's
// text. A forward the compiler rewrote first (rebatchGraph: each rank's rows
// of a data-parallel step) goes back to that text here, so that it is
// differentiated, sharded and predicted like any graph file.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "compiler/Graph.h"

#include <nlohmann/json.hpp>

#include <string>

namespace shardc::compiler {

/// A float as the graph format spells it: JSON has no literal for
/// infinities and NaN, written "inf", "-inf", "nan" (jsonFloat reads them
/// back). Init chains the JIT API writes use it too.
nlohmann::json floatJson(double value);

/// `node` as the graph format writes it (docs/graph-format.md): readNode
/// reads it back to the same node (its path aside).
nlohmann::json nodeJson(const GraphNode &node);

/// The graph file `originalText` (the file `graph` was read from, then
/// rewritten) with `graph`'s inputs, nodes and outputs, and the
/// non-persistent constant buffers `graph` added. Parameters, buffers and
/// their init chains stay the file's own: rewrites of the forward do not
/// touch them. Throws GraphError when `originalText` does not parse.
std::string rewrittenGraphText(const std::string &originalText,
                               const Graph &graph);

} // namespace shardc::compiler
