//===- UnitRuns.cpp - a function body's runs of FSDP units ----------------===//
#include "passes/UnitRuns.h"

#include "llvm/ADT/STLExtras.h"

namespace mlir::tc {

int64_t UnitBody::spanOf(int64_t p) const {
  int64_t before = lastStartingAt(p);
  return before >= 0 && p <= runs[before].last ? before : -1;
}

int64_t UnitBody::lastStartingAt(int64_t p) const {
  auto next = llvm::upper_bound(
      runs, p, [](int64_t q, const UnitRun &run) { return q < run.first; });
  return (next - runs.begin()) - 1;
}

int64_t UnitBody::reachOf(int64_t p, StringRef unit) const {
  int64_t before = lastStartingAt(p);
  int64_t after = before + 1; // the first run starting after p
  if (before >= 0 && runs[before].unit == unit)
    return before;
  if (after < static_cast<int64_t>(runs.size()) && runs[after].unit == unit &&
      (before < 0 || p > runs[before].last))
    return after;
  return -1;
}

ParamOp paramRead(Value operand, ModuleOp module) {
  auto use = operand.getDefiningOp<UseOp>();
  if (!use)
    return nullptr;
  auto param = module.lookupSymbol<ParamOp>(use.getParamAttr());
  return param && !param.getIsBuffer() ? param : nullptr;
}

UnitBody readUnitBody(Block &block, ModuleOp module) {
  UnitBody body;
  for (Operation &op : block) {
    int64_t at = static_cast<int64_t>(body.ops.size());
    body.position[&op] = at;
    body.ops.push_back(&op);
    for (Value operand : op.getOperands()) {
      ParamOp param = paramRead(operand, module);
      if (!param)
        continue;
      StringRef unit = param.getUnit().value_or("root");
      if (body.runs.empty() || body.runs.back().unit != unit)
        body.runs.push_back({unit, at, at});
      body.runs.back().last = at;
    }
  }
  return body;
}

std::optional<UnitBody> readForwardBody(ModuleOp module) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward || forward.empty())
    return std::nullopt;
  return readUnitBody(forward.front(), module);
}

} // namespace mlir::tc
