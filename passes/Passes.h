//===- Passes.h - tc dialect passes -----------------------------*- C++ -*-===//
#pragma once

#include "dialects/tc/TcOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::tc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace mlir::tc
