//===- InitChainFusion.h - init chains as one sharded generator -*- C++ -*-===//
//
// An init chain is a generator followed by views and pointwise ops, ending
// in tc.materialize. Because pointwise ops do not look at indices and views
// only move them, the whole chain equals: the generator evaluated at
// M(index), where M composes the views' index maps, followed by the
// pointwise ops. That form computes any set of rows of the result (a shard)
// without ever holding the full tensor.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "dialects/tc/TcOps.h"

namespace mlir::tc {

struct InitChain {
  Operation *generator = nullptr;
  /// Views and pointwise ops from the generator to the materialized value.
  SmallVector<Operation *> steps;
  bool hasViews = false;
};

/// Follows `value` back to its generator. Fails, with an error naming the
/// parameter, when it reaches anything else (a block argument, a forward op).
FailureOr<InitChain> collectInitChain(Value value, MaterializeOp materialize);

/// Builds, before `materialize`, the fused form of `chain` producing
/// `localType` — the rows this rank stores of `fullType`, or the whole tensor
/// when `fullType` is null — and returns its value.
Value buildFusedChain(OpBuilder &builder, const InitChain &chain,
                      RankedTensorType localType, RankedTensorType fullType);

} // namespace mlir::tc
