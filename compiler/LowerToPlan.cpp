//===- LowerToPlan.cpp - lower a sharded tc module to a Plan --------------===//
//
// Each SSA value becomes a Plan buffer. Memory is made explicit here:
//   - an init chain (generator, then pointwise ops) is computed in place, in
//     the storage of the parameter it materializes: init never holds a
//     temporary the size of a shard;
//   - a non-shardable chain (feeding tc.scatter) is computed in a full
//     buffer on its owner rank only (instructions carry `rank`), scattered,
//     and freed;
//   - tc.all_gather allocates a "gathered" buffer, tc.release frees it;
//   - every other buffer is freed right after the last instruction that
//     uses it, unless the function returns it;
//   - a transpose read only by matmuls is not copied: they read its source
//     in place (transpose_a / transpose_b, MatmulOperands.h).
//
//===----------------------------------------------------------------------===//
#include "compiler/LowerToPlan.h"
#include "compiler/IndexMapEncoding.h"
#include "compiler/MatmulOperands.h"
#include "dialects/tc/TcOps.h"
#include "runtime/checkpoint/LoadPlan.h"
#include "runtime/checkpoint/ShardReader.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace shardc::compiler {
namespace {

FailureOr<plan::DType> dtypeOf(Type elementType, Location loc) {
  if (elementType.isF32())
    return plan::DType::F32;
  if (elementType.isF64())
    return plan::DType::F64;
  if (elementType.isF16())
    return plan::DType::F16;
  if (elementType.isBF16())
    return plan::DType::BF16;
  if (elementType.isInteger(64))
    return plan::DType::I64;
  return emitError(loc) << "element type " << elementType
                        << " has no runtime dtype";
}

std::string locationString(Location loc) {
  std::string text;
  llvm::raw_string_ostream out(text);
  if (auto name = dyn_cast<NameLoc>(loc)) {
    out << name.getName().getValue();
    if (auto file = dyn_cast<FileLineColLoc>(name.getChildLoc()))
      return file.getFilename().str() + ": " + text;
    return text;
  }
  loc.print(out);
  return text;
}

/// Follows an init value through its pointwise ops (and a scatter) to the
/// op that consumes the chain's result: a materialize, a scatter, or null.
Operation *chainEnd(Value value) {
  while (value.hasOneUse()) {
    Operation *user = *value.getUsers().begin();
    if (!isa<tc::PointwiseInitOpInterface>(user))
      return user;
    value = user->getResult(0);
  }
  return nullptr;
}

/// The parameter an init chain ends in (its name keys the RNG stream).
std::string streamOf(Value value) {
  Operation *end = chainEnd(value);
  if (auto scatter = dyn_cast_or_null<tc::ScatterOp>(end))
    end = chainEnd(scatter.getResult());
  if (auto materialize = dyn_cast_or_null<tc::MaterializeOp>(end))
    return materialize.getParam().str();
  return "";
}

std::vector<int64_t> shapeOf(Type type) {
  ArrayRef<int64_t> shape = cast<RankedTensorType>(type).getShape();
  return {shape.begin(), shape.end()};
}

/// Builds one Plan function from one func.func.
class FunctionLowering {
public:
  FunctionLowering(plan::Plan &plan, const llvm::StringMap<int32_t> &paramIndex,
                   plan::Function &function)
      : plan_(plan), paramIndex_(paramIndex), function_(function) {}

  LogicalResult lower(func::FuncOp func) {
    Block &body = func.front();
    for (BlockArgument arg : body.getArguments()) {
      auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "tc.name");
      std::string label = name ? name.str() : "arg" + std::to_string(arg.getArgNumber());
      FailureOr<int32_t> id = newBuffer(arg, label, plan::Category::IO);
      if (failed(id))
        return failure();
      function_.inputs.push_back(*id);
    }
    Operation *terminator = body.getTerminator();
    for (auto [i, result] : llvm::enumerate(terminator->getOperands()))
      if (auto name = func.getResultAttrOfType<StringAttr>(i, "tc.name"))
        outputNames_.try_emplace(result, name.str());
    markOwnerOnlyOps(func);

    for (Operation &op : body) {
      if (isa<func::ReturnOp>(op)) {
        for (auto [i, result] : llvm::enumerate(op.getOperands())) {
          function_.outputs.push_back(buffers_.lookup(result));
          if (func.getResultAttr(i, "tc.replicated"))
            function_.buffers[function_.outputs.back()].replicated = true;
        }
        continue;
      }
      if (failed(lowerOp(op)))
        return failure();
    }
    reuseDeadOperands();
    insertFrees();
    return success();
  }

private:
  /// Ops computing a scatter's input run only on the scatter's owner.
  void markOwnerOnlyOps(func::FuncOp func) {
    func.walk([&](tc::ScatterOp scatter) {
      Value value = scatter.getInput();
      while (Operation *op = value.getDefiningOp()) {
        ownerOf_[op] = static_cast<int64_t>(scatter.getOwner());
        if (op->getNumOperands() == 0)
          break;
        value = op->getOperand(0);
      }
    });
  }

  FailureOr<int32_t> newBuffer(Value value, const std::string &name,
                               plan::Category category) {
    auto type = cast<RankedTensorType>(value.getType());
    FailureOr<plan::DType> dtype = dtypeOf(type.getElementType(),
                                           value.getLoc());
    if (failed(dtype))
      return failure();
    plan::Buffer buffer;
    buffer.id = static_cast<int32_t>(function_.buffers.size());
    buffer.name = name;
    buffer.dtype = *dtype;
    buffer.shape = shapeOf(type);
    buffer.bytes = plan::numElements(buffer.shape) * plan::dtypeSize(*dtype);
    buffer.category = category;
    function_.buffers.push_back(buffer);
    buffers_[value] = buffer.id;
    return buffer.id;
  }

