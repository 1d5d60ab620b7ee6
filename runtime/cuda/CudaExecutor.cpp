#include "runtime/cuda/CudaExecutor.h"

#include "runtime/ForwardKernels.h"
#include "runtime/InitOps.h"
#include "runtime/Kernels.h"
#include "runtime/Philox.h"
#include "runtime/PlanCheck.h"
#include "runtime/RuntimeError.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/CudaForward.h"
#include "runtime/cuda/CudaInit.h"
#include "runtime/cuda/NcclCommunicator.h"
#include "runtime/init/Generators.h"
#include "runtime/init/Pointwise.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

namespace shardc::runtime::cuda {
using namespace shardc::plan;

const CudaBuffer *CudaRankState::paramStorage(int32_t index) const {
  auto it = params_.find(index);
  return it == params_.end() ? nullptr : &it->second;
}

void SingleGpuCommunicator::allGather(const void *send, size_t bytesPerRank, void *recv) {
  if (bytesPerRank == 0) return;
  device_.makeCurrent();
  checkCuda(cudaMemcpyAsync(recv, send, bytesPerRank, cudaMemcpyDeviceToDevice, device_.stream()),
            "all_gather (one GPU): cudaMemcpyAsync");
}

void SingleGpuCommunicator::scatter(int64_t root, const void *send, size_t bytesPerRank,
                                    void *recv) {
  if (root != 0)
    throw RuntimeError("scatter (one GPU): root " + std::to_string(root) +
                       " out of range for world size 1");
  allGather(send, bytesPerRank, recv);
}

void SingleGpuCommunicator::barrier() { device_.synchronize("barrier (one GPU)"); }

class CudaFunctionRun {
public:
  CudaFunctionRun(const Plan &plan, const Function &function, CudaDevice &device,
                  Communicator &comm, CudaRankState &state, const ExecutionContext &context)
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
      std::string place = "function '" + function_.name + "' input " + std::to_string(i) + " '" +
                          b.name + "'";
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
      copyToDevice(device_, owned_[b.id].data(), t.data.data(), t.data.size());
      zeroBytes(device_, owned_[b.id].data() + t.data.size(),
                b.bytes - static_cast<int64_t>(t.data.size()));
    }
  }

  void run() {
    for (index_ = 0; index_ < function_.body.size(); ++index_) {
      const Instruction &inst = function_.body[index_];
      if (!executesOn(inst, state_.rank())) continue;
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
        else if (inst.op == "orthogonal" || inst.op == "cross_entropy")
          fail("'" + inst.op + "' is not implemented on the CUDA device yet (docs/gpu.md)");
        else fail("unknown opcode '" + inst.op + "'");
      } catch (const RuntimeError &e) {
        std::string message = e.what();
        std::string place = instructionPlace(function_, index_);
        if (message.rfind(place, 0) == 0) throw;
        throw RuntimeError(place + ": " + message);
      }
    }
    device_.synchronize("function '" + function_.name + "'");
  }

  std::vector<HostTensor> finish() {
    std::vector<HostTensor> out;
    for (int32_t id : function_.outputs) {
      const Buffer &b = function_.buffers[id];
      if (!b.param && !b.aliasOf && !owned_[id])
        throw RuntimeError("function '" + function_.name + "' output '" + b.name +
                           "' is not allocated at the end of the function");
      HostTensor t{b.name, b.dtype, b.shape, {}};
      t.data.resize(static_cast<size_t>(t.expectedBytes()));
      copyToHost(device_, t.data.data(), data(id), t.data.size());
      out.push_back(std::move(t));
    }
    for (CudaBuffer &buffer : owned_)
      if (buffer) state_.retained_.push_back(std::move(buffer));
    return out;
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
  void expectInputs(const Instruction &inst, size_t min, size_t max) const {
    if (inst.inputs.size() < min || inst.inputs.size() > max || inst.outputs.size() != 1)
      fail("expects " + std::to_string(min) + (min == max ? "" : ".." + std::to_string(max)) +
           " inputs and 1 output, got " + std::to_string(inst.inputs.size()) + " and " +
           std::to_string(inst.outputs.size()));
  }
  const Buffer &buffer(int32_t id) const { return function_.buffers[id]; }

  std::byte *data(int32_t id) const {
    const Buffer &b = buffer(id);
    if (b.aliasOf) return data(*b.aliasOf) + b.byteOffset;
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

  // ---- attributes (the CPU executor's rules) ----
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
  const std::vector<int64_t> *attrList(const Instruction &inst, const char *name) const {
    const AttrValue *value = attr(inst, name);
    if (!value) return nullptr;
    if (!std::holds_alternative<std::vector<int64_t>>(*value))
      fail(std::string("attribute '") + name + "' must be an integer list");
    return &std::get<std::vector<int64_t>>(*value);
  }

  // ---- memory ----
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
    const double value = attrDouble(inst, "value");
    const Buffer &b = buffer(inst.outputs[0]);
    std::byte *out = data(b.id);
    if (b.param) {
      const Param &p = plan_.params[*b.param];
      const int64_t localElements = numElements(p.localShape());
      if (p.sharded())
        shardedFill(device_, p.dtype, out, localElements, p.validRows(state_.rank()),
                    p.rowElements(), value);
      else
        cuda::fill(device_, p.dtype, out, localElements, value);
      return;
    }
    cuda::fill(device_, b.dtype, out, numElements(b.shape), value);
  }

  // ---- collectives ----
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
    std::vector<std::pair<int64_t, int64_t>> ranges;
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
    prepareCollective();
    if (parts.size() == 1 && !offsets)
      comm_.allGather(parts[0].send, parts[0].bytesPerRank, parts[0].recv);
    else
      comm_.allGatherMany(parts);
  }

  /// NCCL waits for the compute stream by itself (setComputeStream); any
  /// other communicator gets a synchronized device.
  void prepareCollective() {
    if (auto *nccl = dynamic_cast<NcclCommunicator *>(&comm_)) nccl->setComputeStream(device_.stream());
    else if (!dynamic_cast<SingleGpuCommunicator *>(&comm_)) device_.synchronize("before a collective");
  }

  void scatter(const Instruction &inst) {
    expectOperands(inst, 1, 1);
    const Buffer &full = buffer(inst.inputs[0]), &target = buffer(inst.outputs[0]);
    if (!target.param) fail("output '" + target.name + "' is not a param buffer");
    const Param &p = plan_.params[*target.param];
    if (!p.sharded()) fail("param '" + p.name + "' is replicated; scatter needs a sharded param");
    if (full.param) fail("input '" + full.name + "' must not be a param buffer");
    if (full.dtype != p.dtype || full.shape != p.shape)
      fail("input '" + full.name + "' is " + dtypeName(full.dtype) + " " +
           shapeToString(full.shape) + " but param '" + p.name + "' is " + dtypeName(p.dtype) +
           " " + shapeToString(p.shape));
    const int64_t needed = p.gatheredBytes(comm_.worldSize());
    if (full.bytes < needed)
      fail("input '" + full.name + "' has " + std::to_string(full.bytes) +
           " bytes; a scatter source holds world_size * chunk_rows padded rows of '" + p.name +
           "' (" + std::to_string(needed) + " bytes)");
    const int64_t root = attrInt(inst, "root");
    if (root < 0 || root >= comm_.worldSize())
      fail("root " + std::to_string(root) + " out of range for world size " +
           std::to_string(comm_.worldSize()));
    const std::byte *send = state_.rank() == root ? data(full.id) : nullptr;
    const Region r = region(target.id);
    prepareCollective();
    comm_.scatter(root, send, static_cast<size_t>(p.localBytes()), r.data);
    zeroPadding(r);
  }

  // ---- init ----
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
  void zeroPadding(const Region &r) {
    const int64_t size = dtypeSize(r.dtype);
    zeroBytes(device_, r.data + r.count * size, (r.localElements - r.count) * size);
  }

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
    const std::string &stream = attrString(inst, "stream");
    const int64_t position = attrInt(inst, "position");
    if (position < 0 || position > std::numeric_limits<uint32_t>::max())
      fail("position " + std::to_string(position) + " is out of range [0, 2^32)");
    spec.seed = context_.seed;
    spec.streamHash = philox::fnv1a32(stream.data(), stream.size());
    spec.position = static_cast<uint32_t>(position);

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
    if (!encoding && sourceShape == r.fullShape) {
      generateRange(device_, spec, r.dtype, r.begin, r.count, r.data);
    } else {
      if (!encoding && sourceShape.size() != r.fullShape.size())
        fail("source_shape " + shapeToString(sourceShape) + " has another rank than the output " +
             shapeToString(r.fullShape) + " and there is no index_map");
      IndexMap map = encoding ? IndexMap::parse(*encoding, r.fullShape.size(), sourceShape.size())
                              : IndexMap::identity(r.fullShape.size());
      constexpr int64_t kBlock = 4096;
      std::vector<int64_t> indices(kBlock), p;
      const int64_t sourceElements = numElements(sourceShape);
      auto *deviceIndices = static_cast<int64_t *>(device_.scratch(kBlock * sizeof(int64_t)));
      const int64_t size = dtypeSize(r.dtype);
      for (int64_t done = 0; done < r.count; done += kBlock) {
        const int64_t n = std::min(kBlock, r.count - done);
        mapFlatIndices(map, r.fullShape, sourceShape, r.begin + done, n, indices.data(), p,
                       done == 0);
        for (int64_t k = 0; k < n; ++k)
          if (indices[k] < 0 || indices[k] >= sourceElements)
            fail("index " + std::to_string(indices[k]) + " is outside the tensor's " +
                 std::to_string(sourceElements) + " elements");
        copyToDevice(device_, deviceIndices, indices.data(), static_cast<size_t>(n) * 8);
        generateAtDevice(device_, spec, r.dtype, deviceIndices, n, r.data + done * size);
      }
    }
    zeroPadding(r);
  }

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
    applyPointwise(device_, kind, a, b, r.dtype, r.data, r.count);
  }

  // ---- forward ----
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
    cuda::binary(device_, op, tensor(inst.inputs[0]), tensor(inst.inputs[1]),
                 tensor(inst.outputs[0]));
  }

  bool forwardOp(const Instruction &inst) {
    const std::string &op = inst.op;
    if (op == "embedding") {
      expectOperands(inst, 2, 1);
      embedding(device_, tensor(inst.inputs[0]), tensor(inst.inputs[1]), tensor(inst.outputs[0]));
    } else if (op == "linear") {
      expectInputs(inst, 2, 3);
      KTensor bias = inst.inputs.size() == 3 ? tensor(inst.inputs[2]) : KTensor{};
      linear(device_, tensor(inst.inputs[0]), tensor(inst.inputs[1]),
             inst.inputs.size() == 3 ? &bias : nullptr, tensor(inst.outputs[0]));
    } else if (op == "matmul") {
      expectOperands(inst, 2, 1);
      matmul(device_, tensor(inst.inputs[0]), tensor(inst.inputs[1]), tensor(inst.outputs[0]));
    } else if (op == "gelu" || op == "silu" || op == "relu") {
      expectOperands(inst, 1, 1);
      Activation kind = op == "silu" ? Activation::Silu : Activation::Relu;
      if (op == "gelu") {
        const std::string approximate =
            attr(inst, "approximate") ? attrString(inst, "approximate") : "none";
        if (approximate == "none") kind = Activation::GeluErf;
        else if (approximate == "tanh") kind = Activation::GeluTanh;
        else fail("approximate must be \"none\" or \"tanh\", got \"" + approximate + "\"");
      }
      activation(device_, kind, tensor(inst.inputs[0]), tensor(inst.outputs[0]));
    } else if (op == "layer_norm") {
      expectInputs(inst, 1, 3);
      KTensor w = inst.inputs.size() > 1 ? tensor(inst.inputs[1]) : KTensor{};
      KTensor b = inst.inputs.size() > 2 ? tensor(inst.inputs[2]) : KTensor{};
      layerNorm(device_, tensor(inst.inputs[0]), inst.inputs.size() > 1 ? &w : nullptr,
                inst.inputs.size() > 2 ? &b : nullptr, attrDouble(inst, "eps"),
                tensor(inst.outputs[0]));
    } else if (op == "rms_norm") {
      expectInputs(inst, 1, 2);
      KTensor w = inst.inputs.size() > 1 ? tensor(inst.inputs[1]) : KTensor{};
      rmsNorm(device_, tensor(inst.inputs[0]), inst.inputs.size() > 1 ? &w : nullptr,
              attrDouble(inst, "eps"), tensor(inst.outputs[0]));
    } else if (op == "softmax") {
      expectOperands(inst, 1, 1);
      softmax(device_, tensor(inst.inputs[0]), attrInt(inst, "dim"), tensor(inst.outputs[0]));
    } else if (op == "sdpa") {
      expectOperands(inst, 3, 1);
      const KTensor q = tensor(inst.inputs[0]);
      const int64_t causal = attrIntOr(inst, "causal", 0);
      if (causal != 0 && causal != 1) fail("causal must be 0 or 1, got " + std::to_string(causal));
      const double defaultScale =
          q.shape.size() == 4 && q.shape[3] > 0 ? 1.0 / std::sqrt(double(q.shape[3])) : 1.0;
      sdpa(device_, q, tensor(inst.inputs[1]), tensor(inst.inputs[2]), tensor(inst.outputs[0]),
           causal == 1, attrDoubleOr(inst, "scale", defaultScale));
    } else if (op == "rope") {
      expectOperands(inst, 1, 1);
      rope(device_, tensor(inst.inputs[0]), attrDoubleOr(inst, "theta", 10000.0),
           tensor(inst.outputs[0]));
    } else if (op == "strided_copy") {
      expectOperands(inst, 1, 1);
      const std::vector<int64_t> *strides = attrList(inst, "strides");
      if (!strides) fail("needs an integer list attribute 'strides'");
      stridedCopy(device_, tensor(inst.inputs[0]), *strides, attrIntOr(inst, "offset", 0),
                  tensor(inst.outputs[0]));
    } else if (op == "cat") {
      expectInputs(inst, 1, std::numeric_limits<size_t>::max());
      std::vector<KTensor> inputs;
      for (int32_t id : inst.inputs) inputs.push_back(tensor(id));
      cat(device_, inputs, attrInt(inst, "dim"), tensor(inst.outputs[0]));
    } else {
      return false;
    }
    return true;
  }

  const Plan &plan_;
  const Function &function_;
  CudaDevice &device_;
  Communicator &comm_;
  CudaRankState &state_;
  const ExecutionContext &context_;
  std::vector<CudaBuffer> owned_;
  size_t index_ = 0;
};

std::vector<HostTensor> executeFunctionCuda(const Plan &plan, const std::string &name,
                                            CudaDevice &device, Communicator &comm,
                                            CudaRankState &state,
                                            const std::vector<HostTensor> &inputs,
                                            const ExecutionContext &context) {
  const Function *function = plan.function(name);
  if (!function) throw RuntimeError("executeFunctionCuda: plan has no function '" + name + "'");
  if (comm.worldSize() != plan.worldSize)
    throw RuntimeError("executeFunctionCuda('" + name + "'): communicator has " +
                       std::to_string(comm.worldSize()) + " ranks, the plan was built for " +
                       std::to_string(plan.worldSize));
  if (comm.rank() != state.rank())
    throw RuntimeError("executeFunctionCuda('" + name + "'): communicator rank " +
                       std::to_string(comm.rank()) + " != rank state " +
                       std::to_string(state.rank()));
  checkPlan(plan);
  CudaFunctionRun run(plan, *function, device, comm, state, context);
  run.bindInputs(inputs);
  run.run();
  return run.finish();
}

}  // namespace shardc::runtime::cuda
