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
  case plan::DType::I64:
    return builder.getI64Type();
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

/// Builds one init step; `input` is the previous step's value (null for
/// the generator that starts the chain), `position` its index in the chain.
Value buildInitStep(OpBuilder &builder, Location loc, const InitStep &step,
                    Value input, RankedTensorType type, int64_t position) {
  auto f64 = [&](const char *key) {
    return builder.getF64FloatAttr(step.number(key));
  };
  auto i64 = [&](int64_t value) { return builder.getI64IntegerAttr(value); };
  auto pos = i64(position);
  TypeAttr none;
  AffineMapAttr noMap;
  const std::string &op = step.op;
  // Generators.
  if (op == "fill")
    return builder.create<tc::FillOp>(loc, type, f64("value"), none, none, noMap);
  if (op == "zeros")
    return builder.create<tc::ZerosOp>(loc, type, none, none, noMap);
  if (op == "ones")
    return builder.create<tc::OnesOp>(loc, type, none, none, noMap);
  if (op == "uniform")
    return builder.create<tc::UniformOp>(loc, type, f64("a"), f64("b"), pos,
                                         none, none, noMap);
  if (op == "normal")
    return builder.create<tc::NormalOp>(loc, type, f64("mean"), f64("std"), pos,
                                        none, none, noMap);
  if (op == "trunc_normal")
    return builder.create<tc::TruncNormalOp>(loc, type, f64("mean"), f64("std"),
                                             f64("a"), f64("b"), pos, none,
                                             none, noMap);
  if (op == "kaiming_uniform" || op == "kaiming_normal") {
    StringAttr mode = builder.getStringAttr(step.mode);
    StringAttr nonlinearity = builder.getStringAttr(step.nonlinearity);
    if (op == "kaiming_uniform")
      return builder.create<tc::KaimingUniformOp>(
          loc, type, f64("a"), mode, nonlinearity, pos, none, none, noMap);
    return builder.create<tc::KaimingNormalOp>(loc, type, f64("a"), mode,
                                               nonlinearity, pos, none, none,
                                               noMap);
  }
  if (op == "xavier_uniform")
    return builder.create<tc::XavierUniformOp>(loc, type, f64("gain"), pos,
                                               none, none, noMap);
  if (op == "xavier_normal")
    return builder.create<tc::XavierNormalOp>(loc, type, f64("gain"), pos, none,
                                              none, noMap);
  if (op == "eye")
    return builder.create<tc::EyeOp>(loc, type, none, none, noMap);
  if (op == "arange")
    return builder.create<tc::ArangeOp>(loc, type, f64("start"), f64("step"),
                                        none, none, noMap);
  if (op == "load")
    return builder.create<tc::LoadOp>(loc, type, builder.getStringAttr(step.file),
                                      builder.getStringAttr(step.tensor), none, none,
                                      noMap);
  if (op == "norm_of")
    return builder.create<tc::NormOfOp>(loc, type, builder.getStringAttr(step.tensor),
                                        builder.getDenseI64ArrayAttr(step.ints), none, none,
                                        noMap);
  if (op == "orthogonal")
    return builder.create<tc::OrthogonalOp>(loc, type, f64("gain"), pos, none,
                                            none, noMap);
  // Pointwise ops.
  if (op == "mul")
    return builder.create<tc::MulScalarOp>(loc, input, f64("value"));
  if (op == "add")
    return builder.create<tc::AddScalarOp>(loc, input, f64("value"));
  if (op == "sub")
    return builder.create<tc::SubScalarOp>(loc, input, f64("value"));
  if (op == "div")
    return builder.create<tc::DivScalarOp>(loc, input, f64("value"));
  if (op == "clamp")
    return builder.create<tc::ClampOp>(loc, input, f64("min"), f64("max"));
  if (op == "erfinv")
    return builder.create<tc::ErfinvOp>(loc, input);
  if (op == "sqrt")
    return builder.create<tc::SqrtOp>(loc, input);
  if (op == "neg")
    return builder.create<tc::NegOp>(loc, input);
  if (op == "exp")
    return builder.create<tc::ExpOp>(loc, input);
  if (op == "log")
    return builder.create<tc::LogOp>(loc, input);
  if (op == "expm1")
    return builder.create<tc::Expm1Op>(loc, input);
  if (op == "inverse_softplus")
    return builder.create<tc::InverseSoftplusOp>(loc, input);
  if (op == "fill_rows")
    return builder.create<tc::FillRowsOp>(loc, input, f64("value"),
                                          i64(static_cast<int64_t>(step.number("start"))),
                                          i64(static_cast<int64_t>(step.number("end"))));
  // Views.
  auto integer = [&](const char *key) {
    return static_cast<int64_t>(step.number(key));
  };
  if (op == "reshape")
    return builder.create<tc::ReshapeOp>(loc, type, input);
  if (op == "transpose")
    return builder.create<tc::TransposeOp>(loc, type, input,
                                           i64(integer("dim0")),
                                           i64(integer("dim1")));
  if (op == "permute")
    return builder.create<tc::PermuteOp>(loc, type, input,
                                         builder.getDenseI64ArrayAttr(step.ints));
  assert(op == "slice" && "the graph reader admits no other init op");
  return builder.create<tc::SliceOp>(loc, type, input, i64(integer("dim")),
                                     i64(integer("start")), i64(integer("end")),
                                     i64(integer("step")));
}