  /// The buffer that is `param`'s storage in this function (one per param).
  int32_t paramBuffer(StringRef name) {
    int32_t index = paramIndex_.lookup(name);
    if (auto it = paramBuffers_.find(index); it != paramBuffers_.end())
      return it->second;
    const plan::Param &param = plan_.params[index];
    plan::Buffer buffer;
    buffer.id = static_cast<int32_t>(function_.buffers.size());
    buffer.name = param.name;
    buffer.dtype = param.dtype;
    buffer.shape = param.localShape();
    buffer.bytes = param.localBytes();
    buffer.category = plan::Category::Parameter;
    buffer.param = index;
    function_.buffers.push_back(buffer);
    paramBuffers_[index] = buffer.id;
    return buffer.id;
  }

  void emit(plan::OpCode op, std::vector<int32_t> inputs,
            std::vector<int32_t> outputs, Operation *source,
            std::map<std::string, plan::AttrValue> attrs = {},
            bool collective = false) {
    plan::Instruction instruction;
    instruction.op = op;
    instruction.inputs = std::move(inputs);
    instruction.outputs = std::move(outputs);
    instruction.attrs = std::move(attrs);
    instruction.loc = locationString(source->getLoc());
    auto owner = ownerOf_.find(source);
    if (owner != ownerOf_.end() && !collective)
      instruction.attrs["rank"] = owner->second;
    function_.body.push_back(std::move(instruction));
  }

  /// Allocates the buffer a fresh value is computed into: its param's
  /// storage when its chain is materialized, else a new buffer.
  FailureOr<int32_t> allocResult(Operation *op, plan::Category category) {
    Value value = op->getResult(0);
    Operation *end = chainEnd(value);
    int32_t id;
    if (auto materialize = dyn_cast_or_null<tc::MaterializeOp>(end)) {
      id = paramBuffer(materialize.getParam());
      buffers_[value] = id;
    } else {
      std::string name;
      if (auto scatter = dyn_cast_or_null<tc::ScatterOp>(end))
        name = streamOf(value) + ".full";
      else if (auto output = outputNames_.find(value); output != outputNames_.end())
        name = output->second;
      else
        name = "%" + std::to_string(nextTemp_++);
      FailureOr<int32_t> fresh = newBuffer(value, name, category);
      if (failed(fresh))
        return failure();
      id = *fresh;
      // A scatter source holds N * chunk padded rows, so that every rank's
      // part is one uniform slab (as an all-gather target).
      if (auto scatter = dyn_cast_or_null<tc::ScatterOp>(end)) {
        auto materialize =
            cast<tc::MaterializeOp>(chainEnd(scatter.getResult()));
        const plan::Param &param =
            plan_.params[paramIndex_.lookup(materialize.getParam())];
        function_.buffers[id].bytes = param.gatheredBytes(plan_.worldSize);
      }
      if (auto owner = ownerOf_.find(op); owner != ownerOf_.end())
        ownerOfBuffer_[id] = owner->second;
    }
    emit(plan::OpCode::Alloc, {}, {id}, op);
    return id;
  }

  /// Attributes every generator shares: its RNG stream and its views.
  template <typename GeneratorOp>
  std::map<std::string, plan::AttrValue> generatorAttrs(GeneratorOp op,
                                                         const char *kind) {
    std::map<std::string, plan::AttrValue> attrs;
    attrs["kind"] = std::string(kind);
    attrs["stream"] = streamOf(op.getResult());
    if (op.getIndexMap()) {
      attrs["source_shape"] = shapeOf(op.getSourceTensorType());
      attrs["index_map"] = encodeIndexMap(*op.getIndexMap());
    }
    return attrs;
  }

  LogicalResult lowerGenerator(Operation &op) {
    FailureOr<int32_t> out = allocResult(&op, plan::Category::Activation);
    if (failed(out))
      return failure();
    auto d = [](APFloat value) { return value.convertToDouble(); };
    if (auto load = dyn_cast<tc::LoadOp>(op)) {
      emit(plan::OpCode::Load, {ioBuffer(op)}, {*out}, &op,
           {{"file", load.getFile().str()}, {"tensor", load.getTensor().str()}});
      return success();
    }
    if (auto norm = dyn_cast<tc::NormOfOp>(op)) {
      emit(plan::OpCode::NormOf, {}, {*out}, &op,
           {{"source", norm.getSource().str()},
            {"dims", std::vector<int64_t>(norm.getDims().begin(), norm.getDims().end())}});
      return success();
    }
    if (auto fill = dyn_cast<tc::FillOp>(op); fill && !fill.getIndexMap()) {
      emit(plan::OpCode::Fill, {}, {*out}, &op, {{"value", d(fill.getValue())}});
      return success();
    }
    if (isa<tc::ZerosOp, tc::OnesOp>(op)) {
      emit(plan::OpCode::Fill, {}, {*out}, &op, {{"value", isa<tc::OnesOp>(op) ? 1.0 : 0.0}});
      return success();
    }
    std::map<std::string, plan::AttrValue> attrs;
    plan::OpCode opcode = plan::OpCode::Generate;
    if (auto uniform = dyn_cast<tc::UniformOp>(op)) {
      attrs = generatorAttrs(uniform, "uniform");
      attrs["low"] = d(uniform.getLow());
      attrs["high"] = d(uniform.getHigh());
      attrs["position"] = static_cast<int64_t>(uniform.getPosition());
    } else if (auto normal = dyn_cast<tc::NormalOp>(op)) {
      attrs = generatorAttrs(normal, "normal");
      attrs["mean"] = d(normal.getMean());
      attrs["std"] = d(normal.getStd());
      attrs["position"] = static_cast<int64_t>(normal.getPosition());
    } else if (auto trunc = dyn_cast<tc::TruncNormalOp>(op)) {
      attrs = generatorAttrs(trunc, "trunc_normal");
      attrs["mean"] = d(trunc.getMean());
      attrs["std"] = d(trunc.getStd());
      attrs["low"] = d(trunc.getA());
      attrs["high"] = d(trunc.getB());
      attrs["position"] = static_cast<int64_t>(trunc.getPosition());
    } else if (auto eye = dyn_cast<tc::EyeOp>(op)) {
      attrs = generatorAttrs(eye, "eye");
      attrs["position"] = int64_t{0};
    } else if (auto arange = dyn_cast<tc::ArangeOp>(op)) {
      attrs = generatorAttrs(arange, "arange");
      attrs["start"] = d(arange.getStart());
      attrs["step"] = d(arange.getStep());
      attrs["position"] = int64_t{0};
    } else if (auto fill = dyn_cast<tc::FillOp>(op)) {
      attrs = generatorAttrs(fill, "fill");
      attrs["value"] = d(fill.getValue());
      attrs["position"] = int64_t{0};
    } else if (auto orthogonal = dyn_cast<tc::OrthogonalOp>(op)) {
      opcode = plan::OpCode::Orthogonal;
      attrs["gain"] = d(orthogonal.getGain());
      attrs["stream"] = streamOf(orthogonal.getResult());
      attrs["position"] = static_cast<int64_t>(orthogonal.getPosition());
    } else {
      return op.emitOpError()
             << "has no runtime lowering (kaiming and xavier are expanded by "
                "tc-expand-init)";
    }
    emit(opcode, {}, {*out}, &op, std::move(attrs));
    return success();
  }

