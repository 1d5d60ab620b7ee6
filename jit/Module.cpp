//===- Module.cpp - modules, parameter registration, init programs --------===//
#include "jit/Trace.h"

#include "compiler/Graph.h"
#include "compiler/GraphWriter.h"

#include <algorithm>
#include <optional>

namespace shardc {

using json = nlohmann::json;

namespace {

struct ThreadState {
  std::string device = "cpu";
  int deviceGuards = 0;
  std::optional<std::string> pendingPath;
  std::string pendingDevice;
  std::vector<std::string> scopes;
};

ThreadState &state() {
  thread_local ThreadState s;
  return s;
}

std::string where(const std::string &file, int64_t line) {
  return file + ":" + std::to_string(line);
}

} // namespace

namespace init {
namespace {
Init gen(const char *op, std::vector<std::pair<std::string, double>> numbers = {},
         std::vector<std::pair<std::string, std::string>> strings = {}) {
  InitOp result(op, std::move(numbers), std::move(strings));
  return Init(std::move(result));
}
} // namespace
Init fill(double value) { return gen("fill", {{"value", value}}); }
Init zeros() { return gen("zeros"); }
Init ones() { return gen("ones"); }
Init uniform(double a, double b) { return gen("uniform", {{"a", a}, {"b", b}}); }
Init normal(double mean, double std) {
  return gen("normal", {{"mean", mean}, {"std", std}});
}
Init trunc_normal(double mean, double std, double a, double b) {
  return gen("trunc_normal", {{"mean", mean}, {"std", std}, {"a", a}, {"b", b}});
}
Init kaiming_uniform(double a, const std::string &mode, const std::string &nonlinearity) {
  return gen("kaiming_uniform", {{"a", a}}, {{"mode", mode}, {"nonlinearity", nonlinearity}});
}
Init kaiming_normal(double a, const std::string &mode, const std::string &nonlinearity) {
  return gen("kaiming_normal", {{"a", a}}, {{"mode", mode}, {"nonlinearity", nonlinearity}});
}
Init xavier_uniform(double gain) { return gen("xavier_uniform", {{"gain", gain}}); }
Init xavier_normal(double gain) { return gen("xavier_normal", {{"gain", gain}}); }
Init eye() { return gen("eye"); }
Init arange(double start, double step) {
  return gen("arange", {{"start", start}, {"step", step}});
}
Init orthogonal(double gain) { return gen("orthogonal", {{"gain", gain}}); }
} // namespace init

namespace detail {

const std::string &currentScope() {
  static const std::string root;
  const auto &scopes = state().scopes;
  return scopes.empty() ? root : scopes.back();
}

PendingPath::PendingPath(std::string path, std::string device) {
  state().pendingPath = std::move(path);
  state().pendingDevice = std::move(device);
}
PendingPath::~PendingPath() { state().pendingPath.reset(); }

json initJson(const Init &init) {
  json chain = json::array();
  for (const InitOp &op : init.ops()) {
    json step = {{"op", op.op}};
    for (const auto &[key, value] : op.numbers)
      step[key] = compiler::floatJson(value);  // inf / NaN as the format spells them
    for (const auto &[key, value] : op.strings)
      step[key] = value;
    if (op.has_shape)
      step["shape"] = op.shape;
    chain.push_back(std::move(step));
  }
  return chain;
}

json paramJson(const ParameterSpec &spec) {
  json param = {{"name", spec.name},
                {"shape", spec.shape},
                {"dtype", dtype_name(spec.dtype)},
                {"device", spec.device},
                {"init", initJson(spec.init)}};
  if (!spec.unit.empty())
    param["unit"] = spec.unit;
  return param;
}

} // namespace detail

DeviceGuard::DeviceGuard(std::string device) : previous_(state().device) {
  state().device = std::move(device);
  ++state().deviceGuards;
}
DeviceGuard::~DeviceGuard() {
  state().device = previous_;
  --state().deviceGuards;
}

Module::Module() {
  ThreadState &s = state();
  if (s.pendingPath) {
    path_ = *s.pendingPath;
    s.pendingPath.reset(); // members constructed later are not this child
    device_ = s.deviceGuards > 0 ? s.device : s.pendingDevice;
  } else {
    device_ = s.device;
  }
}

Module::~Module() = default;

Module::Scope::Scope(const Module &module) { state().scopes.push_back(module.path()); }
Module::Scope::~Scope() { state().scopes.pop_back(); }

void Module::checkChildName(const Name &name) const {
  if (name.value.empty())
    throw TraceError("a submodule needs a non-empty name", name.loc, path_);
  for (const auto &[existing, child] : children_)
    if (existing == name.value)
      throw TraceError("submodule '" + name.value + "' is already registered",
                       name.loc, path_);
}

void Module::adopt(const Name &name, std::shared_ptr<Module> child) {
  children_.emplace_back(name.value, std::move(child));
}

void Module::register_module(Name name, std::shared_ptr<Module> child) {
  checkChildName(name);
  if (!child)
    throw TraceError("register_module('" + name.value + "'): null module", name.loc, path_);
  child->rename(join(name.value));
  adopt(name, std::move(child));
}

void Module::rename(const std::string &path) {
  path_ = path;
  for (auto &[name, child] : children_)
    child->rename(join(name));
}

void Module::addSpec(Name name, std::vector<int64_t> shape, Init init, DType dtype,
                     bool isBuffer) {
  const char *what = isBuffer ? "buffer" : "parameter";
  if (name.value.empty())
    throw TraceError(std::string("a ") + what + " needs a non-empty name", name.loc, path_);
  for (const ParameterSpec &existing : params_)
    if (existing.local_name == name.value)
      throw TraceError(std::string(what) + " '" + name.value +
                           "' is registered twice (first at " +
                           where(existing.file, existing.line) + ")",
                       name.loc, path_);
  if (init.ops().empty())
    throw TraceError(std::string(what) + " '" + name.value +
                         "': the init program is empty (start it with a "
                         "generator, e.g. shardc::init::normal())",
                     name.loc, path_);
  ParameterSpec spec;
  spec.local_name = name.value;
  spec.name = join(name.value);
  spec.shape = std::move(shape);
  spec.dtype = dtype;
  spec.device = device_;
  spec.is_buffer = isBuffer;
  spec.init = std::move(init);
  TraceError probe("", name.loc, path_);
  spec.file = probe.file();
  spec.line = probe.line();

  // The graph importer's checks (shape, dtype, device, init chain), now.
  json doc = {{"format", "shardc-graph"},
              {"version", compiler::kGraphFormatVersion},
              {isBuffer ? "buffers" : "parameters", json::array({detail::paramJson(spec)})}};
  try {
    (void)compiler::parseGraph(doc.dump(), "<param>");
  } catch (const compiler::GraphError &error) {
    std::string message = error.what();
    std::string prefix = std::string("<param>: ") + (isBuffer ? "buffers" : "parameters") + "[0]";
    std::string rest = message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
    if (rest.rfind(".", 0) == 0)
      rest = rest.substr(1);
    else if (rest.rfind(": ", 0) == 0)
      rest = rest.substr(2);
    throw TraceError(std::string(what) + " '" + name.value + "': " + rest, name.loc, path_);
  }
  params_.push_back(std::move(spec));
}

void Module::register_parameter(Name name, std::vector<int64_t> shape, Init init,
                                DType dtype) {
  addSpec(std::move(name), std::move(shape), std::move(init), dtype, false);
}

void Module::register_buffer(Name name, std::vector<int64_t> shape, Init init,
                             DType dtype) {
  addSpec(std::move(name), std::move(shape), std::move(init), dtype, true);
}

void Module::set_unit(const std::string &unit) { unit_ = unit; }

bool Module::has_param(std::string_view name) const {
  return std::any_of(params_.begin(), params_.end(),
                     [&](const ParameterSpec &p) { return p.local_name == name; });
}

Tensor Module::param(std::string_view name, SourceLocation loc) const {
  if (!has_param(name)) {
    std::string known;
    for (const ParameterSpec &p : params_)
      known += (known.empty() ? "" : ", ") + p.local_name;
    throw TraceError("undefined parameter '" + std::string(name) + "' (" +
                         (known.empty() ? "this module registers none"
                                        : "this module registers: " + known) +
                         ")",
                     loc, path_);
  }
  std::shared_ptr<detail::Trace> &trace = detail::Trace::active();
  if (!trace)
    throw TraceError("param('" + std::string(name) +
                         "'): no trace is active (call it from forward, under "
                         "shardc::jit)",
                     loc, path_);
  std::string full = join(std::string(name));
  if (!trace->has(full))
    throw TraceError("parameter '" + full +
                         "' is not part of the traced model (was its module "
                         "registered with add() or register_module()?)",
                     loc, path_);
  return trace->value(full);
}

void Module::collect(std::vector<ParameterSpec> &out, const std::string &unit) const {
  const std::string &mine = unit_.empty() ? unit : unit_;
  for (const ParameterSpec &p : params_) {
    ParameterSpec spec = p;
    spec.name = join(p.local_name);
    if (!mine.empty())
      spec.unit = mine;
    out.push_back(std::move(spec));
  }
  for (const auto &[name, child] : children_)
    child->collect(out, mine);
}

std::vector<ParameterSpec> Module::named_parameters() const {
  std::vector<ParameterSpec> out;
  collect(out, "");
  return out;
}

} // namespace shardc