void buildInit(OpBuilder &builder, ModuleOp module, const Graph &graph) {
  MLIRContext &context = *module.getContext();
  builder.setInsertionPointToEnd(module.getBody());
  auto init = builder.create<func::FuncOp>(
      jsonLocation(context, graph, "parameters"), tc::kInitFunctionName,
      builder.getFunctionType({}, {}));
  builder.setInsertionPointToStart(init.addEntryBlock());
  for (const GraphParam &param : graph.params) {
    Value value;
    for (auto [position, step] : llvm::enumerate(param.init))
      value = buildInitStep(builder, jsonLocation(context, graph, step.path),
                            step, value,
                            tensorType(context, step.shape, param.dtype),
                            static_cast<int64_t>(position));
    builder.create<tc::MaterializeOp>(jsonLocation(context, graph, param.path),
                                      value, param.name);
  }
  builder.create<func::ReturnOp>(init.getLoc());
}

/// Builds one forward node; `type` is its (first) result's type.
SmallVector<Value> buildNode(OpBuilder &builder, Location loc,
                             const GraphNode &node, ArrayRef<Value> in,
                             RankedTensorType type) {
  auto f64 = [&](const char *key) {
    return builder.getF64FloatAttr(node.number(key));
  };
  auto i64 = [&](int64_t value) { return builder.getI64IntegerAttr(value); };
  const std::string &op = node.op;
  if (node.familyOp) {
    // The op table's family ops: one generic op, attributes as read.
    auto table = builder.create<tc::TableOp>(loc, type, builder.getStringAttr(op), in);
    for (const auto &[name, value] : node.attrs)
      table->setAttr(name, tc::tableAttr(builder, value));
    return {table};
  }
  if (op == "add")
    return {builder.create<tc::AddOp>(loc, type, in[0], in[1])};
  if (op == "sub")
    return {builder.create<tc::SubOp>(loc, type, in[0], in[1])};
  if (op == "mul")
    return {builder.create<tc::MulOp>(loc, type, in[0], in[1])};
  if (op == "div")
    return {builder.create<tc::DivOp>(loc, type, in[0], in[1])};
  if (op == "embedding")
    return {builder.create<tc::EmbeddingOp>(loc, type, in[0], in[1])};
  if (op == "linear")
    return {builder.create<tc::LinearOp>(loc, type, in[0], in[1],
                                         in.size() > 2 ? in[2] : Value())};
  if (op == "matmul")
    return {builder.create<tc::MatmulOp>(loc, type, in[0], in[1])};
  if (op == "gelu")
    return {builder.create<tc::GeluOp>(
        loc, in[0], builder.getStringAttr(node.strings.at("approximate")))};
  if (op == "silu")
    return {builder.create<tc::SiluOp>(loc, in[0])};
  if (op == "relu")
    return {builder.create<tc::ReluOp>(loc, in[0])};
  if (op == "layer_norm")
    return {builder.create<tc::LayerNormOp>(loc, type, in[0], in[1], in[2],
                                            f64("eps"))};
  if (op == "rms_norm")
    return {builder.create<tc::RmsNormOp>(loc, type, in[0], in[1], f64("eps"))};
  if (op == "softmax")
    return {builder.create<tc::SoftmaxOp>(loc, in[0], i64(node.integer("dim")))};
  if (op == "scaled_dot_product_attention")
    return {builder.create<tc::SdpaOp>(loc, type, in[0], in[1], in[2],
                                       in.size() > 3 ? in[3] : Value(), node.causal ? builder.getUnitAttr() : UnitAttr(),
                                       f64("scale"))};
  if (op == "rotary_embedding")
    return {builder.create<tc::RopeOp>(loc, in[0], f64("theta"))};
  if (op == "reshape" || op == "detach") // detach: the same values (an alias)
    return {builder.create<tc::ReshapeOp>(loc, type, in[0])};
  if (op == "transpose")
    return {builder.create<tc::TransposeOp>(loc, type, in[0],
                                            i64(node.integer("dim0")),
                                            i64(node.integer("dim1")))};
  if (op == "permute")
    return {builder.create<tc::PermuteOp>(loc, type, in[0],
                                          builder.getDenseI64ArrayAttr(node.ints))};
  if (op == "slice")
    return {builder.create<tc::SliceOp>(
        loc, type, in[0], i64(node.integer("dim")), i64(node.integer("start")),
        i64(node.integer("end")), i64(node.integer("step")))};
  if (op == "cat")
    return {builder.create<tc::CatOp>(loc, type, in, i64(node.integer("dim")))};
  if (op == "cross_entropy")
    return {builder.create<tc::CrossEntropyOp>(loc, type, in[0], in[1],
                                               i64(ignoredTarget(node)))};
  assert(op == "split" && "the graph reader admits no other op");
  // A split is one slice per piece.
  SmallVector<Value> pieces;
  int64_t dim = node.integer("dim"), start = 0;
  auto source = cast<RankedTensorType>(in[0].getType());
  for (int64_t size : node.ints) {
    SmallVector<int64_t> shape(source.getShape());
    shape[dim] = size;
    pieces.push_back(builder.create<tc::SliceOp>(
        loc, RankedTensorType::get(shape, source.getElementType()), in[0],
        i64(dim), i64(start), i64(start + size), i64(1)));
    start += size;
  }
  return pieces;
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
    for (auto [name, shape] : llvm::zip(node.names, node.shapes))
      typeOf[name] = tensorType(context, shape, node.dtype);
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
    SmallVector<Value> operands;
    for (const std::string &input : node.inputs)
      operands.push_back(valueOf(input));
    Location loc = jsonLocation(context, graph, node.path);
    SmallVector<Value> results =
        buildNode(builder, loc, node, operands, typeOf[node.names[0]]);
    for (auto [name, result] : llvm::zip(node.names, results))
      values[name] = result;
  }
  SmallVector<Value> results;
  for (const std::string &output : graph.outputs)
    results.push_back(valueOf(output));
  // Buffer updates last: every read of a buffer precedes its new value.
  for (const BufferUpdate &update : graph.updates)
    builder.create<tc::UpdateBufferOp>(
        jsonLocation(context, graph, update.path),
        FlatSymbolRefAttr::get(&context, update.buffer), valueOf(update.value));
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
        param.isBuffer, tc::ShardAttr(), param.isBuffer && !param.persistent,
        param.tiedNames.empty() ? ArrayAttr() : builder.getStrArrayAttr(
                                                    SmallVector<StringRef>(param.tiedNames.begin(),
                                                                           param.tiedNames.end())));
    (void)op;
  }
  buildInit(builder, *module, graph);
  if (!graph.outputs.empty())
    buildForward(builder, *module, graph);
  return module;
}

} // namespace shardc::compiler
