//===- TcDialect.h - the tc dialect and its attributes ----------*- C++ -*-===//
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"

#include "dialects/tc/TcDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/tc/TcAttrs.h.inc"
