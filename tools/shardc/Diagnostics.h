//===- Diagnostics.h - print MLIR diagnostics for people --------*- C++ -*-===//
#pragma once

#include "mlir/IR/Diagnostics.h"

namespace shardc::cli {

/// Prints every diagnostic as "shardc: error: FILE: JSON.PATH: message"
/// (graph locations) or with the MLIR location otherwise, notes indented.
class CliDiagnosticHandler : public mlir::ScopedDiagnosticHandler {
public:
  explicit CliDiagnosticHandler(mlir::MLIRContext *context);
};

} // namespace shardc::cli
