#include "runtime/Executor.h"

#include "runtime/Kernels.h"
#include "runtime/PlanCheck.h"
#include "runtime/RuntimeError.h"

#include <cstring>

namespace shardc::runtime {
using namespace shardc::plan;

HostTensor TensorView::toHost() const {
  HostTensor t{name, dtype, shape, {}};
  t.data.assign(data, data + logicalBytes());
  return t;
}

const DeviceBuffer *RankState::paramStorage(int32_t index) const {
  auto it = params_.find(index);
  return it == params_.end() ? nullptr : &it->second;
}

/// The state of one function execution; one method per opcode.
class FunctionRun {
public:
  FunctionRun(const Plan &plan, const Function &function, CpuDevice &device,
              Communicator &comm, RankState &state)
      : plan_(plan), function_(function), device_(device), comm_(comm), state_(state),
        owned_(function.buffers.size()) {}

  void bindInputs(const std::vector<HostTensor> &inputs) {
    if (inputs.size() != function_.inputs.size())
      throw RuntimeError("function '" + function_.name + "' takes " +
                         std::to_string(function_.inputs.size()) + " inputs, got " +
                         std::to_string(inputs.size()));
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Buffer &b = function_.buffers[function_.inputs[i]];
      const HostTensor &t = inputs[i];
      std::string place = "function '" + function_.name + "' input " + std::to_string(i) +
                          " '" + b.name + "'";
      if (t.dtype != b.dtype || t.shape != b.shape)
        throw RuntimeError(place + ": expects " + dtypeName(b.dtype) + " " +
                           shapeToString(b.shape) + ", got " + dtypeName(t.dtype) + " " +
                           shapeToString(t.shape) + " ('" + t.name + "')");
      if (static_cast<int64_t>(t.data.size()) != t.expectedBytes())
        throw RuntimeError(place + ": tensor '" + t.name + "' has " +
                           std::to_string(t.data.size()) + " bytes of data, its shape needs " +
                           std::to_string(t.expectedBytes()));
      if (owned_[b.id]) throw RuntimeError(place + ": buffer is bound twice");
      owned_[b.id] = device_.allocate(b.bytes, Category::IO, b.name);
      std::memcpy(owned_[b.id].data(), t.data.data(), t.data.size());
      std::memset(owned_[b.id].data() + t.data.size(), 0,
                  static_cast<size_t>(b.bytes) - t.data.size());
    }
  }

  void run() {
    for (index_ = 0; index_ < function_.body.size(); ++index_) {
      const Instruction &inst = function_.body[index_];
      try {
        if (inst.op == "alloc") alloc(inst);
        else if (inst.op == "free") free(inst);
        else if (inst.op == "fill") fill(inst);
        else if (inst.op == "add") add(inst);
        else if (inst.op == "all_gather") allGather(inst);
        else fail("unknown opcode '" + inst.op + "'");
      } catch (const RuntimeError &e) {
        // Collective and kernel errors do not know the instruction: add it.
        std::string message = e.what();
        std::string place = instructionPlace(function_, index_);
        if (message.rfind(place, 0) == 0) throw;
        throw RuntimeError(place + ": " + message);
      }
    }
  }

  std::vector<TensorView> finish() {
    std::vector<TensorView> views;
    for (int32_t id : function_.outputs) {
      const Buffer &b = function_.buffers[id];
      if (!b.param && !owned_[id])
        throw RuntimeError("function '" + function_.name + "' output '" + b.name +
                           "' is not allocated at the end of the function");
      views.push_back({b.name, b.dtype, b.shape, data(id)});
    }
    for (DeviceBuffer &buffer : owned_)
      if (buffer) state_.retained_.push_back(std::move(buffer));
    return views;
  }

private:
  [[noreturn]] void fail(const std::string &reason) const {
    throw RuntimeError(instructionPlace(function_, index_) + ": " + reason);
  }

  void expectOperands(const Instruction &inst, size_t inputs, size_t outputs) const {
    if (inst.inputs.size() != inputs || inst.outputs.size() != outputs)
      fail("expects " + std::to_string(inputs) + " inputs and " + std::to_string(outputs) +
           " outputs, got " + std::to_string(inst.inputs.size()) + " and " +
           std::to_string(inst.outputs.size()));
  }

  const Buffer &buffer(int32_t id) const { return function_.buffers[id]; }

  std::byte *data(int32_t id) const {
    const Buffer &b = buffer(id);
    if (b.param) {
      auto it = state_.params_.find(*b.param);
      if (it == state_.params_.end())
        fail("param '" + plan_.params[*b.param].name + "' (buffer '" + b.name +
             "') is used before any function allocated it");
      return it->second.data();
    }
    if (!owned_[id]) fail("buffer '" + b.name + "' is used while not allocated");
    return owned_[id].data();
  }

