//===- Tensor.cpp - the Tensor proxy and the trace it records into --------===//
#include "jit/Trace.h"

#include "compiler/GraphReader.h"
#include "runtime/Philox.h"

#include <filesystem>

namespace shardc {

using json = nlohmann::json;

namespace {

/// The call site's file, relative to the working directory when below it.
std::string displayFile(const char *file) {
  std::string path = file ? file : "";
  std::error_code error;
  std::filesystem::path cwd = std::filesystem::current_path(error);
  if (!error && !path.empty() && path[0] == '/') {
    std::string prefix = cwd.string();
    if (!prefix.empty() && prefix.back() != '/')
      prefix += '/';
    if (path.rfind(prefix, 0) == 0)
      return path.substr(prefix.size());
  }
  return path;
}

std::string traceMessage(const std::string &reason, const SourceLocation &where,
                         const std::string &module) {
  std::string place = displayFile(where.file_name()) + ":" +
                      std::to_string(where.line()) + ": ";
  std::string scope = module.empty() ? "in the root module: "
                                     : "in module '" + module + "': ";
  return place + scope + reason;
}

} // namespace

TraceError::TraceError(const std::string &reason, const SourceLocation &where,
                       std::string modulePath)
    : Error(traceMessage(reason, where, modulePath)),
      file_(displayFile(where.file_name())), line_(where.line()),
      module_(std::move(modulePath)), reason_(reason) {}

const char *dtype_name(DType dtype) {
  return plan::dtypeName(detail::toPlan(dtype));
}
int64_t dtype_size(DType dtype) { return plan::dtypeSize(detail::toPlan(dtype)); }
std::string shape_string(const std::vector<int64_t> &shape) {
  return compiler::shapeString(shape);
}

namespace detail {

plan::DType toPlan(DType dtype) {
  switch (dtype) {
  case DType::Float32: return plan::DType::F32;
  case DType::Float64: return plan::DType::F64;
  case DType::Float16: return plan::DType::F16;
  case DType::BFloat16: return plan::DType::BF16;
  case DType::Int64: return plan::DType::I64;
  }
  return plan::DType::F32;
}

DType fromPlan(plan::DType dtype) {
  switch (dtype) {
  case plan::DType::F32: return DType::Float32;
  case plan::DType::F64: return DType::Float64;
  case plan::DType::F16: return DType::Float16;
  case plan::DType::BF16: return DType::BFloat16;
  case plan::DType::I64: return DType::Int64;
  }
  return DType::Float32;
}

std::shared_ptr<Trace> &Trace::active() {
  thread_local std::shared_ptr<Trace> trace;
  return trace;
}

void Trace::define(const std::string &name, const std::vector<int64_t> &shape,
                   DType dtype) {
  types_[name] = {shape, toPlan(dtype)};
}

Tensor Trace::rngStep() {
  if (!usesRng_) {
    if (types_.count(kRngStep))
      throw Error(std::string("dropout: the trace already has a value named '") + kRngStep +
                  "', the name of dropout's step counter");
    define(kRngStep, {}, DType::Float32);
    usesRng_ = true;
  }
  return value(kRngStep);
}

uint32_t Trace::nextDropoutStream(const std::string &scope) {
  const std::string key = scope + "#dropout" + std::to_string(dropouts_++);
  return runtime::philox::fnv1a32(key.data(), key.size());
}

Tensor Trace::value(const std::string &name) {
  const auto &[shape, dtype] = types_.at(name);
  Tensor t;
  t.trace_ = shared_from_this();
  t.name_ = name;
  t.shape_ = shape;
  t.dtype_ = fromPlan(dtype);
  return t;
}

std::vector<Tensor> Trace::record(const std::string &op,
                                  const std::vector<const Tensor *> &inputs,
                                  json attrs, const SourceLocation &loc,
                                  size_t results) {
  const std::string &scope = currentScope();
  json names = json::array();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor &t = *inputs[i];
    if (!t.defined())
      throw TraceError(op + ": operand " + std::to_string(i) +
                           " is an undefined Tensor (default-constructed)",
                       loc, scope);
    if (t.trace_.get() != this)
      throw TraceError(op + ": operand '" + t.name() +
                           "' belongs to another trace (a Tensor kept from an "
                           "earlier shardc::jit call)",
                       loc, scope);
    names.push_back(t.name());
  }
  json node = std::move(attrs);
  node["op"] = op;
  node["inputs"] = names;
  std::string base = (scope.empty() ? "" : scope + "/") + op + "#" +
                     std::to_string(counter_++);
  if (op == "split") {
    json pieces = json::array();
    for (size_t i = 0; i < results; ++i)
      pieces.push_back(base + "." + std::to_string(i));
    node["names"] = pieces;
  } else {
    node["name"] = base;
  }

