//===- TcOps.h - tc dialect operations --------------------------*- C++ -*-===//
#pragma once

#include "dialects/tc/TcDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "runtime/Plan.h"

#include <map>
#include <string>

#include "dialects/tc/TcInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/tc/TcOps.h.inc"

namespace mlir::tc {

/// The function names the tc program contract fixes (docs/ir.md).
inline constexpr llvm::StringLiteral kInitFunctionName = "init";
inline constexpr llvm::StringLiteral kForwardFunctionName = "forward";

/// True for generators whose elements are pure functions of their index
/// (all but tc.orthogonal): they shard by index arithmetic.
bool isShardableGenerator(Operation *op);

/// The tc.param a symbol user names; emits "references undefined parameter"
/// on `user` and fails when there is none.
FailureOr<ParamOp> lookupParam(Operation *user, FlatSymbolRefAttr name,
                               SymbolTableCollection &symbolTable);

/// Every value of element type `from` is exact in `to`: the types are equal,
/// or bfloat16 / float16 into float32 / float64, or float32 into float64.
/// tc.reduce_scatter reads a gradient in such a narrower type than its
/// parameter (master weights: bfloat16 into a float32 shard).
bool widensExactly(Type from, Type to);

/// Checks the module-wide rules no single op can see: every tc.param is
/// materialized exactly once, inside func @init. Linear in the module size.
LogicalResult verifyProgram(ModuleOp module);

/// tc.op's table attributes (every attribute but op_name) as plan values,
/// checked against the op table (names, kinds, required ones); emits the
/// error on `op` and fails otherwise.
FailureOr<std::map<std::string, shardc::plan::AttrValue>> tableAttrs(TableOp op);
/// The MLIR attribute of a plan attribute value (tc.op's attribute form).
Attribute tableAttr(Builder &builder, const shardc::plan::AttrValue &value);

} // namespace mlir::tc