  void alloc(const Instruction &inst) {
    expectOperands(inst, 0, 1);
    const Buffer &b = buffer(inst.outputs[0]);
    if (b.param) {
      const Param &p = plan_.params[*b.param];
      if (state_.params_.count(*b.param)) fail("param '" + p.name + "' is already allocated");
      state_.params_.emplace(*b.param,
                             device_.allocate(p.localBytes(), Category::Parameter, p.name));
      return;
    }
    if (owned_[b.id]) fail("buffer '" + b.name + "' is already allocated");
    owned_[b.id] = device_.allocate(b.bytes, b.category, b.name);
  }

  void free(const Instruction &inst) {
    expectOperands(inst, 1, 0);
    const Buffer &b = buffer(inst.inputs[0]);
    if (b.param) fail("param buffer '" + b.name + "' must not be freed");
    if (!owned_[b.id]) fail("buffer '" + b.name + "' is not allocated");
    owned_[b.id].release();
  }

  void fill(const Instruction &inst) {
    expectOperands(inst, 0, 1);
    auto it = inst.attrs.find("value");
    if (it == inst.attrs.end() || !std::holds_alternative<double>(it->second))
      fail("needs a float attribute 'value'");
    double value = std::get<double>(it->second);
    const Buffer &b = buffer(inst.outputs[0]);
    std::byte *out = data(b.id);
    if (b.param) {
      // Shard-aware: only the rows this rank owns get the value; padding is 0.
      const Param &p = plan_.params[*b.param];
      int64_t localElements = numElements(p.localShape());
      if (p.sharded())
        shardedFill(p.dtype, out, localElements, p.validRows(state_.rank()), p.rowElements(),
                    value);
      else
        runtime::fill(p.dtype, out, localElements, value);
      return;
    }
    runtime::fill(b.dtype, out, numElements(b.shape), value);
  }

  void add(const Instruction &inst) {
    expectOperands(inst, 2, 1);
    const Buffer &a = buffer(inst.inputs[0]), &b = buffer(inst.inputs[1]);
    const Buffer &out = buffer(inst.outputs[0]);
    if (a.dtype != out.dtype || b.dtype != out.dtype)
      fail(std::string("dtypes differ: ") + dtypeName(a.dtype) + " + " + dtypeName(b.dtype) +
           " -> " + dtypeName(out.dtype));
    runtime::add(out.dtype, data(a.id), a.shape, data(b.id), b.shape, data(out.id), out.shape);
  }

  void allGather(const Instruction &inst) {
    expectOperands(inst, 1, 1);
    const Buffer &shard = buffer(inst.inputs[0]), &full = buffer(inst.outputs[0]);
    if (!shard.param) fail("input '" + shard.name + "' is not a param buffer");
    const Param &p = plan_.params[*shard.param];
    if (!p.sharded()) fail("param '" + p.name + "' is replicated, there is nothing to gather");
    if (full.param) fail("output '" + full.name + "' must not be a param buffer");
    if (full.dtype != p.dtype)
      fail("output '" + full.name + "' is " + dtypeName(full.dtype) + " but param '" + p.name +
           "' is " + dtypeName(p.dtype));
    int64_t needed = p.gatheredBytes(comm_.worldSize());
    if (full.bytes < needed)
      fail("output '" + full.name + "' has " + std::to_string(full.bytes) +
           " bytes, the gather of '" + p.name + "' needs " + std::to_string(needed));
    comm_.allGather(data(shard.id), static_cast<size_t>(p.localBytes()), data(full.id));
  }

  const Plan &plan_;
  const Function &function_;
  CpuDevice &device_;
  Communicator &comm_;
  RankState &state_;
  std::vector<DeviceBuffer> owned_;  // non-param buffers, by id
  size_t index_ = 0;
};

std::vector<TensorView> executeFunction(const Plan &plan, const std::string &name,
                                        CpuDevice &device, Communicator &comm,
                                        RankState &state,
                                        const std::vector<HostTensor> &inputs) {
  const Function *function = plan.function(name);
  if (!function) throw RuntimeError("executeFunction: plan has no function '" + name + "'");
  if (comm.worldSize() != plan.worldSize)
    throw RuntimeError("executeFunction('" + name + "'): communicator has " +
                       std::to_string(comm.worldSize()) + " ranks, the plan was built for " +
                       std::to_string(plan.worldSize));
  if (comm.rank() != state.rank())
    throw RuntimeError("executeFunction('" + name + "'): communicator rank " +
                       std::to_string(comm.rank()) + " != rank state " +
                       std::to_string(state.rank()));
  checkPlan(plan);  // ids in range etc.: a bad plan must not crash the executor
  FunctionRun run(plan, *function, device, comm, state);
  run.bindInputs(inputs);
  run.run();
  return run.finish();
}

}  // namespace shardc::runtime
