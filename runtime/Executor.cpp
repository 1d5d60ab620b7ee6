#include "runtime/Executor.h"

#include "runtime/DataParallel.h"
#include "runtime/InitOps.h"
#include "runtime/Kernels.h"
#include "runtime/OpRules.h"
#include "runtime/Optimizers.h"
#include "runtime/Philox.h"
#include "runtime/PlanCheck.h"
#include "runtime/RuntimeError.h"
#include "runtime/checkpoint/ShardReader.h"
#include "runtime/init/ParallelFor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>

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

bool Backend::supports(OpCode op) const {
  const std::span<const OpCode> missing = unsupportedOps();
  return std::find(missing.begin(), missing.end(), op) == missing.end();
}

void Backend::noKernel(OpCode op) const {
  throw RuntimeError(std::string("op '") + opName(op) + "' has no kernel on the " + name() +
                     " backend");
}
void Backend::orthogonal(const init::GeneratorSpec &, double, DType, int64_t, int64_t, void *,
                         void *) {
  noKernel(OpCode::Orthogonal);
}
void Backend::normOf(const init::NormOfSource &, const std::vector<int64_t> &, int64_t, int64_t,
                     DType, void *, void *) {
  noKernel(OpCode::NormOf);
}
void Backend::load(const checkpoint::TensorLocation &, const Region &, std::byte *, int64_t) {
  noKernel(OpCode::Load);
}
void Backend::crossEntropy(const KTensor &, const KTensor &, int64_t, const KTensor &) {
  noKernel(OpCode::CrossEntropy);
}
void Backend::noKernel(OpFamily family) const {
  throw RuntimeError(std::string("op family '") + opFamilyName(family) + "' has no kernel on the " +
                     name() + " backend");
}
void Backend::conv(const ConvParams &, const KTensor &, const KTensor &, const KTensor *,
                   const KTensor &) {
  noKernel(OpFamily::Conv);
}
void Backend::convWeightGrad(const ConvParams &, const KTensor &, const KTensor &,
                             const std::vector<int64_t> &, const KTensor &) {
  noKernel(OpCode::ConvWeightGrad);
}
void Backend::pool(const PoolParams &, const KTensor &, const KTensor &) {
  noKernel(OpFamily::Pool);
}
void Backend::maxPoolBackward(const PoolParams &, const KTensor &, const KTensor &,
                              const KTensor &) {
  noKernel(OpCode::MaxPoolBackward);
}
void Backend::adaptivePool(PoolKind, const std::vector<int64_t> &, const KTensor &,
                           const KTensor &) {
  noKernel(OpFamily::AdaptivePool);
}
void Backend::batchNorm(const KTensor &, const KTensor &, const KTensor &, const KTensor *,
                        const KTensor *, double, const KTensor &) {
  noKernel(OpFamily::BatchNorm);
}
void Backend::groupNorm(const KTensor &, int64_t, const KTensor *, const KTensor *, double,
                        const KTensor &) {
  noKernel(OpFamily::GroupNorm);
}
void Backend::reduce(ReduceKind, const KTensor &, const std::vector<int64_t> &, int64_t,
                     const KTensor &) {
  noKernel(OpFamily::Reduce);
}
void Backend::unary(UnaryOp, double, double, const KTensor &, const KTensor &) {
  noKernel(OpFamily::Unary);
}
void Backend::index(IndexKind, const IndexParams &, const KTensor &, const KTensor *,
                    const KTensor *, const KTensor &) {
  noKernel(OpFamily::Index);
}
void Backend::compare(CompareOp, const KTensor &, const KTensor *, double, const KTensor &) {
  noKernel(OpFamily::Compare);
}
void Backend::where(const KTensor &, const KTensor &, const KTensor &, const KTensor &) {
  noKernel(OpFamily::Where);
}
void Backend::cast(const KTensor &, const KTensor &) { noKernel(OpFamily::Cast); }
void Backend::cumsum(const ScanParams &, const KTensor &, const KTensor &) {
  noKernel(OpFamily::Scan);
}
void Backend::dropout(const DropoutParams &, uint64_t, uint64_t, const KTensor &, const KTensor &,
                      const KTensor &) {
  noKernel(OpFamily::Random);
}
void Backend::gridSample(const SampleParams &, const KTensor &, const KTensor &, const KTensor &) {
  noKernel(OpFamily::Sample);
}
void Backend::gridSampleBackward(const SampleParams &, SampleGrad, const KTensor &, const KTensor &,
                                 const KTensor &, const KTensor &) {
  noKernel(OpCode::GridSampleBackward);
}
void Backend::allReduceSum(Communicator &, const KTensor &, const KTensor &, std::byte *) {
  noKernel(OpFamily::AllReduce);
}
void Backend::reduceScatter(Communicator &, const KTensor &, const KTensor &, std::byte *, bool) {
  noKernel(OpCode::ReduceScatter);
}
void Backend::gradNorm(Communicator &, const std::vector<KTensor> &, const std::vector<bool> &,
                       const KTensor &) {
  noKernel(OpCode::GradNorm);
}
void Backend::sgdStep(const SgdParams &, const KTensor &, const KTensor &, const KTensor *,
                      const KTensor *, const KTensor *) {
  noKernel(OpCode::SgdStep);
}
void Backend::adamwStep(const AdamwParams &, const KTensor &, const KTensor &, const KTensor &,
                        const KTensor &, const KTensor &, const KTensor *) {
  noKernel(OpCode::AdamwStep);
}
void Backend::moeExperts(const MoeParams &, const KTensor &, const KTensor &, const KTensor &,
                         const KTensor &, const KTensor &, const KTensor &, std::byte *) {
  noKernel(OpFamily::Experts);
}
void Backend::moeExpertsBackward(const MoeParams &, const KTensor &, const KTensor &,
                                 const KTensor &, const KTensor &, const KTensor &, const KTensor &,
                                 const KTensor *, const KTensor *, const KTensor &, std::byte *) {
  noKernel(OpCode::MoeExpertsBackward);
}
void Backend::moeExpertsHidden(const KTensor &, const KTensor &, const KTensor &, const KTensor &,
                               std::byte *) {
  noKernel(OpCode::MoeExpertsHidden);
}
void Backend::moeExpertsGatedGrad(const KTensor &, const KTensor &, const KTensor &,
                                  const KTensor &, std::byte *) {
  noKernel(OpCode::MoeExpertsGatedGrad);
}
void Backend::sdpaBackward(const AttentionGradParams &, const KTensor &, const KTensor &,
                           const KTensor &, const KTensor &, const KTensor *, const KTensor &,
                           std::byte *) {
  noKernel(OpCode::SdpaBackward);
}
void Backend::linearCrossEntropy(const LossHeadParams &, const KTensor &, const KTensor &,
                                 const KTensor &, const KTensor *scale, const KTensor &,
                                 std::byte *) {
  noKernel(scale ? OpCode::LinearCrossEntropyBackward : OpCode::LinearCrossEntropy);
}

