//===- UnitRuns.h - a function body's runs of FSDP units --------*- C++ -*-===//
//
// The passes that reorder or clone ops around FSDP units before tc-fsdp
// (tc-recompute-activations, tc-narrow-unit-runs) see @forward's body as
// tc-fsdp will gather it: maximal stretches of ops reading one unit's
// parameters with no other unit's read in between. They read every
// parameter, sharded or not, so that what they decide never depends on
// the world size.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "dialects/tc/TcOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace mlir::tc {

/// A maximal stretch of ops that read one unit's parameters, with no other
/// unit's read in between: from its first read `first` to its last `last`
/// (positions in UnitBody::ops).
struct UnitRun {
  StringRef unit;
  int64_t first = 0, last = 0;
};

/// A block's ops in order, each op's position, and its runs.
struct UnitBody {
  SmallVector<Operation *> ops;
  DenseMap<Operation *, int64_t> position;
  SmallVector<UnitRun> runs;

  /// An op's position; -1 for an op made after the body was read (a clone).
  int64_t at(Operation *op) const {
    auto it = position.find(op);
    return it == position.end() ? -1 : it->second;
  }

  /// Whether `op` lies within `run`'s span [first, last].
  bool inSpan(Operation *op, const UnitRun &run) const {
    const int64_t p = at(op);
    return p >= run.first && p <= run.last;
  }

  /// The run whose span [first, last] holds position `p` (-1: none).
  int64_t spanOf(int64_t p) const;

  /// The last run whose first read is at or before `p` (-1: none).
  int64_t lastStartingAt(int64_t p) const;

  /// The run of `unit` whose reach holds position `p`, or -1. A run
  /// reaches over the ops between it and its neighbouring runs, which read
  /// no parameter: in a backward they are the ends of a unit's gradient
  /// (a linear's weight gradient reads no weight; the last layer norm's
  /// input gradient comes after its weight is read). Neighbouring runs are
  /// of different units, so the unit decides which of the two a gap op
  /// belongs to.
  int64_t reachOf(int64_t p, StringRef unit) const;
};

/// `block`'s ops and runs; parameters are looked up in `module` (buffers
/// are not a unit's parameters).
UnitBody readUnitBody(Block &block, ModuleOp module);

/// @forward's body and runs, or nothing when `module` has no @forward
/// with a body.
std::optional<UnitBody> readForwardBody(ModuleOp module);

/// The parameter an operand reads (through its tc.use), if it is one and
/// not a buffer.
ParamOp paramRead(Value operand, ModuleOp module);

} // namespace mlir::tc
