#include "runtime/Executor.h"

#include "runtime/ForwardKernels.h"
#include "runtime/InitOps.h"
#include "runtime/Kernels.h"
#include "runtime/Philox.h"
#include "runtime/PlanCheck.h"
#include "runtime/RuntimeError.h"
#include "runtime/checkpoint/ShardReader.h"
#include "runtime/init/Generators.h"
#include "runtime/init/ParallelFor.h"
#include "runtime/init/Pointwise.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>
#include <type_traits>

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
              Communicator &comm, RankState &state, const ExecutionContext &context)
      : plan_(plan), function_(function), device_(device), comm_(comm), state_(state),
        context_(context), owned_(function.buffers.size()) {}

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
      if (!executesOn(inst, state_.rank())) continue;  // another rank's work
      try {
        if (inst.op == "alloc") alloc(inst);
        else if (inst.op == "free") free(inst);
        else if (inst.op == "fill") fill(inst);
        else if (auto op = binaryOp(inst.op)) binary(inst, *op);
        else if (forwardOp(inst)) {}
        else if (inst.op == "all_gather") allGather(inst);
        else if (inst.op == "generate") generate(inst);
        else if (auto kind = pointwiseKind(inst.op)) pointwise(inst, *kind);
        else if (inst.op == "scatter") scatter(inst);
        else if (inst.op == "orthogonal") orthogonal(inst);
        else if (inst.op == "load") load(inst);
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

  void expectOperands(const Instruction &inst, size_t inputs, size_t outputs) const {
    if (inst.inputs.size() != inputs || inst.outputs.size() != outputs)
      fail("expects " + std::to_string(inputs) + " inputs and " + std::to_string(outputs) +
           " outputs, got " + std::to_string(inst.inputs.size()) + " and " +
           std::to_string(inst.outputs.size()));
  }

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

  void alloc(const Instruction &inst) {
    expectOperands(inst, 0, 1);
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
    expectOperands(inst, 1, 0);
    const Buffer &b = buffer(inst.inputs[0]);
    if (b.param) fail("param buffer '" + b.name + "' must not be freed");
    if (b.aliasOf) fail("alias '" + b.name + "' is never freed (its base is)");
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

  /// all_gather, single form: inputs=[param buf], outputs=[full]; FSDP-unit
  /// form (attr `offsets`): inputs=[p1..pk], outputs=[unit], param i's
  /// gathered block (Param::gatheredBytes) at byte offsets[i] of the unit.
  void allGather(const Instruction &inst) {
    const std::vector<int64_t> *offsets = attrList(inst, "offsets");
    if (!offsets) expectOperands(inst, 1, 1);
    else if (inst.outputs.size() != 1 || inst.inputs.empty() ||
             offsets->size() != inst.inputs.size())
      fail("expects k >= 1 param inputs, 1 output and k offsets, got " +
           std::to_string(inst.inputs.size()) + " inputs, " +
           std::to_string(inst.outputs.size()) + " outputs and " +
           std::to_string(offsets->size()) + " offsets");
    const Buffer &full = buffer(inst.outputs[0]);
    if (full.param) fail("output '" + full.name + "' must not be a param buffer");
    std::vector<AllGatherPart> parts;
    std::vector<std::pair<int64_t, int64_t>> ranges;  // [begin, end) in full
    for (size_t i = 0; i < inst.inputs.size(); ++i) {
      const Buffer &shard = buffer(inst.inputs[i]);
      if (!shard.param) fail("input '" + shard.name + "' is not a param buffer");
      const Param &p = plan_.params[*shard.param];
      if (!p.sharded()) fail("param '" + p.name + "' is replicated, there is nothing to gather");
      const int64_t needed = p.gatheredBytes(comm_.worldSize());
      const int64_t offset = offsets ? (*offsets)[i] : 0;
      if (!offsets && full.dtype != p.dtype)
        fail("output '" + full.name + "' is " + dtypeName(full.dtype) + " but param '" + p.name +
             "' is " + dtypeName(p.dtype));
      if (offset < 0 || offset > full.bytes || full.bytes - offset < needed)
        fail("output '" + full.name + "' has " + std::to_string(full.bytes) +
             " bytes, the gather of '" + p.name + "' at byte offset " + std::to_string(offset) +
             " needs " + std::to_string(needed));
      ranges.push_back({offset, offset + needed});
      parts.push_back({data(shard.id), static_cast<size_t>(p.localBytes()), data(full.id) + offset});
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
      if (ranges[i].first < ranges[i - 1].second)
        fail("the gathered blocks at byte offsets " + std::to_string(ranges[i - 1].first) +
             " and " + std::to_string(ranges[i].first) + " of '" + full.name + "' overlap");
    if (parts.size() == 1 && !offsets)
      comm_.allGather(parts[0].send, parts[0].bytesPerRank, parts[0].recv);
    else
      comm_.allGatherMany(parts);
  }

  // ------------------------------------------------------------- forward --

  KTensor tensor(int32_t id) const {
    const Buffer &b = buffer(id);
    return {b.dtype, b.shape, data(id)};
  }

  static std::optional<BinaryOp> binaryOp(const std::string &op) {
    if (op == "add") return BinaryOp::Add;
    if (op == "sub") return BinaryOp::Sub;
    if (op == "mul") return BinaryOp::Mul;
    if (op == "div") return BinaryOp::Div;
    return std::nullopt;
  }

  void binary(const Instruction &inst, BinaryOp op) {
    expectOperands(inst, 2, 1);
    binaryKernel(op, tensor(inst.inputs[0]), tensor(inst.inputs[1]), tensor(inst.outputs[0]),
                 context_.threads);
  }

  void expectInputs(const Instruction &inst, size_t min, size_t max) const {
    if (inst.inputs.size() < min || inst.inputs.size() > max || inst.outputs.size() != 1)
      fail("expects " + std::to_string(min) + (min == max ? "" : ".." + std::to_string(max)) +
           " inputs and 1 output, got " + std::to_string(inst.inputs.size()) + " and " +
           std::to_string(inst.outputs.size()));
  }

  /// Runs a forward op; false when `inst.op` is not one.
  bool forwardOp(const Instruction &inst) {
    const std::string &op = inst.op;
    const int threads = context_.threads;
    if (op == "embedding") {
      expectOperands(inst, 2, 1);
      embeddingKernel(tensor(inst.inputs[0]), tensor(inst.inputs[1]), tensor(inst.outputs[0]));
    } else if (op == "linear") {
      expectInputs(inst, 2, 3);
      KTensor bias = inst.inputs.size() == 3 ? tensor(inst.inputs[2]) : KTensor{};
      linearKernel(tensor(inst.inputs[0]), tensor(inst.inputs[1]),
                   inst.inputs.size() == 3 ? &bias : nullptr, tensor(inst.outputs[0]), threads);
    } else if (op == "matmul") {
      expectOperands(inst, 2, 1);
      matmulKernel(tensor(inst.inputs[0]), tensor(inst.inputs[1]), tensor(inst.outputs[0]),
                   threads);
    } else if (op == "gelu" || op == "silu" || op == "relu") {
      expectOperands(inst, 1, 1);
      Activation kind = op == "silu" ? Activation::Silu : Activation::Relu;
      if (op == "gelu") {
        const std::string approximate = attrStringOr(inst, "approximate", "none");
        if (approximate == "none") kind = Activation::GeluErf;
        else if (approximate == "tanh") kind = Activation::GeluTanh;
        else fail("approximate must be \"none\" or \"tanh\", got \"" + approximate + "\"");
      }
      activationKernel(kind, tensor(inst.inputs[0]), tensor(inst.outputs[0]), threads);
    } else if (op == "layer_norm") {
      expectInputs(inst, 1, 3);
      KTensor w = inst.inputs.size() > 1 ? tensor(inst.inputs[1]) : KTensor{};
      KTensor b = inst.inputs.size() > 2 ? tensor(inst.inputs[2]) : KTensor{};
      layerNormKernel(tensor(inst.inputs[0]), inst.inputs.size() > 1 ? &w : nullptr,
                      inst.inputs.size() > 2 ? &b : nullptr, attrDouble(inst, "eps"),
                      tensor(inst.outputs[0]), threads);
    } else if (op == "rms_norm") {
      expectInputs(inst, 1, 2);
      KTensor w = inst.inputs.size() > 1 ? tensor(inst.inputs[1]) : KTensor{};
      rmsNormKernel(tensor(inst.inputs[0]), inst.inputs.size() > 1 ? &w : nullptr,
                    attrDouble(inst, "eps"), tensor(inst.outputs[0]), threads);
    } else if (op == "softmax") {
      expectOperands(inst, 1, 1);
      softmaxKernel(tensor(inst.inputs[0]), attrInt(inst, "dim"), tensor(inst.outputs[0]),
                    threads);
    } else if (op == "sdpa") {
      expectOperands(inst, 3, 1);
      const KTensor q = tensor(inst.inputs[0]);
      const int64_t causal = attrIntOr(inst, "causal", 0);
      if (causal != 0 && causal != 1) fail("causal must be 0 or 1, got " + std::to_string(causal));
      const double defaultScale =
          q.shape.size() == 4 && q.shape[3] > 0 ? 1.0 / std::sqrt(double(q.shape[3])) : 1.0;
      sdpaKernel(q, tensor(inst.inputs[1]), tensor(inst.inputs[2]), tensor(inst.outputs[0]),
                 causal == 1, attrDoubleOr(inst, "scale", defaultScale), threads);
    } else if (op == "rope") {
      expectOperands(inst, 1, 1);
      ropeKernel(tensor(inst.inputs[0]), attrDoubleOr(inst, "theta", 10000.0),
                 tensor(inst.outputs[0]), threads);
    } else if (op == "strided_copy") {
      expectOperands(inst, 1, 1);
      const std::vector<int64_t> *strides = attrList(inst, "strides");
      if (!strides) fail("needs an integer list attribute 'strides'");
      stridedCopyKernel(tensor(inst.inputs[0]), *strides, attrIntOr(inst, "offset", 0),
                        tensor(inst.outputs[0]));
    } else if (op == "cat") {
      expectInputs(inst, 1, std::numeric_limits<size_t>::max());
      std::vector<KTensor> inputs;
      for (int32_t id : inst.inputs) inputs.push_back(tensor(id));
      catKernel(inputs, attrInt(inst, "dim"), tensor(inst.outputs[0]));
    } else if (op == "cross_entropy") {
      expectOperands(inst, 2, 1);
      crossEntropyKernel(tensor(inst.inputs[0]), tensor(inst.inputs[1]),
                         attrIntOr(inst, "ignore_index", -100), tensor(inst.outputs[0]));
    } else {
      return false;
    }
    return true;
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
    spec.seed = context_.seed;
    spec.streamHash = philox::fnv1a32(stream.data(), stream.size());
    spec.position = static_cast<uint32_t>(position);
  }

  /// The part of a buffer this rank computes: for a sharded param, the valid
  /// rows of its shard (full flat elements [begin, begin + count)); else the
  /// whole tensor. `localElements` includes padding rows.
  struct Region {
    std::byte *data = nullptr;
    DType dtype = DType::F32;
    std::vector<int64_t> fullShape;
    int64_t begin = 0, count = 0, localElements = 0;
  };
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
    std::memset(r.data + r.count * size, 0,
                static_cast<size_t>((r.localElements - r.count) * size));
  }

  // -------------------------------------------------------------- generate --

  void generate(const Instruction &inst) {
    expectOperands(inst, 0, 1);
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
      init::generateRange(spec, r.dtype, r.begin, r.count, r.data, context_.threads);
    } else {
      if (!encoding && sourceShape.size() != r.fullShape.size())
        fail("source_shape " + shapeToString(sourceShape) + " has another rank than the output " +
             shapeToString(r.fullShape) + " and there is no index_map");
      IndexMap map = encoding ? IndexMap::parse(*encoding, r.fullShape.size(), sourceShape.size())
                              : IndexMap::identity(r.fullShape.size());
      // Parts of the range on context_.threads threads, each in blocks of
      // source indices on its stack. The lowest failing part's error wins,
      // so messages do not depend on the thread count.
      const int parts = r.count >= (int64_t(1) << 16) ? context_.threads : 1;
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
            init::generateAt(spec, r.dtype, indices, n, r.data + at * elementSize);
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

  // ------------------------------------------------------------- pointwise --

  static std::optional<init::PointwiseKind> pointwiseKind(const std::string &op) {
    using K = init::PointwiseKind;
    if (op == "mul_scalar") return K::Mul;
    if (op == "add_scalar") return K::Add;
    if (op == "sub_scalar") return K::Sub;
    if (op == "div_scalar") return K::Div;
    if (op == "clamp") return K::Clamp;
    if (op == "erfinv") return K::Erfinv;
    if (op == "sqrt") return K::Sqrt;
    if (op == "neg") return K::Neg;
    return std::nullopt;
  }

  void pointwise(const Instruction &inst, init::PointwiseKind kind) {
    expectOperands(inst, 1, 1);
    if (inst.inputs[0] != inst.outputs[0])
      fail("works in place: input '" + buffer(inst.inputs[0]).name + "' and output '" +
           buffer(inst.outputs[0]).name + "' must be the same buffer");
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
    init::applyPointwise(kind, a, b, r.dtype, r.data, r.count, context_.threads);
  }

  // --------------------------------------------------------------- scatter --

  void scatter(const Instruction &inst) {
    expectOperands(inst, 1, 1);
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
    comm_.scatter(root, send, static_cast<size_t>(p.localBytes()), r.data);
    zeroPadding(r);  // root's padding rows were never written
  }

  // ------------------------------------------------------------ orthogonal --

  void orthogonal(const Instruction &inst) {
    expectOperands(inst, 0, 1);
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
    const int64_t workBytes = orthogonalWorkBytes(b.shape, b.dtype);
    if (workBytes < 0) fail("'" + b.name + "' is too large for orthogonal's working matrix");
    std::byte *out = data(b.id);
    const int64_t rows = b.shape[0];
    int64_t cols = 1;
    for (size_t d = 1; d < b.shape.size(); ++d) cols *= b.shape[d];
    // Working memory goes through the device (MemoryModel mirrors it).
    DeviceBuffer work = device_.allocate(workBytes, Category::Activation, b.name + ".qr");
    if (rows == 0 || cols == 0) return;
    // torch: flattened = new(rows, cols).normal_(0, 1), in the tensor's dtype.
    spec.shape = {rows, cols};
    init::validateGeneratorSpec(spec);
    init::generateRange(spec, b.dtype, 0, rows * cols, out, context_.threads);
    // torch factors flattened (rows >= cols) or its transpose. The row-major
    // rows x cols buffer read with strides (1, cols) *is* the transpose, so
    // the QR runs in place either way, with no transposed copy.
    const bool transposed = rows < cols;
    const int64_t m = transposed ? cols : rows, n = transposed ? rows : cols;
    const int64_t rowStride = transposed ? 1 : cols, colStride = transposed ? cols : 1;
    double *scalars = reinterpret_cast<double *>(work.data());
    const int64_t count = rows * cols;
    auto factor = [&](auto *q) {
      householderSignedQ(q, m, n, rowStride, colStride, scalars);
      using T = std::remove_pointer_t<decltype(q)>;
      for (int64_t i = 0; i < count; ++i) q[i] = static_cast<T>(gain * q[i]);
    };
    if (b.dtype == DType::F32) {
      factor(reinterpret_cast<float *>(out));
    } else if (b.dtype == DType::F64) {
      factor(reinterpret_cast<double *>(out));
    } else {  // half types: a float32 copy of the matrix after the scalars
      float *q = reinterpret_cast<float *>(scalars + 3 * n);
      for (int64_t i = 0; i < count; ++i) q[i] = static_cast<float>(loadAsDouble(b.dtype, out, i));
      householderSignedQ(q, m, n, rowStride, colStride, scalars);
      for (int64_t i = 0; i < count; ++i) storeFromDouble(b.dtype, out, i, gain * q[i]);
    }
  }

  // ------------------------------------------------------------------ load --

  /// This rank's valid rows of a checkpoint tensor into a param's storage,
  /// read with pread (converted through the io buffer, inputs[0], when the
  /// file's dtype differs); padding rows zero (docs/checkpoints.md).
  void load(const Instruction &inst) {
    expectOperands(inst, 1, 1);
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
    checkpoint::readElements(*where.file, *where.entry, r.begin, r.count, r.dtype, r.data,
                             data(io.id), io.bytes, context_.threads);
    zeroPadding(r);
  }

  const Plan &plan_;
  const Function &function_;
  CpuDevice &device_;
  Communicator &comm_;
  RankState &state_;
  const ExecutionContext &context_;
  std::vector<DeviceBuffer> owned_;  // non-param buffers, by id
  size_t index_ = 0;
  // Checkpoints opened by `load`, by path, for this function's duration.
  std::map<std::string, std::shared_ptr<checkpoint::Checkpoint>> checkpoints_;
};

int defaultKernelThreads(int64_t worldSize) {
  const int64_t cores = std::thread::hardware_concurrency();
  return static_cast<int>(std::max<int64_t>(1, cores / std::max<int64_t>(1, worldSize)));
}

std::vector<TensorView> executeFunction(const Plan &plan, const std::string &name,
                                        CpuDevice &device, Communicator &comm,
                                        RankState &state,
                                        const std::vector<HostTensor> &inputs,
                                        const ExecutionContext &context) {
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
  if (context.threads < 1)
    throw RuntimeError("executeFunction('" + name + "'): kernel threads must be >= 1, got " +
                       std::to_string(context.threads));
  FunctionRun run(plan, *function, device, comm, state, context);
  run.bindInputs(inputs);
  run.run();
  return run.finish();
}

}  // namespace shardc::runtime