namespace {

std::string countText(int count) { return std::to_string(count); }

std::string inputsText(const OpInfo &info) {
  if (info.maxInputs == kAny) return countText(info.minInputs) + " or more inputs";
  std::string text = countText(info.minInputs);
  if (info.maxInputs != info.minInputs) text += ".." + countText(info.maxInputs);
  return text + (info.maxInputs == 1 ? " input" : " inputs");
}

const char *withArticle(AttrKind kind) {
  switch (kind) {
  case AttrKind::Int: return "an integer";
  case AttrKind::Float: return "a float";
  case AttrKind::String: return "a string";
  case AttrKind::IntList: return "an integer list";
  }
  return "?";
}

bool holds(AttrKind kind, const AttrValue &value) {
  switch (kind) {
  case AttrKind::Int: return std::holds_alternative<int64_t>(value);
  case AttrKind::Float: return std::holds_alternative<double>(value);
  case AttrKind::String: return std::holds_alternative<std::string>(value);
  case AttrKind::IntList: return std::holds_alternative<std::vector<int64_t>>(value);
  }
  return false;
}

std::optional<init::PointwiseKind> pointwiseKind(OpCode op) {
  using K = init::PointwiseKind;
  switch (op) {
  case OpCode::MulScalar: return K::Mul;
  case OpCode::AddScalar: return K::Add;
  case OpCode::SubScalar: return K::Sub;
  case OpCode::DivScalar: return K::Div;
  case OpCode::Clamp: return K::Clamp;
  case OpCode::Erfinv: return K::Erfinv;
  case OpCode::Sqrt: return K::Sqrt;
  case OpCode::Neg: return K::Neg;
  case OpCode::InitExp: return K::Exp;
  case OpCode::InitLog: return K::Log;
  case OpCode::InitExpm1: return K::Expm1;
  case OpCode::InverseSoftplus: return K::InverseSoftplus;
  default: return std::nullopt;
  }
}

std::optional<BinaryOp> binaryOp(OpCode op) {
  switch (op) {
  case OpCode::Add: return BinaryOp::Add;
  case OpCode::Sub: return BinaryOp::Sub;
  case OpCode::Mul: return BinaryOp::Mul;
  case OpCode::Div: return BinaryOp::Div;
  default: return std::nullopt;
  }
}

}  // namespace