  /// The one bounded buffer every `tc.load` of the function converts
  /// through (category io), allocated at the first load; insertFrees frees
  /// it after the last. Its size fits the largest loaded shard in the widest
  /// dtype, capped at 64 MiB (`shardc run --io-buffer-mib` resizes it).
  int32_t ioBuffer(Operation &load) {
    if (ioBuffer_ >= 0)
      return ioBuffer_;
    int64_t maxElements = 0;
    load.getParentOfType<func::FuncOp>().walk([&](tc::LoadOp other) {
      maxElements = std::max(
          maxElements, cast<RankedTensorType>(other.getType()).getNumElements());
    });
    plan::Buffer buffer;
    buffer.id = static_cast<int32_t>(function_.buffers.size());
    buffer.name = runtime::checkpoint::kIoBufferName;
    buffer.dtype = plan::DType::F64;
    buffer.bytes = runtime::checkpoint::ioBufferBytesFor(
        maxElements, runtime::checkpoint::kDefaultIoBufferBytes);
    buffer.shape = {buffer.bytes / 8};
    buffer.category = plan::Category::IO;
    function_.buffers.push_back(buffer);
    ioBuffer_ = buffer.id;
    emit(plan::OpCode::Alloc, {}, {ioBuffer_}, &load);
    return ioBuffer_;
  }

  /// Pointwise init ops work in place on their input's buffer.
  LogicalResult lowerPointwise(Operation &op) {
    Value input = op.getOperand(0);
    if (!input.hasOneUse())
      return op.emitOpError()
             << "reads a value that is also used elsewhere; init chains are "
                "computed in place";
    int32_t id = buffers_.lookup(input);
    buffers_[op.getResult(0)] = id;
    auto d = [](APFloat value) { return value.convertToDouble(); };
    if (auto mul = dyn_cast<tc::MulScalarOp>(op))
      emit(plan::OpCode::MulScalar, {id}, {id}, &op, {{"value", d(mul.getValue())}});
    else if (auto add = dyn_cast<tc::AddScalarOp>(op))
      emit(plan::OpCode::AddScalar, {id}, {id}, &op, {{"value", d(add.getValue())}});
    else if (auto sub = dyn_cast<tc::SubScalarOp>(op))
      emit(plan::OpCode::SubScalar, {id}, {id}, &op, {{"value", d(sub.getValue())}});
    else if (auto div = dyn_cast<tc::DivScalarOp>(op))
      emit(plan::OpCode::DivScalar, {id}, {id}, &op, {{"value", d(div.getValue())}});
    else if (auto clamp = dyn_cast<tc::ClampOp>(op))
      emit(plan::OpCode::Clamp, {id}, {id}, &op,
           {{"min", d(clamp.getMin())}, {"max", d(clamp.getMax())}});
    else if (isa<tc::ErfinvOp>(op))
      emit(plan::OpCode::Erfinv, {id}, {id}, &op);
    else if (isa<tc::SqrtOp>(op))
      emit(plan::OpCode::Sqrt, {id}, {id}, &op);
    else if (isa<tc::ExpOp>(op))
      emit(plan::OpCode::InitExp, {id}, {id}, &op);
    else if (isa<tc::LogOp>(op))
      emit(plan::OpCode::InitLog, {id}, {id}, &op);
    else if (isa<tc::Expm1Op>(op))
      emit(plan::OpCode::InitExpm1, {id}, {id}, &op);
    else if (isa<tc::InverseSoftplusOp>(op))
      emit(plan::OpCode::InverseSoftplus, {id}, {id}, &op);
    else if (auto rows = dyn_cast<tc::FillRowsOp>(op))
      emit(plan::OpCode::FillRows, {id}, {id}, &op,
           {{"value", d(rows.getValue())},
            {"start", static_cast<int64_t>(rows.getStart())},
            {"end", static_cast<int64_t>(rows.getEnd())}});
    else
      emit(plan::OpCode::Neg, {id}, {id}, &op);
    return success();
  }

