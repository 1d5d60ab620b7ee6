#include "runtime/MemoryModel.h"

#include "runtime/InitOps.h"
#include "runtime/PlanCheck.h"
#include "runtime/RuntimeError.h"

#include <map>

namespace shardc::runtime {
using namespace shardc::plan;

namespace {

/// The same bookkeeping CpuDevice does, without memory.
class Simulator {
public:
  void add(uint64_t key, LiveAllocation allocation) {
    current_ += allocation.bytes;
    byCategory_[static_cast<size_t>(allocation.category)] += allocation.bytes;
    live_[serial_++] = allocation;
    keyToSerial_[key] = serial_ - 1;
    if (current_ > result.peakBytes) snapshotPeak();
  }
  void remove(uint64_t key) {
    auto serial = keyToSerial_.at(key);
    const LiveAllocation &a = live_.at(serial);
    current_ -= a.bytes;
    byCategory_[static_cast<size_t>(a.category)] -= a.bytes;
    live_.erase(serial);
    keyToSerial_.erase(key);
  }
  bool isLive(uint64_t key) const { return keyToSerial_.count(key) != 0; }
  void snapshotPeak() {
    result.peakBytes = current_;
    result.peakByCategory = byCategory_;
    result.liveAtPeak = live();
  }
  std::vector<LiveAllocation> live() const {
    std::vector<LiveAllocation> out;
    for (const auto &[serial, a] : live_) out.push_back(a);
    return out;
  }
  void finish() {
    result.endBytes = current_;
    result.endByCategory = byCategory_;
    result.liveAtEnd = live();
    for (const LiveAllocation &a : result.liveAtEnd)
      if (a.category == Category::Parameter) result.paramsAtEnd.push_back(a);
  }

  MemoryPrediction result;

private:
  int64_t current_ = 0;
  CategoryBytes byCategory_{};
  uint64_t serial_ = 0;
  std::map<uint64_t, LiveAllocation> live_;
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
  sim.snapshotPeak();  // the window starts with what was carried in

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
    if (inst.op == "alloc") {
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
    } else if (inst.op == "free") {
      if (inst.inputs.size() != 1) fail("expects 1 input");
      const Buffer &b = function->buffers[inst.inputs[0]];
      if (b.param) fail("param buffer '" + b.name + "' must not be freed");
      if (b.aliasOf) fail("alias '" + b.name + "' is never freed (its base is)");
      if (!sim.isLive(bufferKey(b.id))) fail("buffer '" + b.name + "' is not allocated");
      sim.remove(bufferKey(b.id));
    } else if (inst.op == "orthogonal" && inst.outputs.size() == 1) {
      // Its QR workspace, live only during the instruction.
      const Buffer &b = function->buffers[inst.outputs[0]];
      const int64_t work = orthogonalWorkBytes(b.shape, b.dtype);
      if (!b.param && work >= 0) {
        const uint64_t key = uint64_t(1) << 45;  // transient, never clashes
        sim.add(key, {b.name + ".qr", Category::Activation, work});
        sim.remove(key);
      }
    }
  }
  sim.finish();
  return sim.result;
}

int64_t unshardedParamBytes(const Plan &plan) {
  int64_t total = 0;
  for (const Param &p : plan.params) total += p.fullBytes();
  return total;
}

}  // namespace shardc::runtime
