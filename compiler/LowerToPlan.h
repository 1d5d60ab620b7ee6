//===- LowerToPlan.h - lower a sharded tc module to a Plan ------*- C++ -*-===//
#pragma once

#include "runtime/Plan.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

namespace shardc::compiler {

/// Lowers a verified tc module that went through tc-fsdp (every param has a
/// #tc.shard or is replicated) to a Plan with explicit alloc/free. Reports
/// unsupported ops as diagnostics at their location and fails.
mlir::FailureOr<plan::Plan> lowerToPlan(mlir::ModuleOp module);

} // namespace shardc::compiler