  LogicalResult lowerOp(Operation &op) {
    if (isa<tc::GeneratorOpInterface>(op))
      return lowerGenerator(op);
    if (isa<tc::PointwiseInitOpInterface>(op))
      return lowerPointwise(op);
    if (auto materialize = dyn_cast<tc::MaterializeOp>(op)) {
      int32_t target = paramBuffer(materialize.getParam());
      if (buffers_.lookup(materialize.getValue()) != target)
        return materialize.emitOpError()
               << "value is not computed in place into parameter "
               << materialize.getParamAttr();
      return success();
    }
    if (auto scatter = dyn_cast<tc::ScatterOp>(op)) {
      Operation *end = chainEnd(scatter.getResult());
      auto materialize = dyn_cast_or_null<tc::MaterializeOp>(end);
      if (!materialize)
        return scatter.emitOpError() << "must feed a tc.materialize";
      int32_t target = paramBuffer(materialize.getParam());
      buffers_[scatter.getResult()] = target;
      emit(plan::OpCode::Alloc, {}, {target}, &op);
      emit(plan::OpCode::Scatter, {buffers_.lookup(scatter.getInput())}, {target}, &op,
           {{"root", static_cast<int64_t>(scatter.getOwner())}},
           /*collective=*/true);
      return success();
    }
    if (auto use = dyn_cast<tc::UseOp>(op))
      return lowerUse(use);
    if (auto update = dyn_cast<tc::UpdateBufferOp>(op))
      return lowerUpdateBuffer(update);
    if (auto gather = dyn_cast<tc::AllGatherOp>(op))
      return lowerAllGather(gather);
    if (auto release = dyn_cast<tc::ReleaseOp>(op)) {
      emit(plan::OpCode::Free, {unitBuffers_.lookup(release->getOperand(0))}, {}, &op);
      return success();
    }
    if (isa<tc::ReduceScatterOp, tc::GradNormOp, tc::SgdStepOp, tc::AdamwStepOp,
            tc::AdvanceStepOp>(op))
      return lowerTraining(op);
    if (auto reshape = dyn_cast<tc::ReshapeOp>(op))
      return lowerReshape(reshape);
    if (auto view = dyn_cast<tc::ViewOpInterface>(op))
      return lowerStridedView(op, view);
    return lowerModelOp(op);
  }

  /// A buffer's new value (a graph's `updates`) is copied into the
  /// buffer's own storage: a contiguous copy, as the value may be a view of
  /// a larger buffer. A value that already is that storage needs none.
  LogicalResult lowerUpdateBuffer(tc::UpdateBufferOp update) {
    const int32_t target = paramBuffer(update.getBuffer());
    const int32_t value = buffers_.lookup(update.getValue());
    const plan::Buffer &source = function_.buffers[value];
    if (value == target || (baseOf(value) == target && source.byteOffset == 0))
      return success();
    auto type = cast<RankedTensorType>(update.getValue().getType());
    std::vector<int64_t> strides(type.getRank(), 1);
    for (int64_t k = type.getRank() - 2; k >= 0; --k)
      strides[k] = strides[k + 1] * type.getDimSize(k + 1);
    emit(plan::OpCode::StridedCopy, {value}, {target}, update,
         {{"strides", strides}, {"offset", int64_t{0}}});
    return success();
  }

