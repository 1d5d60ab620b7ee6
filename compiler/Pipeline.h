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

/// Verifies `module`, then runs tc-fsdp for `worldSize` ranks. Errors are
/// reported through the context's diagnostic handler.
mlir::LogicalResult shardModule(mlir::ModuleOp module, int64_t worldSize);

/// The whole pipeline: graph -> tc -> tc-fsdp -> Plan.
mlir::FailureOr<plan::Plan> compileToPlan(const Graph &graph, int64_t worldSize,
                                          mlir::MLIRContext &context);

} // namespace shardc::compiler
