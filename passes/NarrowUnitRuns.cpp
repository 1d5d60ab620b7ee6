//===- NarrowUnitRuns.cpp - the tc-narrow-unit-runs pass ------------------===//
//
// tc-fsdp gathers a unit from the first op of a run that reads its
// parameters to the last (UnitRuns.h). Ops in between that read none of
// them are inside the gathered window only because of where the gradient
// rules emitted them: a linear's weight gradient (g^T x, no weight read)
// sits between its input gradient (g W, a read) and the next read of the
// unit. For GPT-2's head that is a [V, D] gradient computed while the
// gathered [V, D] table is held, and with the logits' gradient alive: the
// peak of a training step at N >= 2. Here such ops run right after the
// run's last read instead, after tc-fsdp's release, when that lowers the
// stretch's live bytes. Values do not change: the ops moved are pure (or
// optimizer steps, which touch only their own parameter and state and
// already follow its last read), and their order among themselves is kept.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/TensorBytes.h"
#include "passes/UnitRuns.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>

namespace mlir::tc {
#define GEN_PASS_DEF_TCNARROWUNITRUNS
#include "passes/Passes.h.inc"
} // namespace mlir::tc

using namespace mlir;
using namespace mlir::tc;

namespace {

/// Whether `op`'s result shares its operand's bytes in the plan, as far as
/// this pass's estimate goes: a reshape is an alias, and a transpose read
/// only by matmuls is read in place (compiler/MatmulOperands.h decides).
bool aliasesOperand(Operation *op) {
  if (isa<ReshapeOp>(op))
    return true;
  return isa<TransposeOp>(op) &&
         llvm::all_of(op->getUsers(),
                      [](Operation *user) { return isa<MatmulOp>(user); });
}

/// The tensor a value's bytes belong to: through views (aliasesOperand)
/// made within one run, back to the first value that owns bytes.
class Tensors {
public:
  Value of(Value value) const {
    auto it = viewed_.find(value);
    return it == viewed_.end() ? value : it->second;
  }
  /// Records `op`'s result as a view when it is one.
  void record(Operation *op) {
    if (aliasesOperand(op))
      viewed_[op->getResult(0)] = of(op->getOperand(0));
  }

private:
  llvm::DenseMap<Value, Value> viewed_;
};

/// The ops strictly inside `run` to move after it, in order. An op may
/// move when it reads none of the unit's parameters and no later read in
/// the run needs it; optimizer steps may (placed after their parameter's
/// last read, they touch nothing else), no other op with effects. Of
/// those, one moves when an op it reads from moves (it must follow), or
/// when its result's bytes, no longer alive through the rest of the run,
/// are at least those of the tensors it reads that would otherwise die
/// within the run (a weight gradient moves; the loss, a 4-byte scalar
/// read from the logits, stays, or the logits would live on).
SmallVector<Operation *> opsToMove(const UnitBody &body, const UnitRun &run,
                                   ModuleOp module) {
  // Which tensors something after the run reads anyway.
  Tensors tensors;
  llvm::DenseSet<Value> readAfter;
  for (int64_t p = run.first; p <= run.last; ++p) {
    Operation *op = body.ops[p];
    tensors.record(op);
    for (Value result : op->getResults())
      for (Operation *user : result.getUsers())
        if (!body.inSpan(user, run))
          readAfter.insert(tensors.of(result));
  }
  // Backward: the ops that must stay.
  llvm::DenseSet<Operation *> pinned = {body.ops[run.last]};
  for (int64_t p = run.last - 1; p > run.first; --p) {
    Operation *op = body.ops[p];
    bool pin = op->getNumRegions() != 0 ||
               !(isPure(op) || isa<SgdStepOp, AdamwStepOp>(op));
    for (Value operand : op->getOperands())
      pin |= static_cast<bool>(paramRead(operand, module));
    for (Operation *user : op->getUsers())
      pin |= pinned.contains(user);
    if (pin)
      pinned.insert(op);
  }
  // Forward: of the others, those worth moving and those that must follow.
  SmallVector<Operation *> moving;
  llvm::DenseSet<Operation *> moved;
  for (int64_t p = run.first + 1; p < run.last; ++p) {
    Operation *op = body.ops[p];
    if (pinned.contains(op))
      continue;
    bool follows = false;
    int64_t extended = 0;
    llvm::DenseSet<Value> counted;
    for (Value operand : op->getOperands()) {
      Operation *definition = operand.getDefiningOp();
      follows |= definition && moved.contains(definition);
      Value tensor = tensors.of(operand);
      if (!readAfter.contains(tensor) && counted.insert(tensor).second)
        extended += tensorBytes(tensor.getType());
    }
    int64_t freed = 0;
    if (!aliasesOperand(op))
      for (Value result : op->getResults())
        freed += tensorBytes(result.getType());
    if (follows || (freed > 0 && freed >= extended)) {
      moving.push_back(op);
      moved.insert(op);
    }
  }
  // A view read only by moved ops goes with them: it costs no bytes, and a
  // transpose and its matmuls then stay together with no release between,
  // so the matmuls still read it in place (compiler/MatmulOperands.h).
  for (int64_t p = run.last - 1; p > run.first; --p) {
    Operation *op = body.ops[p];
    if (!pinned.contains(op) && !moved.contains(op) && aliasesOperand(op) &&
        !op->use_empty() && llvm::all_of(op->getUsers(), [&](Operation *user) {
          return moved.contains(user);
        }))
      moved.insert(op);
  }
  moving.clear();
  for (int64_t p = run.first + 1; p < run.last; ++p)
    if (moved.contains(body.ops[p]))
      moving.push_back(body.ops[p]);
  return moving;
}

/// The largest live tensor bytes at any op of `order`, a permutation of
/// `run`'s ops, with the unit's `gathered` bytes live up to its last read.
/// A tensor lives from its definition (one from before the run: from the
/// start) to the last read of it or of a view of it in the run, or to the
/// end if something after the run reads it.
int64_t peakBytes(ArrayRef<Operation *> order, const UnitBody &body,
                  const UnitRun &run, int64_t gathered, ModuleOp module) {
  const int64_t n = static_cast<int64_t>(order.size());
  struct Life {
    int64_t from, until;
  };
  llvm::MapVector<Value, Life> lives;
  Tensors tensors;
  auto readAt = [&](Value value, int64_t at) {
    Value tensor = tensors.of(value);
    if (paramRead(tensor, module)) // counted as the gathered bytes, below
      return;
    Life &life = lives.try_emplace(tensor, Life{0, at}).first->second;
    life.until = std::max(life.until, at);
  };
  for (auto [i, op] : llvm::enumerate(order)) {
    const int64_t at = static_cast<int64_t>(i);
    for (Value operand : op->getOperands())
      readAt(operand, at);
    tensors.record(op);
    for (Value result : op->getResults()) {
      if (!aliasesOperand(op) && !paramRead(result, module))
        lives[result] = {at, at};
      for (Operation *user : result.getUsers())
        if (!body.inSpan(user, run))
          readAt(result, n - 1);
    }
  }
  SmallVector<int64_t> delta(n + 1, 0);
  for (auto &[value, life] : lives) {
    delta[life.from] += tensorBytes(value.getType());
    delta[life.until + 1] -= tensorBytes(value.getType());
  }
  int64_t live = 0, peak = 0;
  llvm::DenseMap<Operation *, int64_t> index;
  for (auto [i, op] : llvm::enumerate(order))
    index[op] = static_cast<int64_t>(i);
  const int64_t lastRead = index[body.ops[run.last]];
  for (int64_t i = 0; i < n; ++i) {
    live += delta[i];
    peak = std::max(peak, live + (i <= lastRead ? gathered : 0));
  }
  return peak;
}

/// The bytes of the parameters `run` reads, each once: what tc-fsdp
/// gathers for it (whatever the world size, so that the choice is the
/// same at every N).
int64_t gatheredBytes(const UnitBody &body, const UnitRun &run,
                      ModuleOp module) {
  llvm::DenseSet<Operation *> params;
  int64_t bytes = 0;
  for (int64_t p = run.first; p <= run.last; ++p)
    for (Value operand : body.ops[p]->getOperands())
      if (ParamOp param = paramRead(operand, module);
          param && params.insert(param.getOperation()).second)
        bytes += tensorBytes(param.getTensorType());
  return bytes;
}

struct TcNarrowUnitRunsPass
    : public tc::impl::TcNarrowUnitRunsBase<TcNarrowUnitRunsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<UnitBody> read = readForwardBody(module);
    if (!read)
      return;
    // Each move permutes the ops of one run's span, so the other runs'
    // positions stay valid.
    const UnitBody &body = *read;
    for (const UnitRun &run : body.runs) {
      SmallVector<Operation *> movable = opsToMove(body, run, module);
      if (movable.empty())
        continue;
      SmallVector<Operation *> before(body.ops.begin() + run.first,
                                      body.ops.begin() + run.last + 1);
      llvm::DenseSet<Operation *> moving(movable.begin(), movable.end());
      SmallVector<Operation *> after;
      for (Operation *op : before)
        if (!moving.contains(op))
          after.push_back(op);
      after.append(movable.begin(), movable.end());
      const int64_t bytes = gatheredBytes(body, run, module);
      if (peakBytes(after, body, run, bytes, module) >=
          peakBytes(before, body, run, bytes, module))
        continue;
      Operation *anchor = body.ops[run.last];
      for (Operation *op : movable) {
        op->moveAfter(anchor);
        anchor = op;
      }
    }
  }
};

} // namespace