  /// Training's ops (docs/training.md): the gradient's reduction into a
  /// fresh shard buffer, and the optimizer steps, which work in place on
  /// the parameter's storage and its optimizer state.
  LogicalResult lowerTraining(Operation &op) {
    auto d = [](APFloat value) { return value.convertToDouble(); };
    if (auto reduce = dyn_cast<tc::ReduceScatterOp>(op)) {
      FailureOr<int32_t> shard = allocResult(&op, plan::Category::Activation);
      if (failed(shard))
        return failure();
      function_.buffers[*shard].name = reduce.getParam().str() + ".grad_shard";
      std::map<std::string, plan::AttrValue> attrs;
      if (reduce.getSum())
        attrs["sum"] = int64_t{1};
      emit(plan::OpCode::ReduceScatter, {buffers_.lookup(reduce.getFull())},
           {*shard}, &op, attrs, /*collective=*/true);
      return success();
    }
    if (auto norm = dyn_cast<tc::GradNormOp>(op)) {
      FailureOr<int32_t> result = allocResult(&op, plan::Category::Activation);
      if (failed(result))
        return failure();
      function_.buffers[*result].name = "grad_norm";
      std::vector<int32_t> inputs;
      std::vector<int64_t> whole; // replicated: every rank holds it entire
      for (auto [i, grad, name] :
           llvm::enumerate(norm.getGrads(), norm.getParams())) {
        inputs.push_back(buffers_.lookup(grad));
        const int32_t index =
            paramIndex_.lookup(cast<FlatSymbolRefAttr>(name).getValue());
        if (!plan_.params[index].sharded())
          whole.push_back(static_cast<int64_t>(i));
      }
      std::map<std::string, plan::AttrValue> attrs;
      if (!whole.empty())
        attrs["whole"] = whole;
      emit(plan::OpCode::GradNorm, inputs, {*result}, &op, attrs,
           /*collective=*/true);
      return success();
    }
    // A step that clips reads the norm last, with its max_grad_norm.
    auto clip = [&](Value gradNorm, APFloat maxGradNorm,
                    std::vector<int32_t> &inputs,
                    std::map<std::string, plan::AttrValue> &attrs) {
      if (!gradNorm)
        return;
      inputs.push_back(buffers_.lookup(gradNorm));
      attrs["max_grad_norm"] = d(maxGradNorm);
    };
    if (auto sgd = dyn_cast<tc::SgdStepOp>(op)) {
      int32_t param = paramBuffer(sgd.getParam());
      std::vector<int32_t> inputs{param, buffers_.lookup(sgd.getGrad())};
      if (auto buffer = sgd.getMomentumBuffer())
        inputs.push_back(paramBuffer(*buffer));
      std::map<std::string, plan::AttrValue> attrs{
          {"lr", d(sgd.getLr())},
          {"momentum", d(sgd.getMomentum())},
          {"weight_decay", d(sgd.getWeightDecay())}};
      if (sgd.getNesterov())
        attrs["nesterov"] = int64_t{1};
      if (auto step = sgd.getStep()) { // a schedule, by this step count
        inputs.push_back(paramBuffer(*step));
        attrs["warmup_steps"] = sgd.getWarmupStepsAttr().getInt();
        attrs["decay_steps"] = sgd.getDecayStepsAttr().getInt();
        attrs["min_lr"] = d(sgd.getMinLr());
      }
      clip(sgd.getGradNorm(), sgd.getMaxGradNorm(), inputs, attrs);
      emit(plan::OpCode::SgdStep, inputs, {param}, &op, attrs);
      return success();
    }
    if (auto adamw = dyn_cast<tc::AdamwStepOp>(op)) {
      int32_t param = paramBuffer(adamw.getParam());
      std::map<std::string, plan::AttrValue> attrs{
          {"lr", d(adamw.getLr())},
          {"beta1", d(adamw.getBeta1())},
          {"beta2", d(adamw.getBeta2())},
          {"eps", d(adamw.getEps())},
          {"weight_decay", d(adamw.getWeightDecay())}};
      // The schedule only when there is one: plans without it read as before.
      if (adamw.getWarmupSteps() != 0 || adamw.getDecaySteps() != 0) {
        attrs["warmup_steps"] = adamw.getWarmupStepsAttr().getInt();
        attrs["decay_steps"] = adamw.getDecayStepsAttr().getInt();
        attrs["min_lr"] = d(adamw.getMinLr());
      }
      std::vector<int32_t> inputs{param, buffers_.lookup(adamw.getGrad()),
                                  paramBuffer(adamw.getExpAvg()),
                                  paramBuffer(adamw.getExpAvgSq()),
                                  paramBuffer(adamw.getStep())};
      clip(adamw.getGradNorm(), adamw.getMaxGradNorm(), inputs, attrs);
      emit(plan::OpCode::AdamwStep, inputs, {param}, &op, attrs);
      return success();
    }
    auto advance = cast<tc::AdvanceStepOp>(op);
    int32_t counter = paramBuffer(advance.getCounter());
    emit(plan::OpCode::AddScalar, {counter}, {counter}, &op, {{"value", 1.0}});
    return success();
  }

  /// Model ops: the result gets a fresh buffer, the instruction has the op's
  /// name and attributes (docs/plan.md).
  LogicalResult lowerModelOp(Operation &op) {
    auto d = [](APFloat value) { return value.convertToDouble(); };
    std::map<std::string, plan::AttrValue> attrs;
    std::optional<plan::OpCode> opcode;
    if (isa<tc::AddOp>(op))
      opcode = plan::OpCode::Add;
    else if (isa<tc::SubOp>(op))
      opcode = plan::OpCode::Sub;
    else if (isa<tc::MulOp>(op))
      opcode = plan::OpCode::Mul;
    else if (isa<tc::DivOp>(op))
      opcode = plan::OpCode::Div;
    else if (isa<tc::EmbeddingOp>(op))
      opcode = plan::OpCode::Embedding;
    else if (isa<tc::LinearOp>(op))
      opcode = plan::OpCode::Linear;
    else if (isa<tc::MatmulOp>(op))
      opcode = plan::OpCode::Matmul;
    else if (auto gelu = dyn_cast<tc::GeluOp>(op)) {
      opcode = plan::OpCode::Gelu;
      attrs["approximate"] = gelu.getApproximate().str();
    } else if (isa<tc::SiluOp>(op))
      opcode = plan::OpCode::Silu;
    else if (isa<tc::ReluOp>(op))
      opcode = plan::OpCode::Relu;
    else if (auto norm = dyn_cast<tc::LayerNormOp>(op)) {
      opcode = plan::OpCode::LayerNorm;
      attrs["eps"] = d(norm.getEps());
    } else if (auto norm = dyn_cast<tc::RmsNormOp>(op)) {
      opcode = plan::OpCode::RmsNorm;
      attrs["eps"] = d(norm.getEps());
    } else if (auto softmax = dyn_cast<tc::SoftmaxOp>(op)) {
      opcode = plan::OpCode::Softmax;
      attrs["dim"] = softmax.getDimAttr().getInt();
    } else if (auto sdpa = dyn_cast<tc::SdpaOp>(op)) {
      opcode = plan::OpCode::Sdpa;
      attrs["causal"] = int64_t{sdpa.getCausal() ? 1 : 0};
      attrs["scale"] = d(sdpa.getScale());
    } else if (auto rope = dyn_cast<tc::RopeOp>(op)) {
      opcode = plan::OpCode::Rope;
      attrs["theta"] = d(rope.getTheta());
    } else if (auto cat = dyn_cast<tc::CatOp>(op)) {
      opcode = plan::OpCode::Cat;
      attrs["dim"] = cat.getDimAttr().getInt();
    } else if (auto loss = dyn_cast<tc::CrossEntropyOp>(op)) {
      opcode = plan::OpCode::CrossEntropy;
      attrs["ignore_index"] = loss.getIgnoreIndexAttr().getInt();
    } else if (auto table = dyn_cast<tc::TableOp>(op)) {
      // A family op: the opcode of its name, its attributes copied.
      FailureOr<std::map<std::string, plan::AttrValue>> tableAttrs = tc::tableAttrs(table);
      if (failed(tableAttrs))
        return failure();
      opcode = plan::parseOpCode(table.getOpName().str());
      attrs = std::move(*tableAttrs);
    }
    if (!opcode)
      return op.emitOpError() << "has no lowering to the runtime plan";
    std::vector<int32_t> inputs;
    for (auto [i, operand] : llvm::enumerate(op.getOperands())) {
      if (auto source = transposedSources_.find(operand);
          source != transposedSources_.end()) {
        attrs[i == 0 ? "transpose_a" : "transpose_b"] = int64_t{1};
        operand = source->second;
      }
      inputs.push_back(buffers_.lookup(operand));
    }
    FailureOr<int32_t> out = allocResult(&op, plan::Category::Activation);
    if (failed(out))
      return failure();
    emit(*opcode, inputs, {*out}, &op, std::move(attrs));
    return success();
  }

