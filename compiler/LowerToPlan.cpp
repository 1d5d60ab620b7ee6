//===- LowerToPlan.cpp - lower a sharded tc module to a Plan --------------===//
//
// Each SSA value becomes a Plan buffer. Memory is made explicit here:
//   - a generator whose value is materialized into a param writes straight
//     into the param's storage (no temporary the size of the shard);
//   - tc.all_gather allocates a "gathered" buffer, tc.release frees it;
//   - every other value is allocated by its producer and freed right after
//     its last use, unless the function returns it.
//
//===----------------------------------------------------------------------===//
#include "compiler/LowerToPlan.h"
#include "dialects/tc/TcOps.h"

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
    // Values the function returns stay allocated after it, and are named
    // after the outputs they are.
    Operation *terminator = body.getTerminator();
    for (auto [i, result] : llvm::enumerate(terminator->getOperands())) {
      returned_.insert(result);
      if (auto name = func.getResultAttrOfType<StringAttr>(i, "tc.name"))
        outputNames_.try_emplace(result, name.str());
    }
    // The last op of the block that uses each value frees it.
    llvm::DenseMap<Operation *, SmallVector<Value>> freeAfter;
    for (Operation &op : body) {
      for (Value result : op.getResults()) {
        // Gathers end at tc.release; tc.use aliases the param's storage.
        if (isa<tc::AllGatherOp, tc::UseOp>(op) || returned_.contains(result) ||
            isStoredInParam(result))
          continue;
        Operation *last = &op;
        for (Operation *user : result.getUsers()) {
          Operation *inBlock = body.findAncestorOpInBlock(*user);
          if (last->isBeforeInBlock(inBlock))
            last = inBlock;
        }
        freeAfter[last].push_back(result);
      }
    }

    for (Operation &op : body) {
      if (isa<func::ReturnOp>(op)) {
        for (Value result : op.getOperands())
          function_.outputs.push_back(buffers_.lookup(result));
        continue;
      }
      if (failed(lowerOp(op)))
        return failure();
      for (Value dead : freeAfter.lookup(&op))
        emit("free", {buffers_.lookup(dead)}, {}, op.getLoc());
    }
    return success();
  }

