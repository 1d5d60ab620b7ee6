//===- MatmulOperands.h - transposes a matmul reads in place ----*- C++ -*-===//
//
// A transpose of the last two dims whose only readers are matmuls need not
// be copied: the runtime's matmul reads an operand stored that way in place
// (the plan's transpose_a / transpose_b, docs/plan.md), with the same bits
// (runtime/cpu/Gemm.h: a row's chain does not depend on how A is stored).
// The gradient of every linear layer reads one (x^T g), and attention's
// backward several: each was a copy the size of the operand, its
// allocation and its memory.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/IR/Operation.h"

namespace shardc::compiler {

/// Whether `op` is a tc view reading its source with the last two dims
/// swapped and nothing else: [..., A, B] -> [..., B, A] (a transpose of
/// dims -2 and -1, or the permute that is one).
bool swapsLastTwoDims(mlir::Operation *op);

/// Whether the lowering may leave out `op`'s copy and let its users read
/// the source in place: it swaps the last two dims, it has users, every
/// user is a tc.matmul, and they are in its block with nothing between it
/// and the last of them that frees or overwrites memory (tc.release, an
/// optimizer step, a buffer update), which the copy would have outlived.
bool matmulsReadTransposeInPlace(mlir::Operation *op);

} // namespace shardc::compiler