  /// A reshape of a contiguous buffer is the same bytes: an alias. Not of a
  /// gathered parameter, though: the alias would outlive tc.release, so that
  /// one is copied.
  LogicalResult lowerReshape(tc::ReshapeOp reshape) {
    int32_t input = buffers_.lookup(reshape.getInput());
    if (function_.buffers[baseOf(input)].category == plan::Category::Gathered) {
      auto type = cast<RankedTensorType>(reshape.getType());
      std::vector<int64_t> strides(type.getRank(), 1);
      for (int64_t k = type.getRank() - 2; k >= 0; --k)
        strides[k] = strides[k + 1] * type.getDimSize(k + 1);
      FailureOr<int32_t> out = allocResult(reshape, plan::Category::Activation);
      if (failed(out))
        return failure();
      emit(plan::OpCode::StridedCopy, {input}, {*out}, reshape,
           {{"strides", strides}, {"offset", int64_t{0}}});
      return success();
    }
    std::string name = "%" + std::to_string(nextTemp_++);
    if (auto output = outputNames_.find(reshape.getResult());
        output != outputNames_.end())
      name = output->second;
    // A copy: newBuffer grows function_.buffers, which would leave a
    // reference dangling (AddressSanitizer caught exactly that).
    const plan::Buffer source = function_.buffers[input];
    FailureOr<int32_t> alias =
        newBuffer(reshape.getResult(), name, source.category);
    if (failed(alias))
      return failure();
    plan::Buffer &buffer = function_.buffers[*alias];
    buffer.aliasOf = source.aliasOf ? *source.aliasOf : input;
    buffer.byteOffset = source.byteOffset;
    if (auto unit = unitBuffers_.find(reshape.getInput()); unit != unitBuffers_.end())
      unitBuffers_[reshape.getResult()] = unit->second;
    return success();
  }

  /// Transpose, permute and slice read their input at affine offsets:
  /// evaluated at the origin and at unit vectors they give a strided copy
  /// (none for a transpose its matmuls read in place).
  LogicalResult lowerStridedView(Operation &op, tc::ViewOpInterface view) {
    if (matmulsReadTransposeInPlace(&op)) {
      transposedSources_[op.getResult(0)] = op.getOperand(0);
      return success();
    }
    auto input = cast<RankedTensorType>(op.getOperand(0).getType());
    auto result = cast<RankedTensorType>(op.getResult(0).getType());
    SmallVector<int64_t> inputStrides(input.getRank(), 1);
    for (int64_t k = input.getRank() - 2; k >= 0; --k)
      inputStrides[k] = inputStrides[k + 1] * input.getDimSize(k + 1);
    AffineMap map = view.getIndexMap();
    auto flatOffset = [&](ArrayRef<int64_t> index) {
      SmallVector<int64_t> source = map.compose(index);
      int64_t offset = 0;
      for (auto [i, stride] : llvm::zip(source, inputStrides))
        offset += i * stride;
      return offset;
    };
    SmallVector<int64_t> origin(result.getRank(), 0);
    int64_t offset = flatOffset(origin);
    std::vector<int64_t> strides;
    for (int64_t k = 0; k < result.getRank(); ++k) {
      SmallVector<int64_t> unit = origin;
      unit[k] = 1;
      strides.push_back(flatOffset(unit) - offset);
    }
    int32_t in = buffers_.lookup(op.getOperand(0));
    FailureOr<int32_t> out = allocResult(&op, plan::Category::Activation);
    if (failed(out))
      return failure();
    emit(plan::OpCode::StridedCopy, {in}, {*out}, &op,
         {{"strides", strides}, {"offset", offset}});
    return success();
  }

  /// A read of a parameter is its buffer; a read in another float dtype
  /// (master weights, tc-fold-param-casts) is a cast of it into a fresh
  /// buffer, which lives until that read's last user.
  LogicalResult lowerUse(tc::UseOp use) {
    int32_t param = paramBuffer(use.getParam());
    auto type = cast<RankedTensorType>(use.getType());
    FailureOr<plan::DType> dtype = dtypeOf(type.getElementType(), use.getLoc());
    if (failed(dtype))
      return failure();
    if (*dtype == function_.buffers[param].dtype) {
      buffers_[use.getResult()] = param;
      return success();
    }
    FailureOr<int32_t> out = allocResult(use, plan::Category::Activation);
    if (failed(out))
      return failure();
    emit(plan::OpCode::Cast, {param}, {*out}, use,
         {{"dtype", std::string(plan::dtypeName(*dtype))}});
    return success();
  }

