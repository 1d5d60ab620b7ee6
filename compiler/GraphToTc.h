//===- GraphToTc.h - build a tc module from a validated graph ---*- C++ -*-===//
#pragma once

#include "compiler/Graph.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace shardc::compiler {

/// Builds the unsharded tc program of `graph`: one tc.param per parameter or
/// buffer, func @init materializing each, and func @forward when the graph
/// has outputs. Locations name the graph file and the JSON path.
mlir::OwningOpRef<mlir::ModuleOp> buildTcModule(const Graph &graph,
                                                mlir::MLIRContext &context);

} // namespace shardc::compiler
