#include "runtime/MemoryModel.h"

#include "runtime/MemoryLedger.h"
#include "runtime/PlanCheck.h"
#include "runtime/RuntimeError.h"

#include <map>

namespace shardc::runtime {
using namespace shardc::plan;

namespace {

/// The devices' own ledger (MemoryLedger), fed with the plan's allocations
/// instead of real ones; keys name what the plan frees.
class Simulator {
public:
  void add(uint64_t key, LiveAllocation allocation) {
    keyToSerial_[key] = ledger_.record(std::move(allocation));
  }
  void remove(uint64_t key) {
    ledger_.release(keyToSerial_.at(key));
    keyToSerial_.erase(key);
  }
  bool isLive(uint64_t key) const { return keyToSerial_.count(key) != 0; }
  void startWindow() { ledger_.resetPeak(); }
  MemoryPrediction finish() const {
    MemoryPrediction result;
    result.peakBytes = ledger_.peakBytes();
    result.peakByCategory = ledger_.peakByCategory();
    result.liveAtPeak = ledger_.liveAtPeak();
    result.endBytes = ledger_.currentBytes();
    result.endByCategory = ledger_.currentByCategory();
    result.liveAtEnd = ledger_.live();
    for (const LiveAllocation &a : result.liveAtEnd)
      if (a.category == Category::Parameter) result.paramsAtEnd.push_back(a);
    return result;
  }

private:
  MemoryLedger ledger_;
  std::map<uint64_t, uint64_t> keyToSerial_;
};

// Keys: param storage and function buffers live in different key ranges.
constexpr uint64_t kParamKeyBase = uint64_t(1) << 40;
uint64_t paramKey(int32_t param) { return kParamKeyBase + static_cast<uint64_t>(param); }
uint64_t bufferKey(int32_t buffer) { return static_cast<uint64_t>(buffer); }

}  // namespace

MemoryPrediction predictMemory(const Plan &plan, const std::string &functionName,
                               int64_t rank, const std::vector<LiveAllocation> &carriedIn) {
  const Function *function = plan.function(functionName);
  if (!function)
    throw RuntimeError("predictMemory: plan has no function '" + functionName + "'");
  if (rank < 0 || rank >= plan.worldSize)
    throw RuntimeError("predictMemory: rank " + std::to_string(rank) +
                       " out of range for world size " + std::to_string(plan.worldSize));
  checkPlan(plan);

  std::map<std::string, int32_t> paramIndex;
  for (size_t i = 0; i < plan.params.size(); ++i)
    paramIndex[plan.params[i].name] = static_cast<int32_t>(i);

  Simulator sim;
  uint64_t carriedKey = uint64_t(1) << 50;  // carried non-param entries
  for (const LiveAllocation &a : carriedIn) {
    auto it = paramIndex.find(a.label);
    bool isParam = a.category == Category::Parameter && it != paramIndex.end();
    sim.add(isParam ? paramKey(it->second) : carriedKey++, a);
  }
  sim.startWindow();  // the window starts with what was carried in

  for (int32_t id : function->inputs) {
    const Buffer &b = function->buffers[id];
    if (sim.isLive(bufferKey(id)))
      throw RuntimeError("predictMemory: function '" + functionName + "' input '" +
                         b.name + "' is listed twice");
    sim.add(bufferKey(id), {b.name, Category::IO, b.bytes});
  }

  for (size_t i = 0; i < function->body.size(); ++i) {
    const Instruction &inst = function->body[i];
    if (!executesOn(inst, rank)) continue;  // another rank's instruction
    auto fail = [&](const std::string &reason) {
      throw RuntimeError(instructionPlace(*function, i) + ": " + reason);
    };
    const OpInfo &op = opInfo(inst.op);
    if (op.memory == OpMemory::Allocates) {
      if (inst.outputs.size() != 1) fail("expects 1 output");
      const Buffer &b = function->buffers[inst.outputs[0]];
      if (b.aliasOf) fail("alias '" + b.name + "' is never allocated (its base is)");
      if (b.param) {
        const Param &p = plan.params[*b.param];
        if (sim.isLive(paramKey(*b.param)))
          fail("param '" + p.name + "' is already allocated");
        sim.add(paramKey(*b.param), {p.name, Category::Parameter, p.localBytes()});
      } else {
        if (sim.isLive(bufferKey(b.id))) fail("buffer '" + b.name + "' is already allocated");
        sim.add(bufferKey(b.id), {b.name, b.category, b.bytes});
      }
    } else if (op.memory == OpMemory::Frees) {
      if (inst.inputs.size() != 1) fail("expects 1 input");
      const Buffer &b = function->buffers[inst.inputs[0]];
      if (b.param) fail("param buffer '" + b.name + "' must not be freed");
      if (b.aliasOf) fail("alias '" + b.name + "' is never freed (its base is)");
      if (!sim.isLive(bufferKey(b.id))) fail("buffer '" + b.name + "' is not allocated");
      sim.remove(bufferKey(b.id));
    } else if (op.workspace && inst.outputs.size() == 1) {
      // Its workspace, live only during the instruction.
      std::vector<const Buffer *> inputs;
      for (int32_t id : inst.inputs) inputs.push_back(&function->buffers[id]);
      const Workspace work =
          op.workspace(function->buffers[inst.outputs[0]], inputs, plan.worldSize);
      if (work.bytes >= 0 && !work.label.empty()) {
        const uint64_t key = uint64_t(1) << 45;  // transient, never clashes
        sim.add(key, {work.label, Category::Activation, work.bytes});
        sim.remove(key);
      }
    }
  }
  return sim.finish();
}

int64_t unshardedParamBytes(const Plan &plan) {
  int64_t total = 0;
  for (const Param &p : plan.params) total += p.fullBytes();
  return total;
}

}  // namespace shardc::runtime