  /// One unit buffer holds every gathered parameter's padded rows, one
  /// after the other, in the results' dtype (a parameter stored in another
  /// is converted as it is gathered); each parameter's full value is an
  /// alias into it.
  LogicalResult lowerAllGather(tc::AllGatherOp gather) {
    SmallVector<int32_t> params;
    std::vector<int64_t> offsets;
    int64_t bytes = 0;
    FailureOr<plan::DType> gatheredDtype = dtypeOf(
        getElementTypeOrSelf(gather.getResult(0).getType()), gather.getLoc());
    if (failed(gatheredDtype))
      return failure();
    bool converts = false;
    for (auto [name, result] :
         llvm::zip(gather.getParams(), gather.getResults())) {
      StringRef param = cast<FlatSymbolRefAttr>(name).getValue();
      params.push_back(paramIndex_.lookup(param));
      offsets.push_back(bytes);
      FailureOr<plan::DType> dtype =
          dtypeOf(getElementTypeOrSelf(result.getType()), gather.getLoc());
      if (failed(dtype))
        return failure();
      converts |= *dtype != plan_.params[params.back()].dtype;
      bytes +=
          plan_.params[params.back()].gatheredBytes(plan_.worldSize, *dtype);
    }
    std::string label = gather.getNumResults() == 1
                            ? plan_.params[params[0]].name + ".gathered"
                            : "unit " + gather.getUnit().value_or("").str() +
                                  ".gathered";
    plan::Buffer unit;
    unit.id = static_cast<int32_t>(function_.buffers.size());
    unit.name = label;
    unit.dtype = *gatheredDtype;
    unit.shape = {bytes / plan::dtypeSize(unit.dtype)};
    unit.bytes = bytes;
    unit.category = plan::Category::Gathered;
    function_.buffers.push_back(unit);
    explicitlyFreed_.insert(unit.id);
    std::vector<int32_t> inputs;
    for (auto [i, result] : llvm::enumerate(gather.getResults())) {
      const plan::Param &param = plan_.params[params[i]];
      FailureOr<int32_t> alias = newBuffer(result, param.name, plan::Category::Gathered);
      if (failed(alias))
        return failure();
      function_.buffers[*alias].aliasOf = unit.id;
      function_.buffers[*alias].byteOffset = offsets[i];
      unitBuffers_[result] = unit.id;
      inputs.push_back(paramBuffer(param.name));
    }
    emit(plan::OpCode::Alloc, {}, {unit.id}, gather);
    std::map<std::string, plan::AttrValue> attrs{{"offsets", offsets}};
    if (converts) // master weights: each param converted into the unit's dtype
      attrs["convert"] = int64_t{1};
    emit(plan::OpCode::AllGather, inputs, {unit.id}, gather, std::move(attrs),
         /*collective=*/true);
    return success();
  }

  int32_t baseOf(int32_t id) const {
    const plan::Buffer &buffer = function_.buffers[id];
    return buffer.aliasOf ? *buffer.aliasOf : id;
  }

  /// The buffers a function keeps: its inputs and outputs, and whatever
  /// they alias.
  std::set<int32_t> keptBuffers() const {
    std::set<int32_t> kept;
    for (int32_t id : function_.inputs)
      kept.insert(baseOf(id));
    for (int32_t id : function_.outputs)
      kept.insert(baseOf(id));
    return kept;
  }

  /// An elementwise add / sub / mul / div whose operand dies there writes
  /// its result into that operand's buffer instead of a fresh one (the
  /// kernels read element i before writing it): a gradient accumulated
  /// from two pieces holds two buffers, not three, and so does a residual
  /// add. Only temporaries of the result's shape and dtype qualify, or a
  /// reshape of one (of the same bytes), whose view the result then
  /// becomes. So does the operand a family op may write over
  /// (plan::overwritableOperand: embedding_backward's acc, a tied table's
  /// gradient; cross_entropy_backward's logits, whose softmax minus one
  /// then takes the logits' place).
  void reuseDeadOperands() {
    const std::set<int32_t> kept = keptBuffers();
    std::map<int32_t, size_t> lastUse, allocAt;
    for (size_t i = 0; i < function_.body.size(); ++i) {
      const plan::Instruction &inst = function_.body[i];
      if (inst.op == plan::OpCode::Alloc && inst.outputs.size() == 1)
        allocAt[inst.outputs[0]] = i;
      for (const std::vector<int32_t> *ids : {&inst.inputs, &inst.outputs})
        for (int32_t id : *ids)
          lastUse[baseOf(id)] = i;
    }
    auto temporary = [&](int32_t id) {
      const plan::Buffer &b = function_.buffers[id];
      return !b.param && !b.aliasOf && !kept.count(id) &&
             !explicitlyFreed_.count(id) && !ownerOfBuffer_.count(id) &&
             allocAt.count(id);
    };
    std::set<size_t> droppedAllocs;
    std::map<int32_t, int32_t> renamed; // result buffer -> the operand's
    // Every view of `from` views `to` instead (views are one level deep).
    auto moveViews = [&](int32_t from, int32_t to) {
      for (plan::Buffer &view : function_.buffers)
        if (view.aliasOf == from)
          view.aliasOf = to;
    };
    for (size_t i = 0; i < function_.body.size(); ++i) {
      plan::Instruction &inst = function_.body[i];
      for (std::vector<int32_t> *ids : {&inst.inputs, &inst.outputs})
        for (int32_t &id : *ids)
          if (auto to = renamed.find(id); to != renamed.end())
            id = to->second;
      const bool elementwise =
          inst.op == plan::OpCode::Add || inst.op == plan::OpCode::Sub ||
          inst.op == plan::OpCode::Mul || inst.op == plan::OpCode::Div;
      const int overwritable = plan::overwritableOperand(inst.op);
      const bool overwrites =
          overwritable >= 0 &&
          static_cast<size_t>(overwritable) < inst.inputs.size();
      if (!(elementwise || overwrites) || inst.outputs.size() != 1)
        continue;
      const int32_t result = inst.outputs[0];
      if (!temporary(result) || allocAt[result] >= i)
        continue;
      const size_t first = overwrites ? static_cast<size_t>(overwritable) : 0;
      const size_t end = overwrites ? first + 1 : inst.inputs.size();
      for (size_t k = first; k < end; ++k) {
        const int32_t operand = inst.inputs[k];
        const int32_t base = baseOf(operand);
        const plan::Buffer &view = function_.buffers[operand];
        const plan::Buffer &from = function_.buffers[base];
        const plan::Buffer &to = function_.buffers[result];
        if (base == result || !temporary(base) || lastUse[base] != i ||
            view.shape != to.shape || view.dtype != to.dtype ||
            view.byteOffset != 0 || from.bytes != to.bytes)
          continue;
        droppedAllocs.insert(allocAt[result]);
        if (operand == base) { // the operand's own buffer
          renamed[result] = operand;
          inst.outputs[0] = operand;
        } else { // a reshape's: the result becomes a view of its base
          function_.buffers[result].aliasOf = base;
          function_.buffers[result].byteOffset = 0;
        }
        lastUse[base] = std::max(lastUse[base], lastUse[result]);
        moveViews(result, base);
        break;
      }
    }
    std::vector<plan::Instruction> body;
    for (size_t i = 0; i < function_.body.size(); ++i)
      if (!droppedAllocs.count(i))
        body.push_back(std::move(function_.body[i]));
    function_.body = std::move(body);
  }