  // The importer's own rules; its message "SRC: node[.key]: reason" is
  // reworded around the C++ call site.
  static const std::string kSource = "<trace>";
  compiler::GraphReader reader(kSource);
  compiler::GraphNode checked;
  try {
    checked = compiler::readNode(reader, node, "node", types_);
  } catch (const compiler::GraphError &error) {
    std::string message = error.what();
    std::string prefix = kSource + ": node";
    std::string rest = message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
    std::string reason;
    if (rest.rfind(": ", 0) == 0) {
      reason = rest.substr(2);
    } else if (rest.rfind(".", 0) == 0) {
      size_t colon = rest.find(": ");
      reason = op + ": " + rest.substr(1, colon - 1) + ": " +
               (colon == std::string::npos ? "" : rest.substr(colon + 2));
    } else {
      reason = rest;
    }
    throw TraceError(reason, loc, scope);
  }
  std::vector<Tensor> out;
  for (size_t i = 0; i < checked.names.size(); ++i) {
    types_[checked.names[i]] = {checked.shapes[i], checked.dtype};
    out.push_back(value(checked.names[i]));
  }
  nodes_.push_back(std::move(node));
  return out;
}

} // namespace detail

namespace {

Tensor one(const std::string &op, std::vector<const Tensor *> inputs, json attrs,
           const SourceLocation &loc) {
  std::shared_ptr<detail::Trace> &trace = detail::Trace::active();
  if (!trace)
    throw TraceError(op + ": no trace is active (Tensor ops run inside "
                          "forward, under shardc::jit)",
                     loc, detail::currentScope());
  return trace->record(op, inputs, std::move(attrs), loc)[0];
}

} // namespace

int64_t Tensor::size(int64_t d) const {
  int64_t r = rank();
  int64_t k = d < 0 ? d + r : d;
  if (k < 0 || k >= r)
    throw Error("Tensor::size: dim " + std::to_string(d) + " out of range for '" +
                name_ + "' " + shape_string(shape_));
  return shape_[static_cast<size_t>(k)];
}

Tensor Tensor::reshape(std::vector<int64_t> shape, SourceLocation loc) const {
  return one("reshape", {this}, {{"shape", shape}}, loc);
}
Tensor Tensor::transpose(int64_t dim0, int64_t dim1, SourceLocation loc) const {
  return one("transpose", {this}, {{"dim0", dim0}, {"dim1", dim1}}, loc);
}
Tensor Tensor::permute(std::vector<int64_t> dims, SourceLocation loc) const {
  return one("permute", {this}, {{"dims", dims}}, loc);
}
Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step,
                     SourceLocation loc) const {
  return one("slice", {this},
             {{"dim", dim}, {"start", start}, {"end", end}, {"step", step}}, loc);
}
std::vector<Tensor> Tensor::split(std::vector<int64_t> sizes, int64_t dim,
                                  SourceLocation loc) const {
  if (!detail::Trace::active())
    throw TraceError("split: no trace is active (Tensor ops run inside "
                     "forward, under shardc::jit)",
                     loc, detail::currentScope());
  size_t pieces = sizes.size();
  return detail::Trace::active()->record(
      "split", {this}, {{"dim", dim}, {"sizes", sizes}}, loc, pieces);
}
Tensor Tensor::softmax(int64_t dim, SourceLocation loc) const {
  return one("softmax", {this}, {{"dim", dim}}, loc);
}

Tensor operator+(At a, const Tensor &b) { return add(a.tensor, b, a.loc); }
Tensor operator-(At a, const Tensor &b) { return sub(a.tensor, b, a.loc); }
Tensor operator*(At a, const Tensor &b) { return mul(a.tensor, b, a.loc); }
Tensor operator/(At a, const Tensor &b) { return div(a.tensor, b, a.loc); }