/// The state of one function execution; one method per opcode family.
class FunctionRun {
public:
  FunctionRun(const Plan &plan, const Function &function, Backend &backend, Communicator &comm,
              RankState &state, uint64_t seed)
      : plan_(plan), function_(function), backend_(backend), device_(backend.device()),
        comm_(comm), state_(state), seed_(seed), owned_(function.buffers.size()) {}

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
      backend_.copyFromHost(owned_[b.id].data(), t.data.data(), t.data.size());
      backend_.zero(owned_[b.id].data() + t.data.size(),
                    b.bytes - static_cast<int64_t>(t.data.size()));
    }
  }

  void run() {
    try {
      runBody();
    } catch (...) {
      // Buffers of a gather in flight must not be freed under it: complete
      // it (an aborted communicator returns at once) before they go.
      abandonGathers();
      throw;
    }
    backend_.finish("function '" + function_.name + "'");
    if (state_.profile) ++state_.profile->functions;
  }

  void runBody() {
    for (index_ = 0; index_ < function_.body.size(); ++index_) {
      const Instruction &inst = function_.body[index_];
      if (!executesOn(inst, state_.rank())) continue;  // another rank's work
      try {
        if (!inFlight_.empty() && touchesGathersInFlight(inst)) awaitGathers();
        validate(inst);
        if (state_.profile) profiled(inst);
        else dispatch(inst);
      } catch (const RuntimeError &e) {
        // Collective and kernel errors do not know the instruction: add it.
        std::string message = e.what();
        std::string place = instructionPlace(function_, index_);
        if (message.rfind(place, 0) == 0) throw;
        throw RuntimeError(place + ": " + message);
      }
    }
    awaitGathers();  // outputs and the next function see every gathered byte
  }

  std::vector<TensorView> finish() {
    std::vector<TensorView> views;
    for (int32_t id : function_.outputs) {
      const Buffer &b = function_.buffers[id];
      if (!b.param && !b.aliasOf && !owned_[id])
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

  // ------------------------------------------------ decode and validate --

  /// The op table's rules: the backend has a kernel, operand counts,
  /// attribute presence and kinds, in-place operands.
  void validate(const Instruction &inst) const {
    const OpInfo &info = opInfo(inst.op);
    if (!backend_.supports(inst.op))
      fail(std::string("op '") + info.name + "' is not supported by the " + backend_.name() +
           " backend (its unsupported-op list; docs/ops.md)");
    const int inputs = static_cast<int>(inst.inputs.size());
    const int outputs = static_cast<int>(inst.outputs.size());
    if (inputs < info.minInputs || (info.maxInputs != kAny && inputs > info.maxInputs) ||
        outputs != info.outputs)
      fail("expects " + inputsText(info) + " and " + countText(info.outputs) +
           (info.outputs == 1 ? " output" : " outputs") + ", got " + std::to_string(inputs) +
           " and " + std::to_string(outputs));
    for (const AttrSpec &spec : info.attrs) {
      auto it = inst.attrs.find(spec.name);
      if (it == inst.attrs.end()) {
        if (spec.required)
          fail(std::string("needs ") + withArticle(spec.kind) + " attribute '" + spec.name + "'");
        continue;
      }
      if (holds(spec.kind, it->second)) continue;
      if (spec.kind == AttrKind::IntList)
        fail(std::string("attribute '") + spec.name + "' must be an integer list");
      fail(std::string("needs ") + withArticle(spec.kind) + " attribute '" + spec.name + "'");
    }
    if (info.memory == OpMemory::InPlace && inst.inputs[0] != inst.outputs[0])
      fail("works in place: input '" + buffer(inst.inputs[0]).name + "' and output '" +
           buffer(inst.outputs[0]).name + "' must be the same buffer");
  }

  /// dispatch() timed into the rank's profile, the backend's queue
  /// drained so that the op's own kernel is inside its time.
  void profiled(const Instruction &inst) {
    const auto start = std::chrono::steady_clock::now();
    dispatch(inst);
    backend_.finish("function '" + function_.name + "'");
    state_.profile->add(opName(inst.op),
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                            .count());
  }

  void dispatch(const Instruction &inst) {
    if (opInfo(inst.op).generic()) return dispatchFamily(inst);
    switch (inst.op) {
    case OpCode::Alloc: return alloc(inst);
    case OpCode::Free: return free(inst);
    case OpCode::Fill: return fill(inst);
    case OpCode::Generate: return generate(inst);
    case OpCode::Orthogonal: return orthogonal(inst);
    case OpCode::NormOf: return normOf(inst);
    case OpCode::MulScalar:
    case OpCode::AddScalar:
    case OpCode::SubScalar:
    case OpCode::DivScalar:
    case OpCode::Clamp:
    case OpCode::Erfinv:
    case OpCode::Sqrt:
    case OpCode::Neg:
    case OpCode::InitExp:
    case OpCode::InitLog:
    case OpCode::InitExpm1:
    case OpCode::InverseSoftplus: return pointwise(inst, *pointwiseKind(inst.op));
    case OpCode::Load: return load(inst);
    case OpCode::FillRows: return fillRows(inst);
    case OpCode::AllGather: return allGather(inst);
    case OpCode::Scatter: return scatter(inst);
    case OpCode::Add:
    case OpCode::Sub:
    case OpCode::Mul:
    case OpCode::Div:
      return backend_.binary(*binaryOp(inst.op), tensor(inst.inputs[0]), tensor(inst.inputs[1]),
                             tensor(inst.outputs[0]));
    case OpCode::Embedding:
      return backend_.embedding(tensor(inst.inputs[0]), tensor(inst.inputs[1]),
                                tensor(inst.outputs[0]));
    case OpCode::Linear: {
      KTensor bias = inst.inputs.size() == 3 ? tensor(inst.inputs[2]) : KTensor{};
      return backend_.linear(tensor(inst.inputs[0]), tensor(inst.inputs[1]),
                             inst.inputs.size() == 3 ? &bias : nullptr, tensor(inst.outputs[0]));
    }
    case OpCode::Matmul:
      return backend_.matmul(tensor(inst.inputs[0]), tensor(inst.inputs[1]),
                             tensor(inst.outputs[0]), matmulLayout(inst));
    case OpCode::Gelu:
    case OpCode::Silu:
    case OpCode::Relu:
      return backend_.activation(activationKind(inst), tensor(inst.inputs[0]),
                                 tensor(inst.outputs[0]));
    case OpCode::LayerNorm: {
      KTensor w = inst.inputs.size() > 1 ? tensor(inst.inputs[1]) : KTensor{};
      KTensor b = inst.inputs.size() > 2 ? tensor(inst.inputs[2]) : KTensor{};
      return backend_.layerNorm(tensor(inst.inputs[0]), inst.inputs.size() > 1 ? &w : nullptr,
                                inst.inputs.size() > 2 ? &b : nullptr, attrDouble(inst, "eps"),
                                tensor(inst.outputs[0]));
    }
    case OpCode::RmsNorm: {
      KTensor w = inst.inputs.size() > 1 ? tensor(inst.inputs[1]) : KTensor{};
      return backend_.rmsNorm(tensor(inst.inputs[0]), inst.inputs.size() > 1 ? &w : nullptr,
                              attrDouble(inst, "eps"), tensor(inst.outputs[0]));
    }
    case OpCode::Softmax:
      return backend_.softmax(tensor(inst.inputs[0]), attrInt(inst, "dim"),
                              tensor(inst.outputs[0]));
    case OpCode::Sdpa: {
      const KTensor q = tensor(inst.inputs[0]);
      const int64_t causal = attrIntOr(inst, "causal", 0);
      if (causal != 0 && causal != 1) fail("causal must be 0 or 1, got " + std::to_string(causal));
      const double defaultScale =
          q.shape.size() == 4 && q.shape[3] > 0 ? 1.0 / std::sqrt(double(q.shape[3])) : 1.0;
      // The optional fourth input: an additive mask (torch's float attn_mask).
      const KTensor mask = inst.inputs.size() > 3 ? tensor(inst.inputs[3]) : KTensor{};
      return backend_.sdpa(q, tensor(inst.inputs[1]), tensor(inst.inputs[2]),
                           inst.inputs.size() > 3 ? &mask : nullptr, tensor(inst.outputs[0]),
                           causal == 1,
                           attrDoubleOr(inst, "scale", defaultScale));
    }
    case OpCode::Rope:
      return backend_.rope(tensor(inst.inputs[0]), attrDoubleOr(inst, "theta", 10000.0),
                           tensor(inst.outputs[0]));
    case OpCode::StridedCopy:
      return backend_.stridedCopy(tensor(inst.inputs[0]), *attrList(inst, "strides"),
                                  attrIntOr(inst, "offset", 0), tensor(inst.outputs[0]));
    case OpCode::Cat: {
      std::vector<KTensor> inputs;
      for (int32_t id : inst.inputs) inputs.push_back(tensor(id));
      return backend_.cat(inputs, attrInt(inst, "dim"), tensor(inst.outputs[0]));
    }
    case OpCode::CrossEntropy:
      return backend_.crossEntropy(tensor(inst.inputs[0]), tensor(inst.inputs[1]),
                                   attrIntOr(inst, "ignore_index", -100),
                                   tensor(inst.outputs[0]));
    case OpCode::ReduceScatter: return reduceScatter(inst);
    case OpCode::GradNorm: return gradNorm(inst);
    case OpCode::SgdStep: {
      const SgdParams p{attrDouble(inst, "lr"),
                        attrDoubleOr(inst, "momentum", 0.0),
                        attrDoubleOr(inst, "weight_decay", 0.0),
                        attrDoubleOr(inst, "max_grad_norm", 0.0),
                        attrIntOr(inst, "warmup_steps", 0),
                        attrIntOr(inst, "decay_steps", 0),
                        attrDoubleOr(inst, "min_lr", 0.0),
                        attrIntOr(inst, "nesterov", 0) != 0};
      checkSchedule(p.lr, p.warmupSteps, p.decaySteps, p.minLr);
      if (p.nesterov && p.momentum == 0) fail("nesterov needs a momentum");
      // The inputs: param, grad, then the momentum buffer, the step count
      // and the norm, each only when its attribute asks for it.
      const KTensor norm = clipNormInput(inst, p.maxGradNorm, 2);
      const bool hasMomentum = p.momentum != 0, scheduled = p.warmupSteps > 0 || p.decaySteps > 0;
      const size_t expected = 2 + hasMomentum + scheduled + (p.maxGradNorm > 0);
      if (inst.inputs.size() != expected)
        fail("takes " + std::to_string(expected) +
             " inputs: param, grad, then a momentum buffer (momentum != 0), the step count "
             "(a schedule) and the gradients' norm (max_grad_norm > 0)");
      const KTensor momentum = hasMomentum ? tensor(inst.inputs[2]) : KTensor{};
      const KTensor step = scheduled ? tensor(inst.inputs[2 + hasMomentum]) : KTensor{};
      return backend_.sgdStep(p, tensor(inst.inputs[0]), tensor(inst.inputs[1]),
                              hasMomentum ? &momentum : nullptr, scheduled ? &step : nullptr,
                              p.maxGradNorm > 0 ? &norm : nullptr);
    }
    case OpCode::AdamwStep: {
      const AdamwParams p{attrDouble(inst, "lr"),
                          attrDouble(inst, "beta1"),
                          attrDouble(inst, "beta2"),
                          attrDouble(inst, "eps"),
                          attrDouble(inst, "weight_decay"),
                          attrIntOr(inst, "warmup_steps", 0),
                          attrIntOr(inst, "decay_steps", 0),
                          attrDoubleOr(inst, "min_lr", 0.0),
                          attrDoubleOr(inst, "max_grad_norm", 0.0)};
      checkSchedule(p.lr, p.warmupSteps, p.decaySteps, p.minLr);
      const KTensor norm = clipNormInput(inst, p.maxGradNorm, 5);
      if (inst.inputs.size() != 5 + static_cast<size_t>(p.maxGradNorm > 0))
        fail("takes 5 inputs (param, grad, exp_avg, exp_avg_sq, step), then the gradients' "
             "norm when max_grad_norm > 0");
      return backend_.adamwStep(p, tensor(inst.inputs[0]), tensor(inst.inputs[1]),
                                tensor(inst.inputs[2]), tensor(inst.inputs[3]),
                                tensor(inst.inputs[4]), p.maxGradNorm > 0 ? &norm : nullptr);
    }
    default: break;  // family ops: dispatchFamily (the table, not a case each)
    }
    fail("opcode " + std::to_string(static_cast<int>(inst.op)) + " is not in the op table");
  }

  /// A SHARDC_FAMILY_OP: the family's rule decides the output's type (a plan
  /// whose output buffer disagrees is rejected here, before the kernel), then
  /// the family's Backend method runs with the decoded parameters.
  void dispatchFamily(const Instruction &inst) {
    const OpInfo &info = opInfo(inst.op);
    std::vector<TensorType> types;
    std::vector<KTensor> in;
    for (int32_t id : inst.inputs) {
      in.push_back(tensor(id));
      types.push_back({buffer(id).shape, buffer(id).dtype});
    }
    const TensorType expected = resultType(info, types, inst.attrs);
    const Buffer &out = buffer(inst.outputs[0]);
    if (expected.shape != out.shape || expected.dtype != out.dtype)
      fail("output '" + out.name + "' is " + dtypeName(out.dtype) + " " +
           shapeToString(out.shape) + ", the op's rule gives " + dtypeName(expected.dtype) +
           " " + shapeToString(expected.shape));
    // Kernels read inputs while writing y, but for one operand of a few
    // ops, read element by element before it is written (overwritableOperand).
    for (size_t k = 0; k < inst.inputs.size(); ++k)
      if (inst.inputs[k] == inst.outputs[0] && static_cast<int>(k) != overwritableOperand(inst.op))
        fail("output '" + out.name + "' must not be an input");
    const KTensor y = tensor(inst.outputs[0]);
    auto optional = [&](size_t i) { return i < in.size() ? &in[i] : nullptr; };
    switch (info.family) {
    case OpFamily::Conv:
      if (static_cast<ConvKind>(info.variant) == ConvKind::WeightGrad)
        return backend_.convWeightGrad(convParams(inst.attrs, in[0].shape.size()), in[0], in[1],
                                       std::get<std::vector<int64_t>>(inst.attrs.at("kernel")), y);
      return backend_.conv(convParams(inst.attrs, in[0].shape.size()), in[0], in[1],
                           optional(2), y);
    case OpFamily::Pool:
      if (inst.op == OpCode::MaxPoolBackward)
        return backend_.maxPoolBackward(poolParams(PoolKind::Max, inst.attrs), in[0], in[1], y);
      return backend_.pool(poolParams(static_cast<PoolKind>(info.variant), inst.attrs), in[0],
                           y);
    case OpFamily::AdaptivePool:
      return backend_.adaptivePool(static_cast<PoolKind>(info.variant),
                                   std::get<std::vector<int64_t>>(inst.attrs.at("output_size")),
                                   in[0], y);
    case OpFamily::BatchNorm:
      return backend_.batchNorm(in[0], in[1], in[2], optional(3), optional(4),
                                attrDouble(inst, "eps"), y);
    case OpFamily::GroupNorm:
      return backend_.groupNorm(in[0], attrInt(inst, "groups"), optional(1), optional(2),
                                attrDouble(inst, "eps"), y);
    case OpFamily::Reduce: {
      const ReduceArgs args = reduceArgs(info, inst.attrs);
      return backend_.reduce(static_cast<ReduceKind>(info.variant), in[0], args.dims,
                             args.correction, y);
    }
    case OpFamily::Unary: {
      const UnaryOp op = static_cast<UnaryOp>(info.variant);
      const UnaryArgs args = unaryArgs(op, inst.attrs);
      return backend_.unary(op, args.a, args.b, in[0], y);
    }
    case OpFamily::Index: {
      const IndexKind kind = static_cast<IndexKind>(info.variant);
      return backend_.index(kind, indexParams(kind, inst.attrs), in[0], optional(1), optional(2),
                            y);
    }
    case OpFamily::Experts: {
      DeviceBuffer work = workspace(inst, out);
      if (static_cast<ExpertsKind>(info.variant) == ExpertsKind::Hidden)
        return backend_.moeExpertsHidden(in[0], in[1], in[2], y, work.data());
      if (static_cast<ExpertsKind>(info.variant) == ExpertsKind::GatedGrad)
        return backend_.moeExpertsGatedGrad(in[0], in[1], in[2], y, work.data());
      if (static_cast<ExpertsKind>(info.variant) == ExpertsKind::Backward)
        return backend_.moeExpertsBackward(moeParams(inst.attrs), in[0], in[1], in[2], in[3], in[4],
                                           in[5], optional(6), optional(7), y, work.data());
      return backend_.moeExperts(moeParams(inst.attrs), in[0], in[1], in[2], in[3], in[4], y,
                                 work.data());
    }
    case OpFamily::LossHead: {
      DeviceBuffer work = workspace(inst, out);
      return backend_.linearCrossEntropy(lossHeadParams(inst.attrs), in[0], in[1], in[2],
                                         optional(3), y, work.data());
    }
    case OpFamily::Attention: {
      DeviceBuffer work = workspace(inst, out);
      return backend_.sdpaBackward(attentionGradParams(inst.attrs), in[0], in[1], in[2], in[3],
                                   optional(4), y, work.data());
    }
    case OpFamily::Compare:
      return backend_.compare(static_cast<CompareOp>(info.variant), in[0], optional(1),
                              compareValue(info, in.size(), inst.attrs).value_or(0.0), y);
    case OpFamily::Where:
      return backend_.where(in[0], in[1], in[2], y);
    case OpFamily::Cast:
      return backend_.cast(in[0], y);
    case OpFamily::Scan:
      return backend_.cumsum(scanParams(inst.attrs), in[0], y);
    case OpFamily::Random: {  // the mask follows the run's seed and the rank's first row
      const DropoutParams p = dropoutParams(inst.attrs);
      const int64_t firstRow =
          (p.globalRows > 0 ? batchSlice(p.globalRows, comm_.worldSize(), state_.rank()).begin
                            : 0) +
          p.rowOffset;
      return backend_.dropout(p, seed_, static_cast<uint64_t>(firstRow * p.rowElements), in[0],
                              in[1], y);
    }
    case OpFamily::AllReduce: {  // every rank's value, gathered, then summed in rank order
      DeviceBuffer work = workspace(inst, out);
      backend_.beforeCollective(comm_);
      return backend_.allReduceSum(comm_, in[0], y, work.data());
    }
    case OpFamily::Sample:
      if (inst.op == OpCode::GridSampleBackward)
        return backend_.gridSampleBackward(sampleParams(inst.attrs), sampleGradWrt(inst.attrs),
                                           in[0], in[1], in[2], y);
      return backend_.gridSample(sampleParams(inst.attrs), in[0], in[1], y);
    case OpFamily::View:  // the strided copy every backend has (strided_copy's)
      return backend_.stridedCopy(in[0], *attrList(inst, "stride"), attrIntOr(inst, "offset", 0),
                                  y);
    case OpFamily::None: break;
    }
    fail(std::string("op '") + info.name + "' has no family");
  }

  /// matmul's transpose_a / transpose_b: 0 (absent) or 1.
  MatmulLayout matmulLayout(const Instruction &inst) const {
    auto flag = [&](const char *name) {
      const int64_t value = attrIntOr(inst, name, 0);
      if (value != 0 && value != 1)
        fail(std::string(name) + " must be 0 or 1, got " + std::to_string(value));
      return value == 1;
    };
    return {flag("transpose_a"), flag("transpose_b")};
  }

  Activation activationKind(const Instruction &inst) const {
    if (inst.op == OpCode::Silu) return Activation::Silu;
    if (inst.op == OpCode::Relu) return Activation::Relu;
    const std::string approximate = attrStringOr(inst, "approximate", "none");
    if (approximate == "none") return Activation::GeluErf;
    if (approximate == "tanh") return Activation::GeluTanh;
    fail("approximate must be \"none\" or \"tanh\", got \"" + approximate + "\"");
  }

  // --------------------------------------------------------- buffers --

  const Buffer &buffer(int32_t id) const { return function_.buffers[id]; }

  std::byte *data(int32_t id) const {
    const Buffer &b = buffer(id);
    if (b.aliasOf) {
      // A view: valid exactly while its base is (checkPlan bounds the chain).
      return data(*b.aliasOf) + b.byteOffset;
    }
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

  /// Whether a non-param buffer (or an alias's base) is allocated now.
  bool allocated(int32_t id) const {
    while (buffer(id).aliasOf) id = *buffer(id).aliasOf;
    return static_cast<bool>(owned_[id]);
  }

  KTensor tensor(int32_t id) const {
    const Buffer &b = buffer(id);
    return {b.dtype, b.shape, data(id)};
  }

  void alloc(const Instruction &inst) {
    const Buffer &b = buffer(inst.outputs[0]);
    if (b.aliasOf) fail("alias '" + b.name + "' is never allocated (its base is)");
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
    const Buffer &b = buffer(inst.inputs[0]);
    if (b.param) fail("param buffer '" + b.name + "' must not be freed");
    if (b.aliasOf) fail("alias '" + b.name + "' is never freed (its base is)");
    if (!owned_[b.id]) fail("buffer '" + b.name + "' is not allocated");
    owned_[b.id].release();
  }

  /// The op table's workspace for this instruction, allocated through the
  /// device (MemoryModel predicts it from the same rule).
  DeviceBuffer workspace(const Instruction &inst, const Buffer &output) const {
    std::vector<const Buffer *> inputs;
    for (int32_t id : inst.inputs) inputs.push_back(&buffer(id));
    const Workspace work = opInfo(inst.op).workspace(output, inputs, comm_.worldSize());
    if (work.bytes < 0)
      fail("'" + output.name + "' is too large for " + opName(inst.op) + "'s working memory");
    return device_.allocate(work.bytes, Category::Activation, work.label);
  }

  /// The part of a buffer this rank computes (Region, Backend.h).
  Region region(int32_t id) const {
    const Buffer &b = buffer(id);
    Region r;
    r.data = data(id);
    r.dtype = b.dtype;
    if (!b.param) {
      r.fullShape = b.shape;
      r.count = r.localElements = numElements(b.shape);
      return r;
    }
    const Param &p = plan_.params[*b.param];
    r.fullShape = p.shape;
    r.localElements = numElements(p.localShape());
    if (!p.sharded()) {
      r.count = r.localElements;
      return r;
    }
    r.begin = state_.rank() * p.chunkRows * p.rowElements();
    r.count = p.validRows(state_.rank()) * p.rowElements();
    return r;
  }
  void zeroPadding(const Region &r) const {
    const int64_t size = dtypeSize(r.dtype);
    backend_.zero(r.data + r.count * size, (r.localElements - r.count) * size);
  }

  // ------------------------------------------------------------ attributes --

  const AttrValue *attr(const Instruction &inst, const char *name) const {
    auto it = inst.attrs.find(name);
    return it == inst.attrs.end() ? nullptr : &it->second;
  }
  double attrDouble(const Instruction &inst, const char *name) const {
    const AttrValue *value = attr(inst, name);
    if (!value || !std::holds_alternative<double>(*value))
      fail(std::string("needs a float attribute '") + name + "'");
    return std::get<double>(*value);
  }
  int64_t attrInt(const Instruction &inst, const char *name) const {
    const AttrValue *value = attr(inst, name);
    if (!value || !std::holds_alternative<int64_t>(*value))
      fail(std::string("needs an integer attribute '") + name + "'");
    return std::get<int64_t>(*value);
  }
  const std::string &attrString(const Instruction &inst, const char *name) const {
    const AttrValue *value = attr(inst, name);
    if (!value || !std::holds_alternative<std::string>(*value))
      fail(std::string("needs a string attribute '") + name + "'");
    return std::get<std::string>(*value);
  }
  double attrDoubleOr(const Instruction &inst, const char *name, double otherwise) const {
    return attr(inst, name) ? attrDouble(inst, name) : otherwise;
  }
  int64_t attrIntOr(const Instruction &inst, const char *name, int64_t otherwise) const {
    return attr(inst, name) ? attrInt(inst, name) : otherwise;
  }
  std::string attrStringOr(const Instruction &inst, const char *name,
                           const std::string &otherwise) const {
    return attr(inst, name) ? attrString(inst, name) : otherwise;
  }
  /// nullptr when absent; fails when present with another type.
  const std::vector<int64_t> *attrList(const Instruction &inst, const char *name) const {
    const AttrValue *value = attr(inst, name);
    if (!value) return nullptr;
    if (!std::holds_alternative<std::vector<int64_t>>(*value))
      fail(std::string("attribute '") + name + "' must be an integer list");
    return &std::get<std::vector<int64_t>>(*value);
  }

  /// The RNG identity shared by generate and orthogonal.
  void setStream(const Instruction &inst, init::GeneratorSpec &spec) const {
    const std::string &stream = attrString(inst, "stream");
    int64_t position = attrInt(inst, "position");
    if (position < 0 || position > std::numeric_limits<uint32_t>::max())
      fail("position " + std::to_string(position) + " is out of range [0, 2^32)");
    spec.seed = seed_;
    spec.streamHash = philox::fnv1a32(stream.data(), stream.size());
    spec.position = static_cast<uint32_t>(position);
  }

  // ------------------------------------------------------------------ init --

  void fill(const Instruction &inst) {
    const double value = attrDouble(inst, "value");
    const Buffer &b = buffer(inst.outputs[0]);
    std::byte *out = data(b.id);
    if (b.param) {
      // Shard-aware: only the rows this rank owns get the value; padding is 0.
      const Param &p = plan_.params[*b.param];
      const int64_t localElements = numElements(p.localShape());
      if (p.sharded())
        backend_.shardedFill(p.dtype, out, localElements, p.validRows(state_.rank()),
                             p.rowElements(), value);
      else
        backend_.fill(p.dtype, out, localElements, value);
      return;
    }
    backend_.fill(b.dtype, out, numElements(b.shape), value);
  }

  /// A generate instruction's generator (without its shape).
  init::GeneratorSpec generatorSpec(const Instruction &inst) const {
    init::GeneratorSpec spec{};
    const std::string &kind = attrString(inst, "kind");
    if (kind == "fill") {
      spec.kind = init::GeneratorKind::Fill;
      spec.value = attrDouble(inst, "value");
    } else if (kind == "uniform") {
      spec.kind = init::GeneratorKind::Uniform;
      spec.low = attrDouble(inst, "low");
      spec.high = attrDouble(inst, "high");
    } else if (kind == "normal") {
      spec.kind = init::GeneratorKind::Normal;
      spec.mean = attrDouble(inst, "mean");
      spec.std = attrDouble(inst, "std");
    } else if (kind == "trunc_normal") {
      spec.kind = init::GeneratorKind::TruncNormal;
      spec.mean = attrDouble(inst, "mean");
      spec.std = attrDouble(inst, "std");
      spec.low = attrDouble(inst, "low");
      spec.high = attrDouble(inst, "high");
    } else if (kind == "eye") {
      spec.kind = init::GeneratorKind::Eye;
    } else if (kind == "arange") {
      spec.kind = init::GeneratorKind::Arange;
      spec.start = attrDouble(inst, "start");
      spec.step = attrDouble(inst, "step");
    } else {
      fail("unknown generator kind '" + kind +
           "' (fill, uniform, normal, trunc_normal, eye, arange)");
    }
    setStream(inst, spec);
    return spec;
  }

  void generate(const Instruction &inst) {
    init::GeneratorSpec spec = generatorSpec(inst);
    const Region r = region(inst.outputs[0]);
    if (r.dtype == DType::I64) fail("generators write floating dtypes; the output is int64");
    std::vector<int64_t> sourceShape = r.fullShape;
    if (const std::vector<int64_t> *given = attrList(inst, "source_shape")) {
      sourceShape = *given;
      if (checkedLogicalBytes(sourceShape, r.dtype) < 0)
        fail("source_shape " + shapeToString(sourceShape) +
             " has a negative dimension or is too large");
    }
    spec.shape = sourceShape;
    init::validateGeneratorSpec(spec);
    const std::vector<int64_t> *encoding = attrList(inst, "index_map");
    const int64_t elementSize = dtypeSize(r.dtype);

    if (!encoding && sourceShape == r.fullShape) {
      // Fast path: this rank's rows are one contiguous range of the source.
      backend_.generateRange(spec, r.dtype, r.begin, r.count, r.data);
    } else {
      if (!encoding && sourceShape.size() != r.fullShape.size())
        fail("source_shape " + shapeToString(sourceShape) + " has another rank than the output " +
             shapeToString(r.fullShape) + " and there is no index_map");
      IndexMap map = encoding ? IndexMap::parse(*encoding, r.fullShape.size(), sourceShape.size())
                              : IndexMap::identity(r.fullShape.size());
      // A backend that maps on its device does the whole range at once.
      IndexMapProgram program;
      int64_t firstUnmapped = -1;
      if (r.count > 0 && map.toProgram(r.fullShape, sourceShape, program) &&
          backend_.generateMapped(spec, r.dtype, program, r.begin, r.count, r.data,
                                  firstUnmapped)) {
        if (firstUnmapped >= 0) {
          // The host's words for that element (mapFlatIndices throws them).
          int64_t ignored = 0;
          std::vector<int64_t> p;
          mapFlatIndices(map, r.fullShape, sourceShape, r.begin + firstUnmapped, 1, &ignored, p,
                         true);
          fail("index_map: the " + std::string(backend_.name()) + " backend could not map " +
               "output element " + std::to_string(r.begin + firstUnmapped) +
               ", which the host maps");
        }
        zeroPadding(r);
        return;
      }
      // Parts of the range on the backend's host threads, each mapping
      // blocks of source indices on its stack (mapFlatIndices checks they
      // lie in the source). The lowest failing part's error wins, so
      // messages do not depend on the thread count.
      const int parts = r.count >= (int64_t(1) << 16) ? backend_.hostThreads() : 1;
      std::mutex errorMutex;
      int64_t errorAt = std::numeric_limits<int64_t>::max();
      std::exception_ptr error;
      init::parallelFor(r.count, parts, [&](int64_t partBegin, int64_t partCount) {
        try {
          constexpr int64_t kBlock = 4096;
          int64_t indices[kBlock];
          std::vector<int64_t> p;
          for (int64_t done = 0; done < partCount; done += kBlock) {
            const int64_t n = std::min(kBlock, partCount - done), at = partBegin + done;
            mapFlatIndices(map, r.fullShape, sourceShape, r.begin + at, n, indices, p, done == 0);
            backend_.generateAt(spec, r.dtype, indices, n, r.data + at * elementSize);
          }
        } catch (...) {
          std::lock_guard lock(errorMutex);
          if (partBegin < errorAt) {
            errorAt = partBegin;
            error = std::current_exception();
          }
        }
      });
      if (error) std::rethrow_exception(error);
    }
    zeroPadding(r);
  }

  void pointwise(const Instruction &inst, init::PointwiseKind kind) {
    double a = 0, b = 0;
    using K = init::PointwiseKind;
    if (kind == K::Mul || kind == K::Add || kind == K::Sub || kind == K::Div) {
      a = attrDouble(inst, "value");
    } else if (kind == K::Clamp) {
      a = attrDouble(inst, "min");
      b = attrDouble(inst, "max");
    }
    const Region r = region(inst.outputs[0]);
    if (r.dtype == DType::I64) fail("works on floating dtypes; the buffer is int64");
    // Only the valid rows: padding stays zero.
    backend_.pointwise(kind, a, b, r.dtype, r.data, r.count);
  }

  /// A derived parameter: the norm of the source parameter's initial values
  /// (runtime/init/NormOf.h). The source's own init instructions in this
  /// function (a fill or generate, then in-place pointwise ops on its
  /// buffer) say how its values are made; the backend replays them block by
  /// block, so no rank holds the whole source.
  void normOf(const Instruction &inst) {
    const std::string &sourceName = attrString(inst, "source");
    const std::vector<int64_t> &dims = *attrList(inst, "dims");
    std::optional<int32_t> sourceBuffer;
    for (const Buffer &b : function_.buffers)
      if (b.param && plan_.params[*b.param].name == sourceName && !plan_.params[*b.param].isBuffer)
        sourceBuffer = b.id;
    if (!sourceBuffer) fail("source '" + sourceName + "' is not a parameter of this function");
    const Param &sourceParam = plan_.params[*buffer(*sourceBuffer).param];
    init::NormOfSource source;
    source.dtype = sourceParam.dtype;
    bool haveGenerator = false;
    for (const Instruction &other : function_.body) {
      if (other.outputs.size() != 1 || other.outputs[0] != *sourceBuffer) continue;
      if (other.op == OpCode::Alloc) continue;
      if (other.op == OpCode::Fill) {
        source.generator = init::GeneratorSpec{};
        source.generator.kind = init::GeneratorKind::Fill;
        source.generator.value = attrDouble(other, "value");
        source.pointwise.clear();
        haveGenerator = true;
      } else if (other.op == OpCode::Generate) {
        if (attr(other, "index_map") || attr(other, "source_shape"))
          fail("source '" + sourceName + "' is generated through views; norm_of replays a "
               "generator without views only");
        source.generator = generatorSpec(other);
        source.pointwise.clear();
        haveGenerator = true;
      } else if (std::optional<init::PointwiseKind> kind = pointwiseKind(other.op)) {
        init::NormOfSource::Step step{*kind};
        using K = init::PointwiseKind;
        if (*kind == K::Mul || *kind == K::Add || *kind == K::Sub || *kind == K::Div) {
          step.a = attrDouble(other, "value");
        } else if (*kind == K::Clamp) {
          step.a = attrDouble(other, "min");
          step.b = attrDouble(other, "max");
        }
        source.pointwise.push_back(step);
      } else {
        fail("source '" + sourceName + "' is initialized by '" + opName(other.op) +
             "'; norm_of replays a fill or generate and pointwise ops only");
      }
    }
    if (!haveGenerator) fail("source '" + sourceName + "' has no generator in this function");
    source.generator.shape = sourceParam.shape;
    init::validateGeneratorSpec(source.generator);
    const int64_t rank = static_cast<int64_t>(sourceParam.shape.size());
    for (int64_t d : dims)
      if (d < 0 || d >= rank)
        fail("dim " + std::to_string(d) + " is out of range for the source " +
             shapeToString(sourceParam.shape));
    const Region r = region(inst.outputs[0]);
    DeviceBuffer work = workspace(inst, buffer(inst.outputs[0]));
    backend_.normOf(source, dims, r.begin, r.count, r.dtype, r.data, work.data());
    zeroPadding(r);
  }

  /// Rows [start, end) of the full tensor's dim 0 = value: the part of them in
  /// this rank's valid rows (a sharded param's rows are consecutive row-major
  /// elements starting at Region::begin), padding untouched (zero).
  void fillRows(const Instruction &inst) {
    const Region r = region(inst.outputs[0]);
    if (r.dtype == DType::I64) fail("works on floating dtypes; the buffer is int64");
    const int64_t start = attrInt(inst, "start"), end = attrInt(inst, "end");
    const int64_t rows = r.fullShape.empty() ? 1 : r.fullShape[0];
    if (start < 0 || start > end || end > rows)
      fail("rows [" + std::to_string(start) + ", " + std::to_string(end) +
           ") are not within the tensor's " + std::to_string(rows) + " rows");
    const int64_t rowElements = rows == 0 ? 0 : numElements(r.fullShape) / rows;
    const int64_t lo = std::max(start * rowElements, r.begin);
    const int64_t hi = std::min(end * rowElements, r.begin + r.count);
    if (lo >= hi) return;
    backend_.fill(r.dtype, r.data + (lo - r.begin) * dtypeSize(r.dtype), hi - lo,
                  attrDouble(inst, "value"));
  }

  void orthogonal(const Instruction &inst) {
    const Buffer &b = buffer(inst.outputs[0]);
    if (b.param)
      fail("output '" + b.name + "' is a param buffer; orthogonal writes a full tensor "
           "(one owner rank), which a scatter then shards");
    if (b.shape.size() < 2)
      fail("only tensors with 2 or more dimensions are supported, '" + b.name + "' is " +
           shapeToString(b.shape));
    if (b.dtype == DType::I64) fail("works on floating dtypes; '" + b.name + "' is int64");
    const double gain = attrDouble(inst, "gain");
    init::GeneratorSpec spec{};
    spec.kind = init::GeneratorKind::Normal;
    spec.mean = 0;
    spec.std = 1;
    setStream(inst, spec);
    DeviceBuffer work = workspace(inst, b);
    const int64_t rows = b.shape[0];
    int64_t cols = 1;
    for (size_t d = 1; d < b.shape.size(); ++d) cols *= b.shape[d];
    if (rows == 0 || cols == 0) return;
    // torch: flattened = new(rows, cols).normal_(0, 1), in the tensor's dtype.
    spec.shape = {rows, cols};
    init::validateGeneratorSpec(spec);
    backend_.orthogonal(spec, gain, b.dtype, rows, cols, data(b.id), work.data());
  }

  /// This rank's valid rows of a checkpoint tensor into a param's storage,
  /// converted through the io buffer (inputs[0]) when the file's dtype
  /// differs; padding rows zero (docs/checkpoints.md).
  void load(const Instruction &inst) {
    const Buffer &io = buffer(inst.inputs[0]), &target = buffer(inst.outputs[0]);
    if (!target.param) fail("output '" + target.name + "' is not a param buffer");
    if (io.param) fail("input '" + io.name + "' must be an io buffer, not a param");
    const Param &p = plan_.params[*target.param];
    const std::string &file = attrString(inst, "file");
    const std::string &tensor = attrString(inst, "tensor");
    auto &checkpoint = checkpoints_[file];
    if (!checkpoint) checkpoint = checkpoint::Checkpoint::open(file);
    const checkpoint::TensorLocation &where = checkpoint->at(tensor);
    if (where.entry->shape != p.shape)
      throw checkpoint::CheckpointError(
          where.file->path() + ": tensor '" + tensor + "': shape " +
          shapeToString(where.entry->shape) + " does not match parameter '" + p.name + "' " +
          shapeToString(p.shape));
    const Region r = region(target.id);
    backend_.load(where, r, data(io.id), io.bytes);
    zeroPadding(r);
  }

  // ----------------------------------------------------------- collectives --

  /// all_gather, single form: inputs=[param buf], outputs=[full]; FSDP-unit
  /// form (attr `offsets`): inputs=[p1..pk], outputs=[unit], param i's
  /// gathered block (Param::gatheredBytes in the output's dtype) at byte
  /// offsets[i] of the unit. With `convert` = 1 a param stored in another
  /// float dtype than the output's (master weights) is cast into this rank's
  /// part of its gathered block, which is then gathered in place: the other
  /// ranks receive the converted rows, and no buffer beyond the output is
  /// needed. Without it blocks hold the params' own bytes.
  void allGather(const Instruction &inst) {
    const std::vector<int64_t> *offsets = attrList(inst, "offsets");
    if (!offsets && inst.inputs.size() != 1)
      fail("expects 1 input and 1 output without 'offsets', got " +
           std::to_string(inst.inputs.size()) + " and " + std::to_string(inst.outputs.size()));
    if (offsets && offsets->size() != inst.inputs.size())
      fail("expects k >= 1 param inputs, 1 output and k offsets, got " +
           std::to_string(inst.inputs.size()) + " inputs, " +
           std::to_string(inst.outputs.size()) + " outputs and " +
           std::to_string(offsets->size()) + " offsets");
    const Buffer &full = buffer(inst.outputs[0]);
    if (full.param) fail("output '" + full.name + "' must not be a param buffer");
    const bool convert = attrIntOr(inst, "convert", 0) != 0;
    std::vector<AllGatherPart> parts;
    std::vector<std::pair<KTensor, KTensor>> conversions;  // shard -> its own block
    std::vector<std::pair<int64_t, int64_t>> ranges;  // [begin, end) in full
    for (size_t i = 0; i < inst.inputs.size(); ++i) {
      const Buffer &shard = buffer(inst.inputs[i]);
      if (!shard.param) fail("input '" + shard.name + "' is not a param buffer");
      const Param &p = plan_.params[*shard.param];
      if (!p.sharded()) fail("param '" + p.name + "' is replicated, there is nothing to gather");
      const int64_t needed = p.gatheredBytes(comm_.worldSize(), convert ? full.dtype : p.dtype);
      const int64_t offset = offsets ? (*offsets)[i] : 0;
      const bool converts = convert && full.dtype != p.dtype;
      if (!convert && !offsets && full.dtype != p.dtype)
        fail("output '" + full.name + "' is " + dtypeName(full.dtype) + " but param '" + p.name +
             "' is " + dtypeName(p.dtype) + " (set convert = 1 to convert it)");
      if (converts && (full.dtype == DType::I64 || p.dtype == DType::I64))
        fail("output '" + full.name + "' is " + dtypeName(full.dtype) + " but param '" + p.name +
             "' is " + dtypeName(p.dtype) + " (only floats are converted as gathered)");
      if (offset < 0 || offset > full.bytes || full.bytes - offset < needed)
        fail("output '" + full.name + "' has " + std::to_string(full.bytes) +
             " bytes, the gather of '" + p.name + "' at byte offset " + std::to_string(offset) +
             " needs " + std::to_string(needed));
      ranges.push_back({offset, offset + needed});
      if (!converts) {
        parts.push_back(
            {data(shard.id), static_cast<size_t>(p.localBytes()), data(full.id) + offset});
        continue;
      }
      const int64_t elements = numElements(p.localShape());
      const int64_t blockBytes = elements * dtypeSize(full.dtype);
      std::byte *own = data(full.id) + offset + comm_.rank() * blockBytes;
      conversions.push_back(
          {KTensor{p.dtype, {elements}, data(shard.id)}, KTensor{full.dtype, {elements}, own}});
      parts.push_back({own, static_cast<size_t>(blockBytes), data(full.id) + offset});
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
      if (ranges[i].first < ranges[i - 1].second)
        fail("the gathered blocks at byte offsets " + std::to_string(ranges[i - 1].first) +
             " and " + std::to_string(ranges[i].first) + " of '" + full.name + "' overlap");
    // Written only once every block is known to fit without overlap.
    for (const auto &[shardRows, ownBlock] : conversions) backend_.cast(shardRows, ownBlock);
    backend_.beforeCollective(comm_);
    if (comm_.defersGathers()) {
      // In flight until an instruction touches its buffers (or the end).
      comm_.startAllGatherMany(parts);
      for (int32_t id : inst.inputs) inFlight_.push_back(baseOf(id));
      inFlight_.push_back(baseOf(inst.outputs[0]));
    } else if (parts.size() == 1 && !offsets) {
      comm_.allGather(parts[0].send, parts[0].bytesPerRank, parts[0].recv);
    } else {
      comm_.allGatherMany(parts);
    }
  }

  /// The buffer whose memory `id` is (an alias's base, else itself).
  int32_t baseOf(int32_t id) const {
    while (buffer(id).aliasOf) id = *buffer(id).aliasOf;
    return id;
  }

  bool touchesGathersInFlight(const Instruction &inst) const {
    auto inFlight = [&](int32_t id) {
      return std::find(inFlight_.begin(), inFlight_.end(), baseOf(id)) != inFlight_.end();
    };
    return std::any_of(inst.inputs.begin(), inst.inputs.end(), inFlight) ||
           std::any_of(inst.outputs.begin(), inst.outputs.end(), inFlight);
  }

  void awaitGathers() {
    if (inFlight_.empty()) return;
    inFlight_.clear();
    comm_.waitGathers();
  }

  void abandonGathers() noexcept {
    if (inFlight_.empty()) return;
    inFlight_.clear();
    try {
      comm_.waitGathers();
    } catch (...) {
      // The first error is the one reported.
    }
  }

  /// The full gradient reduced into this rank's rows (runtime/Optimizers.h):
  /// the output is the param's chunk, the input its full shape.
  void checkSchedule(double lr, int64_t warmupSteps, int64_t decaySteps, double minLr) {
    if (warmupSteps < 0 || decaySteps < 0 || !(minLr >= 0 && minLr <= lr))
      fail("the schedule needs warmup_steps and decay_steps >= 0 and 0 <= min_lr <= lr");
  }

  /// An optimizer step's last input, the gradients' norm, when it clips
  /// (max_grad_norm > 0); its other inputs number `others` at least.
  KTensor clipNormInput(const Instruction &inst, double maxGradNorm, size_t others) {
    if (maxGradNorm < 0) fail("max_grad_norm must not be negative");
    if (maxGradNorm == 0) return KTensor{};
    if (inst.inputs.size() <= others)
      fail("max_grad_norm > 0 needs the gradients' norm (grad_norm's output) as the last input");
    return tensor(inst.inputs.back());
  }

  /// grad_norm: every input is a computed gradient; `whole` lists those
  /// every rank holds entire (replicated parameters' gradients).
  void gradNorm(const Instruction &inst) {
    std::vector<KTensor> grads;
    std::vector<bool> whole(inst.inputs.size(), false);
    for (int32_t id : inst.inputs) grads.push_back(tensor(id));
    if (const std::vector<int64_t> *listed = attrList(inst, "whole"))
      for (int64_t i : *listed) {
        if (i < 0 || i >= static_cast<int64_t>(whole.size()))
          fail("whole lists input " + std::to_string(i) + " of " + std::to_string(whole.size()));
        whole[static_cast<size_t>(i)] = true;
      }
    backend_.beforeCollective(comm_);
    backend_.gradNorm(comm_, grads, whole, tensor(inst.outputs[0]));
  }

  void reduceScatter(const Instruction &inst) {
    const Buffer &full = buffer(inst.inputs[0]), &shard = buffer(inst.outputs[0]);
    if (full.param || shard.param)
      fail("reduces a computed gradient into a fresh buffer, not a param's storage");
    if (!widensExactly(full.dtype, shard.dtype) || full.shape.empty() ||
        shard.shape.size() != full.shape.size() ||
        !std::equal(full.shape.begin() + 1, full.shape.end(), shard.shape.begin() + 1) ||
        shard.shape[0] * comm_.worldSize() < full.shape[0])
      fail("output '" + shard.name + "' (" + dtypeName(shard.dtype) + " " +
           shapeToString(shard.shape) + ") is not a dim-0 chunk of '" + full.name + "' (" +
           dtypeName(full.dtype) + " " + shapeToString(full.shape) + ") on " +
           std::to_string(comm_.worldSize()) + " ranks");
    DeviceBuffer work = workspace(inst, shard);
    backend_.beforeCollective(comm_);
    backend_.reduceScatter(comm_, tensor(inst.inputs[0]), tensor(inst.outputs[0]), work.data(),
                           /*mean=*/attrIntOr(inst, "sum", 0) == 0);
  }

  void scatter(const Instruction &inst) {
    const Buffer &full = buffer(inst.inputs[0]), &target = buffer(inst.outputs[0]);
    if (!target.param) fail("output '" + target.name + "' is not a param buffer");
    const Param &p = plan_.params[*target.param];
    if (!p.sharded())
      fail("param '" + p.name + "' is replicated; scatter needs a sharded param");
    if (full.param) fail("input '" + full.name + "' must not be a param buffer");
    if (full.dtype != p.dtype || full.shape != p.shape)
      fail("input '" + full.name + "' is " + dtypeName(full.dtype) + " " +
           shapeToString(full.shape) + " but param '" + p.name + "' is " + dtypeName(p.dtype) +
           " " + shapeToString(p.shape));
    const int64_t needed = p.gatheredBytes(comm_.worldSize());
    if (full.bytes < needed)
      fail("input '" + full.name + "' has " + std::to_string(full.bytes) +
           " bytes; a scatter source holds world_size * chunk_rows padded rows of '" + p.name +
           "' (" + std::to_string(needed) + " bytes, as an all_gather target)");
    const int64_t root = attrInt(inst, "root");
    if (root < 0 || root >= comm_.worldSize())
      fail("root " + std::to_string(root) + " out of range for world size " +
           std::to_string(comm_.worldSize()));
    // Only root holds the full tensor; the others never touch that buffer,
    // unless they computed it themselves: a --ranks run standing in for an
    // absent owner (runtime/RankSubset.h) passes its own copy.
    const std::byte *send =
        state_.rank() == root || allocated(full.id) ? data(full.id) : nullptr;
    const Region r = region(target.id);
    backend_.beforeCollective(comm_);
    comm_.scatter(root, send, static_cast<size_t>(p.localBytes()), r.data);
    zeroPadding(r);  // root's padding rows were never written
  }

  const Plan &plan_;
  const Function &function_;
  Backend &backend_;
  Device &device_;
  Communicator &comm_;
  RankState &state_;
  uint64_t seed_;
  std::vector<DeviceBuffer> owned_;  // non-param buffers, by id
  /// Bases of the buffers of all-gathers left in flight (defersGathers()):
  /// the collective's until awaitGathers().
  std::vector<int32_t> inFlight_;
  size_t index_ = 0;
  // Checkpoints opened by `load`, by path, for this function's duration.
  std::map<std::string, std::shared_ptr<checkpoint::Checkpoint>> checkpoints_;
};

std::vector<TensorView> runFunction(const Plan &plan, const std::string &name, Backend &backend,
                                    Communicator &comm, RankState &state,
                                    const std::vector<HostTensor> &inputs, uint64_t seed,
                                    const char *entry) {
  const Function *function = plan.function(name);
  if (!function) throw RuntimeError(std::string(entry) + ": plan has no function '" + name + "'");
  if (comm.worldSize() != plan.worldSize)
    throw RuntimeError(std::string(entry) + "('" + name + "'): communicator has " +
                       std::to_string(comm.worldSize()) + " ranks, the plan was built for " +
                       std::to_string(plan.worldSize));
  if (comm.rank() != state.rank())
    throw RuntimeError(std::string(entry) + "('" + name + "'): communicator rank " +
                       std::to_string(comm.rank()) + " != rank state " +
                       std::to_string(state.rank()));
  checkPlan(plan);  // ids in range etc.: a bad plan must not crash the executor
  backend.device().beginFunction(function);
  FunctionRun run(plan, *function, backend, comm, state, seed);
  run.bindInputs(inputs);
  run.run();
  return run.finish();
}

}  // namespace shardc::runtime