  /// Frees each temporary right after the last instruction that touches it.
  void insertFrees() {
    // Inputs and outputs stay allocated, and so does whatever they alias.
    const std::set<int32_t> kept = keptBuffers();
    // Each buffer's last use (through any alias), in one pass over the body:
    // a scan per buffer made a 23,000-node backward (timm's sequencer2d_s)
    // take minutes here.
    std::map<int32_t, size_t> lastUse;
    for (size_t i = 0; i < function_.body.size(); ++i) {
      const plan::Instruction &instruction = function_.body[i];
      for (const std::vector<int32_t> *ids :
           {&instruction.inputs, &instruction.outputs})
        for (int32_t id : *ids)
          lastUse[baseOf(id)] = i;
    }
    std::map<size_t, std::vector<int32_t>> freeAfter;
    for (const plan::Buffer &buffer : function_.buffers) {
      if (buffer.param || buffer.aliasOf || kept.count(buffer.id) ||
          explicitlyFreed_.count(buffer.id))
        continue;
      if (auto last = lastUse.find(buffer.id); last != lastUse.end())
        freeAfter[last->second].push_back(buffer.id);
    }
    std::vector<plan::Instruction> body;
    for (size_t i = 0; i < function_.body.size(); ++i) {
      body.push_back(function_.body[i]);
      for (int32_t id : freeAfter[i]) {
        plan::Instruction free;
        free.op = plan::OpCode::Free;
        free.inputs = {id};
        free.loc = function_.body[i].loc;
        if (auto owner = ownerOfBuffer_.find(id); owner != ownerOfBuffer_.end())
          free.attrs["rank"] = owner->second;
        body.push_back(std::move(free));
      }
    }
    function_.body = std::move(body);
  }

  plan::Plan &plan_;
  const llvm::StringMap<int32_t> &paramIndex_;
  plan::Function &function_;
  llvm::DenseMap<Value, int32_t> buffers_;
  llvm::DenseMap<int32_t, int32_t> paramBuffers_;
  llvm::DenseMap<Value, std::string> outputNames_;
  llvm::DenseMap<Value, int32_t> unitBuffers_;
  /// A transpose left out, read by its matmuls in place -> its source.
  llvm::DenseMap<Value, Value> transposedSources_;
  llvm::DenseMap<Operation *, int64_t> ownerOf_;
  std::map<int32_t, int64_t> ownerOfBuffer_;
  std::set<int32_t> explicitlyFreed_;
  int nextTemp_ = 0;
  int32_t ioBuffer_ = -1;
};

} // namespace

FailureOr<plan::Plan> lowerToPlan(ModuleOp module) {
  plan::Plan result;
  if (auto attr = module->getAttrOfType<IntegerAttr>("tc.world_size"))
    result.worldSize = attr.getInt();
  llvm::StringMap<int32_t> paramIndex;
  for (tc::ParamOp param : module.getOps<tc::ParamOp>()) {
    RankedTensorType type = param.getTensorType();
    FailureOr<plan::DType> dtype = dtypeOf(type.getElementType(), param.getLoc());
    if (failed(dtype))
      return failure();
    plan::Param lowered;
    lowered.name = param.getSymName().str();
    lowered.dtype = *dtype;
    lowered.shape = shapeOf(type);
    lowered.device = param.getDevice().str();
    lowered.unit = param.getUnit().value_or("").str();
    lowered.isBuffer = param.getIsBuffer();
    lowered.persistent = !param.getNonPersistent();
    if (auto tied = param.getTiedNames())
      for (Attribute name : *tied)
        lowered.tiedNames.push_back(cast<StringAttr>(name).getValue().str());
    if (auto shard = param.getShardAttr()) {
      lowered.chunkRows = shard.getChunkRows();
      result.worldSize = shard.getWorldSize();
    }
    paramIndex[lowered.name] = static_cast<int32_t>(result.params.size());
    result.params.push_back(std::move(lowered));
  }

  for (StringRef name : {tc::kInitFunctionName, tc::kForwardFunctionName}) {
    auto func = module.lookupSymbol<func::FuncOp>(name);
    if (!func)
      continue;
    plan::Function &function = result.functions.emplace_back();
    function.name = name.str();
    if (failed(FunctionLowering(result, paramIndex, function).lower(func)))
      return failure();
  }
  return result;
}

} // namespace shardc::compiler
