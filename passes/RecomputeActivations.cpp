//===- RecomputeActivations.cpp - the tc-recompute-activations pass -------===//
//
// Activation checkpointing at the granularity of FSDP units (Passes.td): a
// value a unit computed in forward and read again when the unit runs again
// (its backward) is computed again there from the unit's inputs, instead of
// being kept alive across every other unit in between.
//
// A joint graph (compiler/Autodiff.h) reads each unit's parameters in two
// runs: its forward and, much later, its backward. Everything the forward
// run computed that the backward reads (layer norm inputs, attention's q, k
// and v, the MLP's hidden activations) is alive in between, which for a
// deep model is most of a training step's memory. Here the backward reads
// clones of those values, computed right before their first read from what
// the forward run read from outside itself (the block's input, the
// residual stream): the checkpoint. Kernels are deterministic, so the
// clones hold the originals' bits and the gradients do not change.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/UnitRuns.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::tc {
#define GEN_PASS_DEF_TCRECOMPUTEACTIVATIONS
#include "passes/Passes.h.inc"
} // namespace mlir::tc

using namespace mlir;
using namespace mlir::tc;

namespace {

/// Adds `op` and, transitively, the ops it reads from the span of run
/// `span` (what the run computed; everything from before the run is its
/// input, read as it is). False if one of them is not pure.
bool collectDefinitions(Operation *op, int64_t span, const UnitBody &body,
                        llvm::SetVector<Operation *> &clones) {
  SmallVector<Operation *> work = {op};
  while (!work.empty()) {
    Operation *next = work.pop_back_val();
    if (!isPure(next) || next->getNumRegions() != 0)
      return false;
    if (!clones.insert(next))
      continue;
    for (Value operand : next->getOperands()) {
      Operation *definition = operand.getDefiningOp();
      if (definition && body.spanOf(body.at(definition)) == span)
        work.push_back(definition);
    }
  }
  return true;
}

/// Where each value is read last in the body as read (before any clone).
DenseMap<Value, int64_t> lastReads(const UnitBody &body) {
  DenseMap<Value, int64_t> last;
  for (auto [at, op] : llvm::enumerate(body.ops))
    for (Value operand : op->getOperands())
      last[operand] = static_cast<int64_t>(at);
  return last;
}

/// Whether run `reader` may recompute what run `span` of its unit computed
/// (the clones in `needed`). Always when the unit does not run in between:
/// the unit's forward and its backward, reading the checkpoint (what `span`
/// read from outside itself) kept alive for the purpose. Across another run
/// of the unit only when every value the clones read from outside `span`
/// is read at or after `firstRead` anyway: a weight-shared block's forward
/// recomputed for its backward, but not a micro-step's weight gradient,
/// which the next micro-step's backward adds to its own (gradient
/// accumulation): recomputing it there would keep that earlier backward's
/// incoming gradient and activations alive across the next forward.
bool mayRecompute(const llvm::SetVector<Operation *> &needed, int64_t span,
                  int64_t reader, int64_t firstRead, const UnitBody &body,
                  const DenseMap<Value, int64_t> &lastRead) {
  StringRef unit = body.runs[reader].unit;
  if (llvm::none_of(llvm::seq(span + 1, reader), [&](int64_t between) {
        return body.runs[between].unit == unit;
      }))
    return true;
  for (Operation *op : needed)
    for (Value operand : op->getOperands()) {
      Operation *definition = operand.getDefiningOp();
      // The function's inputs live throughout; parameter reads are
      // gathered for the reader anew (tc-fsdp).
      if (!definition || isa<UseOp>(definition) ||
          body.spanOf(body.at(definition)) == span)
        continue;
      if (lastRead.lookup(operand) < firstRead)
        return false;
    }
  return true;
}

/// Makes the reads of `values` within the reach of run `reader` read
/// recomputed values: their definitions, cloned in order right before the
/// first such read, each computed from what its run read from outside it.
void recomputeFor(int64_t reader, ArrayRef<Value> values, const UnitBody &body,
                  const DenseMap<Value, int64_t> &lastRead) {
  StringRef unit = body.runs[reader].unit;
  auto inReach = [&](Operation *user) {
    int64_t at = body.at(user);
    return at >= 0 && body.reachOf(at, unit) == reader;
  };
  llvm::SetVector<Operation *> clones;
  SmallVector<Value> recomputed;
  int64_t insertAt = static_cast<int64_t>(body.ops.size()) - 1;
  for (Value value : values) {
    Operation *definition = value.getDefiningOp();
    const int64_t span = body.spanOf(body.at(definition));
    llvm::SetVector<Operation *> needed;
    if (!collectDefinitions(definition, span, body, needed))
      continue; // kept alive, as without this pass
    int64_t firstRead = static_cast<int64_t>(body.ops.size()) - 1;
    for (Operation *user : value.getUsers())
      if (inReach(user))
        firstRead = std::min(firstRead, body.at(user));
    if (!mayRecompute(needed, span, reader, firstRead, body, lastRead))
      continue;
    clones.insert(needed.begin(), needed.end());
    recomputed.push_back(value);
    insertAt = std::min(insertAt, firstRead);
  }
  if (recomputed.empty())
    return;
  SmallVector<Operation *> ordered(clones.begin(), clones.end());
  llvm::sort(ordered, [&](Operation *a, Operation *b) {
    return body.at(a) < body.at(b);
  });
  OpBuilder builder(body.ops[insertAt]);
  IRMapping mapping;
  for (Operation *op : ordered)
    builder.clone(*op, mapping);
  for (Value value : recomputed)
    value.replaceUsesWithIf(mapping.lookup(value), [&](OpOperand &use) {
      return inReach(use.getOwner());
    });
}

/// For each run, the values an earlier run of its unit computed that it
/// reads and that nothing else reads after their own run: those worth
/// recomputing there.
llvm::MapVector<int64_t, SmallVector<Value>>
recomputable(const UnitBody &body) {
  llvm::MapVector<int64_t, SmallVector<Value>> wanted;
  for (auto [index, run] : llvm::enumerate(body.runs)) {
    for (int64_t at = run.first; at <= run.last; ++at) {
      Operation *op = body.ops[at];
      // Parameter reads are not activations: tc-fsdp gathers them anew.
      if (isa<UseOp>(op))
        continue;
      for (Value value : op->getResults()) {
        // A read by another unit's run, or by the function's results,
        // keeps the value alive anyway: recomputing it would save nothing.
        SmallVector<int64_t> readers;
        bool kept = false;
        for (Operation *user : value.getUsers()) {
          int64_t reader = body.reachOf(body.at(user), run.unit);
          kept |= reader < 0 || user->hasTrait<OpTrait::IsTerminator>();
          if (reader != static_cast<int64_t>(index))
            readers.push_back(reader);
        }
        if (kept)
          continue;
        for (int64_t reader : readers)
          if (!llvm::is_contained(wanted[reader], value))
            wanted[reader].push_back(value);
      }
    }
  }
  return wanted;
}

struct TcRecomputeActivationsPass
    : public tc::impl::TcRecomputeActivationsBase<TcRecomputeActivationsPass> {
  void runOnOperation() override {
    std::optional<UnitBody> body = readForwardBody(getOperation());
    if (!body)
      return;
    // Positions stay those of the original body: each run's clones go
    // before an op of its own reach and read only originals and each
    // other, so no later rewrite reads a clone's position.
    const DenseMap<Value, int64_t> lastRead = lastReads(*body);
    for (auto &[reader, values] : recomputable(*body))
      recomputeFor(reader, values, *body, lastRead);
  }
};

} // namespace