Tensor add(const Tensor &a, const Tensor &b, SourceLocation loc) {
  return one("add", {&a, &b}, json::object(), loc);
}
Tensor sub(const Tensor &a, const Tensor &b, SourceLocation loc) {
  return one("sub", {&a, &b}, json::object(), loc);
}
Tensor mul(const Tensor &a, const Tensor &b, SourceLocation loc) {
  return one("mul", {&a, &b}, json::object(), loc);
}
Tensor div(const Tensor &a, const Tensor &b, SourceLocation loc) {
  return one("div", {&a, &b}, json::object(), loc);
}
Tensor linear(const Tensor &x, const Tensor &weight, SourceLocation loc) {
  return one("linear", {&x, &weight}, json::object(), loc);
}
Tensor linear(const Tensor &x, const Tensor &weight, const Tensor &bias,
              SourceLocation loc) {
  return one("linear", {&x, &weight, &bias}, json::object(), loc);
}
Tensor matmul(const Tensor &a, const Tensor &b, SourceLocation loc) {
  return one("matmul", {&a, &b}, json::object(), loc);
}
Tensor embedding(const Tensor &weight, const Tensor &ids, SourceLocation loc) {
  return one("embedding", {&weight, &ids}, json::object(), loc);
}
Tensor gelu(const Tensor &x, const std::string &approximate, SourceLocation loc) {
  return one("gelu", {&x}, {{"approximate", approximate}}, loc);
}
Tensor silu(const Tensor &x, SourceLocation loc) {
  return one("silu", {&x}, json::object(), loc);
}
Tensor dropout(const Tensor &x, double p, SourceLocation loc) {
  std::shared_ptr<detail::Trace> &trace = detail::Trace::active();
  if (!trace)
    throw TraceError("dropout: no trace is active (Tensor ops run inside forward, under "
                     "shardc::jit)",
                     loc, detail::currentScope());
  if (p == 0.0) return x;
  const Tensor step = trace->rngStep();
  const uint32_t stream = trace->nextDropoutStream(detail::currentScope());
  return one("dropout", {&x, &step}, {{"p", p}, {"stream", stream}}, loc);
}

Tensor relu(const Tensor &x, SourceLocation loc) {
  return one("relu", {&x}, json::object(), loc);
}
Tensor softmax(const Tensor &x, int64_t dim, SourceLocation loc) {
  return one("softmax", {&x}, {{"dim", dim}}, loc);
}
Tensor layer_norm(const Tensor &x, const Tensor &weight, const Tensor &bias,
                  double eps, SourceLocation loc) {
  return one("layer_norm", {&x, &weight, &bias}, {{"eps", eps}}, loc);
}
Tensor rms_norm(const Tensor &x, const Tensor &weight, double eps,
                SourceLocation loc) {
  return one("rms_norm", {&x, &weight}, {{"eps", eps}}, loc);
}
Tensor scaled_dot_product_attention(const Tensor &q, const Tensor &k,
                                    const Tensor &v, bool causal,
                                    std::optional<double> scale,
                                    SourceLocation loc) {
  json attrs = {{"causal", causal}};
  if (scale)
    attrs["scale"] = *scale;
  return one("scaled_dot_product_attention", {&q, &k, &v}, std::move(attrs), loc);
}
Tensor scaled_dot_product_attention(const Tensor &q, const Tensor &k,
                                    const Tensor &v, const Tensor &mask, bool causal,
                                    std::optional<double> scale,
                                    SourceLocation loc) {
  json attrs = {{"causal", causal}};
  if (scale)
    attrs["scale"] = *scale;
  return one("scaled_dot_product_attention", {&q, &k, &v, &mask}, std::move(attrs), loc);
}
Tensor rotary_embedding(const Tensor &x, double theta, SourceLocation loc) {
  return one("rotary_embedding", {&x}, {{"theta", theta}}, loc);
}
Tensor cat(const std::vector<Tensor> &tensors, int64_t dim, SourceLocation loc) {
  std::vector<const Tensor *> inputs;
  for (const Tensor &t : tensors)
    inputs.push_back(&t);
  return one("cat", inputs, {{"dim", dim}}, loc);
}
Tensor cross_entropy(const Tensor &logits, const Tensor &targets, int64_t ignore_index,
                     SourceLocation loc) {
  json attributes = json::object();
  if (ignore_index != -100) attributes["ignore_index"] = ignore_index;
  return one("cross_entropy", {&logits, &targets}, attributes, loc);
}

} // namespace shardc
