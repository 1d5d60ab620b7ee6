//===- GraphNodes.h - forward nodes: reading and type inference -*- C++ -*-===//
#pragma once

#include "compiler/GraphReader.h"

#include <map>
#include <utility>

namespace shardc::compiler {

/// The shape and dtype of every value defined so far, by name.
using ValueTypes = std::map<std::string, std::pair<std::vector<int64_t>, plan::DType>>;

/// Reads node `index` of the graph, checks its inputs exist and fit the op
/// as torch would, and infers its results' shapes. Throws GraphError naming
/// the node's JSON path.
GraphNode readNode(const GraphReader &reader, const json &value,
                   const std::string &path, const ValueTypes &types);

} // namespace shardc::compiler