private:
  bool isStoredInParam(Value value) {
    return llvm::any_of(value.getUsers(), [](Operation *user) {
      return isa<tc::MaterializeOp>(user);
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
    buffer.shape.assign(type.getShape().begin(), type.getShape().end());
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

  void emit(const char *op, std::vector<int32_t> inputs,
            std::vector<int32_t> outputs, Location loc,
            std::map<std::string, plan::AttrValue> attrs = {}) {
    plan::Instruction instruction;
    instruction.op = op;
    instruction.inputs = std::move(inputs);
    instruction.outputs = std::move(outputs);
    instruction.attrs = std::move(attrs);
    instruction.loc = locationString(loc);
    function_.body.push_back(std::move(instruction));
  }

  /// The buffer a fresh value is computed into: its param's storage when it
  /// is materialized, else a new activation buffer.
  FailureOr<int32_t> resultBuffer(Value value, plan::Category category) {
    for (Operation *user : value.getUsers()) {
      if (auto materialize = dyn_cast<tc::MaterializeOp>(user)) {
        int32_t id = paramBuffer(materialize.getParam());
        buffers_[value] = id;
        return id;
      }
    }
    auto output = outputNames_.find(value);
    std::string name = output != outputNames_.end()
                           ? output->second
                           : "%" + std::to_string(nextTemp_++);
    return newBuffer(value, name, category);
  }

  LogicalResult lowerGenerator(Operation &op, double value) {
    FailureOr<int32_t> out = resultBuffer(op.getResult(0),
                                          plan::Category::Activation);
    if (failed(out))
      return failure();
    emit("alloc", {}, {*out}, op.getLoc());
    emit("fill", {}, {*out}, op.getLoc(), {{"value", value}});
    return success();
  }

  LogicalResult lowerOp(Operation &op) {
    if (auto fill = dyn_cast<tc::FillOp>(op))
      return lowerGenerator(op, fill.getValue().convertToDouble());
    if (isa<tc::ZerosOp>(op))
      return lowerGenerator(op, 0.0);
    if (isa<tc::OnesOp>(op))
      return lowerGenerator(op, 1.0);
    if (auto materialize = dyn_cast<tc::MaterializeOp>(op)) {
      int32_t target = paramBuffer(materialize.getParam());
      if (buffers_.lookup(materialize.getValue()) != target)
        return materialize.emitOpError()
               << "value is not computed in place into parameter "
               << materialize.getParamAttr()
               << "; the plan lowering supports only generator init chains";
      return success();
    }
    if (auto use = dyn_cast<tc::UseOp>(op)) {
      buffers_[use.getResult()] = paramBuffer(use.getParam());
      return success();
    }
    if (auto gather = dyn_cast<tc::AllGatherOp>(op)) {
      const plan::Param &param =
          plan_.params[paramIndex_.lookup(gather.getParam())];
      FailureOr<int32_t> out = newBuffer(gather.getResult(),
                                         param.name + ".gathered",
                                         plan::Category::Gathered);
      if (failed(out))
        return failure();
      function_.buffers[*out].bytes = param.gatheredBytes(plan_.worldSize);
      emit("alloc", {}, {*out}, op.getLoc());
      emit("all_gather", {paramBuffer(gather.getParam())}, {*out}, op.getLoc());
      return success();
    }
    if (auto release = dyn_cast<tc::ReleaseOp>(op)) {
      emit("free", {buffers_.lookup(release.getValue())}, {}, op.getLoc());
      return success();
    }
    if (auto add = dyn_cast<tc::AddOp>(op)) {
      FailureOr<int32_t> out = resultBuffer(add.getResult(),
                                            plan::Category::Activation);
      if (failed(out))
        return failure();
      emit("alloc", {}, {*out}, op.getLoc());
      emit("add", {buffers_.lookup(add.getLhs()), buffers_.lookup(add.getRhs())},
           {*out}, op.getLoc());
      return success();
    }
    return op.emitOpError() << "has no lowering to the runtime plan";
  }

  plan::Plan &plan_;
  const llvm::StringMap<int32_t> &paramIndex_;
  plan::Function &function_;
  llvm::DenseMap<Value, int32_t> buffers_;
  llvm::DenseMap<int32_t, int32_t> paramBuffers_;
  llvm::DenseSet<Value> returned_;
  llvm::DenseMap<Value, std::string> outputNames_;
  int nextTemp_ = 0;
};

} // namespace

FailureOr<plan::Plan> lowerToPlan(ModuleOp module) {
  plan::Plan result;
  llvm::StringMap<int32_t> paramIndex;
  for (tc::ParamOp param : module.getOps<tc::ParamOp>()) {
    RankedTensorType type = param.getTensorType();
    FailureOr<plan::DType> dtype = dtypeOf(type.getElementType(), param.getLoc());
    if (failed(dtype))
      return failure();
    plan::Param lowered;
    lowered.name = param.getSymName().str();
    lowered.dtype = *dtype;
    lowered.shape.assign(type.getShape().begin(), type.getShape().end());
    lowered.device = param.getDevice().str();
    lowered.unit = param.getUnit().value_or("").str();
    lowered.isBuffer = param.getIsBuffer();
    if (auto shard = param.getShardAttr()) {
      lowered.chunkRows = shard.getChunkRows();
      result.worldSize = shard.getWorldSize();
    }
    paramIndex[lowered.name] = static_cast<int32_t>(result.params.size());
    result.params.push_back(std::move(lowered));
  }
  if (auto attr = module->getAttrOfType<IntegerAttr>("tc.world_size"))
    result.worldSize = attr.getInt();

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
