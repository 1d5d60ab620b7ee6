//===- GraphToTc.cpp - build a tc module from a validated graph -----------===//
#include "compiler/GraphToTc.h"
#include "dialects/tc/TcOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;

namespace shardc::compiler {
namespace {

Type elementType(MLIRContext &context, plan::DType dtype) {
  Builder builder(&context);
  switch (dtype) {
  case plan::DType::F32:
    return builder.getF32Type();
  case plan::DType::F64:
    return builder.getF64Type();
  case plan::DType::F16:
    return builder.getF16Type();
  case plan::DType::BF16:
    return builder.getBF16Type();
  }
  llvm_unreachable("unknown dtype");
}

RankedTensorType tensorType(MLIRContext &context,
                            const std::vector<int64_t> &shape,
                            plan::DType dtype) {
  return RankedTensorType::get(shape, elementType(context, dtype));
}

/// A location that names the graph file and the JSON path of the element.
Location jsonLocation(MLIRContext &context, const Graph &graph,
                      const std::string &path) {
  return NameLoc::get(StringAttr::get(&context, path),
                      FileLineColLoc::get(&context, graph.sourceName, 0, 0));
}

Value buildGenerator(OpBuilder &builder, Location loc, const InitStep &step,
                     RankedTensorType type) {
  if (step.op == "zeros")
    return builder.create<tc::ZerosOp>(loc, type, TypeAttr()).getResult();
  if (step.op == "ones")
    return builder.create<tc::OnesOp>(loc, type, TypeAttr()).getResult();
  return builder
      .create<tc::FillOp>(loc, type, builder.getF64FloatAttr(step.value),
                          TypeAttr())
      .getResult();
}

void buildInit(OpBuilder &builder, ModuleOp module, const Graph &graph) {
  MLIRContext &context = *module.getContext();
  builder.setInsertionPointToEnd(module.getBody());
  auto init = builder.create<func::FuncOp>(
      jsonLocation(context, graph, "parameters"), tc::kInitFunctionName,
      builder.getFunctionType({}, {}));
  builder.setInsertionPointToStart(init.addEntryBlock());
  for (const GraphParam &param : graph.params) {
    RankedTensorType type = tensorType(context, param.shape, param.dtype);
    Value value;
    for (const InitStep &step : param.init)
      value = buildGenerator(builder, jsonLocation(context, graph, step.path),
                             step, type);
    builder.create<tc::MaterializeOp>(jsonLocation(context, graph, param.path),
                                      value, param.name);
  }
  builder.create<func::ReturnOp>(init.getLoc());
}

void buildForward(OpBuilder &builder, ModuleOp module, const Graph &graph) {
  MLIRContext &context = *module.getContext();
  SmallVector<Type> argTypes;
  for (const GraphInput &input : graph.inputs)
    argTypes.push_back(tensorType(context, input.shape, input.dtype));

  // Result types come from whatever each output name refers to.
  llvm::StringMap<RankedTensorType> typeOf;
  for (const GraphParam &param : graph.params)
    typeOf[param.name] = tensorType(context, param.shape, param.dtype);
  for (const GraphInput &input : graph.inputs)
    typeOf[input.name] = tensorType(context, input.shape, input.dtype);
  for (const GraphNode &node : graph.nodes)
    typeOf[node.name] = tensorType(context, node.shape, node.dtype);
  SmallVector<Type> resultTypes;
  for (const std::string &output : graph.outputs)
    resultTypes.push_back(typeOf[output]);

  builder.setInsertionPointToEnd(module.getBody());
  auto forward = builder.create<func::FuncOp>(
      jsonLocation(context, graph, "nodes"), tc::kForwardFunctionName,
      builder.getFunctionType(argTypes, resultTypes));
  for (auto [i, input] : llvm::enumerate(graph.inputs))
    forward.setArgAttr(i, "tc.name", builder.getStringAttr(input.name));
  for (auto [i, output] : llvm::enumerate(graph.outputs))
    forward.setResultAttr(i, "tc.name", builder.getStringAttr(output));

  Block *body = forward.addEntryBlock();
  builder.setInsertionPointToStart(body);
  llvm::StringMap<Value> values;
  for (auto [i, input] : llvm::enumerate(graph.inputs))
    values[input.name] = body->getArgument(i);
  llvm::StringMap<const GraphParam *> params;
  for (const GraphParam &param : graph.params)
    params[param.name] = &param;

  // Parameters are read where first needed, once per function.
  auto valueOf = [&](const std::string &name) -> Value {
    if (Value value = values.lookup(name))
      return value;
    const GraphParam &param = *params.lookup(name);
    Value use = builder.create<tc::UseOp>(
        jsonLocation(context, graph, param.path), typeOf[name],
        FlatSymbolRefAttr::get(&context, name));
    values[name] = use;
    return use;
  };
  for (const GraphNode &node : graph.nodes) {
    Value lhs = valueOf(node.inputs[0]);
    Value rhs = valueOf(node.inputs[1]);
    values[node.name] = builder.create<tc::AddOp>(
        jsonLocation(context, graph, node.path), typeOf[node.name], lhs, rhs);
  }
  SmallVector<Value> results;
  for (const std::string &output : graph.outputs)
    results.push_back(valueOf(output));
  builder.create<func::ReturnOp>(forward.getLoc(), results);
}

} // namespace

OwningOpRef<ModuleOp> buildTcModule(const Graph &graph, MLIRContext &context) {
  context.loadDialect<tc::TcDialect, func::FuncDialect>();
  OpBuilder builder(&context);
  OwningOpRef<ModuleOp> module = ModuleOp::create(
      FileLineColLoc::get(&context, graph.sourceName, 0, 0));
  builder.setInsertionPointToEnd(module->getBody());
  for (const GraphParam &param : graph.params) {
    auto op = builder.create<tc::ParamOp>(
        jsonLocation(context, graph, param.path), param.name,
        tensorType(context, param.shape, param.dtype), param.device,
        param.unit.empty() ? StringAttr() : builder.getStringAttr(param.unit),
        param.isBuffer, tc::ShardAttr());
    (void)op;
  }
  buildInit(builder, *module, graph);
  if (!graph.outputs.empty())
    buildForward(builder, *module, graph);
  return module;
}

} // namespace shardc::compiler
