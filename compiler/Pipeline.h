//===- Pipeline.h - graph file to sharded IR to Plan ------------*- C++ -*-===//
#pragma once

#include "compiler/Graph.h"
#include "runtime/Plan.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

namespace shardc::compiler {

/// Registers and loads everything a tc program uses.
void loadTcDialects(mlir::MLIRContext &context);

/// How parameters are grouped and gathered (docs/cli.md: --units,
/// --prefetch).
struct ShardOptions {
  std::vector<std::string> unitPatterns; // empty: the default units
  bool prefetch = false;
};

/// Verifies `module`, then runs tc-expand-init, tc-assign-units and tc-fsdp
/// for `worldSize` ranks. Errors are reported through the context's
/// diagnostic handler.
mlir::LogicalResult shardModule(mlir::ModuleOp module, int64_t worldSize,
                                const ShardOptions &options = {});

/// The whole pipeline: graph -> tc -> sharded tc -> Plan.
mlir::FailureOr<plan::Plan> compileToPlan(const Graph &graph, int64_t worldSize,
                                          mlir::MLIRContext &context,
                                          const ShardOptions &options = {});

} // namespace shardc::compiler
