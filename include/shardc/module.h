// shardc embedded JIT API: modules, named parameters and their init
// programs (docs/jit.md).
//
// Constructing a module registers its parameters: each one records a name,
// shape, dtype, the device the user meant it for, and its init program (a
// generator followed by pointwise ops, as torch.nn.init applies them). No
// storage is allocated; shardc::jit later compiles the init program so that
// every rank materializes only its own shard.
#pragma once

#include "shardc/tensor.h"

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardc {

/// One op of an init program (docs/graph-format.md, "Init chains").
struct InitOp {
  InitOp() = default;
  InitOp(std::string name, std::vector<std::pair<std::string, double>> nums = {},
         std::vector<std::pair<std::string, std::string>> strs = {})
      : op(std::move(name)), numbers(std::move(nums)), strings(std::move(strs)) {}

  std::string op;
  std::vector<std::pair<std::string, double>> numbers;
  std::vector<std::pair<std::string, std::string>> strings; // kaiming mode...
  std::vector<int64_t> shape; // generator shape (when views follow), reshape
  bool has_shape = false;
};

/// A parameter's init program: a generator, then pointwise ops and views.
class Init {
public:
  Init() = default;
  explicit Init(InitOp generator) { ops_.push_back(std::move(generator)); }

  Init mul(double value) const { return with({"mul", {{"value", value}}}); }
  Init add(double value) const { return with({"add", {{"value", value}}}); }
  Init sub(double value) const { return with({"sub", {{"value", value}}}); }
  Init div(double value) const { return with({"div", {{"value", value}}}); }
  Init clamp(double min, double max) const {
    return with({"clamp", {{"min", min}, {"max", max}}});
  }
  Init erfinv() const { return with({"erfinv"}); }
  Init sqrt() const { return with({"sqrt"}); }
  Init neg() const { return with({"neg"}); }
  Init exp() const { return with({"exp"}); }
  Init log() const { return with({"log"}); }
  Init expm1() const { return with({"expm1"}); }
  /// x + log(-expm1(-x)): Mamba's dt bias is inverse_softplus of exp(uniform...).
  Init inverse_softplus() const { return with({"inverse_softplus"}); }
  Init transpose(int64_t dim0, int64_t dim1) const {
    return with({"transpose", {{"dim0", double(dim0)}, {"dim1", double(dim1)}}});
  }
  Init reshape(std::vector<int64_t> shape) const {
    InitOp op("reshape");
    op.shape = std::move(shape);
    op.has_shape = true;
    return with(std::move(op));
  }
  /// The generator makes `shape` instead of the parameter's (views follow).
  Init generate_shape(std::vector<int64_t> shape) const {
    Init result = *this;
    result.ops_.front().shape = std::move(shape);
    result.ops_.front().has_shape = true;
    return result;
  }

  const std::vector<InitOp> &ops() const { return ops_; }

private:
  Init with(InitOp op) const {
    Init result = *this;
    result.ops_.push_back(std::move(op));
    return result;
  }
  std::vector<InitOp> ops_;
};

/// Generators with torch.nn.init's defaults.
namespace init {
Init fill(double value);
Init zeros();
Init ones();
Init uniform(double a = 0.0, double b = 1.0);
Init normal(double mean = 0.0, double std = 1.0);
Init trunc_normal(double mean = 0.0, double std = 1.0, double a = -2.0,
                  double b = 2.0);
Init kaiming_uniform(double a = 0.0, const std::string &mode = "fan_in",
                     const std::string &nonlinearity = "leaky_relu");
Init kaiming_normal(double a = 0.0, const std::string &mode = "fan_in",
                    const std::string &nonlinearity = "leaky_relu");
Init xavier_uniform(double gain = 1.0);
Init xavier_normal(double gain = 1.0);
Init eye();
Init arange(double start = 0.0, double step = 1.0);
/// Not shardable: computed on one rank and scattered (docs/graph-format.md).
Init orthogonal(double gain = 1.0);
} // namespace init

/// A name given at a call site: the implicit conversion records where.
struct Name {
  std::string value;
  SourceLocation loc;
  Name(const char *name, SourceLocation where = SourceLocation::current())
      : value(name), loc(where) {}
  Name(std::string name, SourceLocation where = SourceLocation::current())
      : value(std::move(name)), loc(where) {}
};

/// What a module registered: everything the compiler needs, no storage.
struct ParameterSpec {
  std::string name;      // full name, e.g. "transformer.h.0.attn.c_attn.weight"
  std::string local_name; // within its module, e.g. "weight"
  std::vector<int64_t> shape;
  DType dtype = DType::Float32;
  std::string device;    // the device the user meant it for
  std::string unit;      // FSDP unit ("" = the default rule)
  bool is_buffer = false;
  Init init;
  std::string file;      // where it was registered
  int64_t line = 0;
};

/// While alive, modules constructed on this thread record `device` as their
/// parameters' original device (like `with torch.device(...)`). Default "cpu".
class DeviceGuard {
public:
  explicit DeviceGuard(std::string device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard &) = delete;
  DeviceGuard &operator=(const DeviceGuard &) = delete;

private:
  std::string previous_;
};

class Module;

namespace detail {
/// Sets the path the next constructed Module takes (used by Module::add).
class PendingPath {
public:
  PendingPath(std::string path, std::string device);
  ~PendingPath();
  PendingPath(const PendingPath &) = delete;
  PendingPath &operator=(const PendingPath &) = delete;
};
} // namespace detail

class Module {
public:
  Module();
  virtual ~Module();
  Module(const Module &) = delete;
  Module &operator=(const Module &) = delete;

  /// Dotted path from the root model ("" for the root), e.g. "h.0.attn".
  const std::string &path() const { return path_; }
  /// The device this module's parameters are meant for.
  const std::string &device() const { return device_; }

  /// Constructs a submodule under `name` (which may contain dots, e.g.
  /// "h.0"); its parameters are named "<path>.<name>.<param>".
  template <class M, class... Args>
  std::shared_ptr<M> add(Name name, Args &&...args) {
    checkChildName(name);
    std::shared_ptr<M> child;
    {
      detail::PendingPath pending(join(name.value), device_);
      child = std::make_shared<M>(std::forward<Args>(args)...);
    }
    adopt(name, child);
    return child;
  }
  /// Registers a module built elsewhere; it and its submodules are renamed
  /// under this module's path.
  void register_module(Name name, std::shared_ptr<Module> child);

  /// Registers a parameter (sharded by FSDP). Throws TraceError at `name`'s
  /// call site when the name is taken or the init program does not fit.
  void register_parameter(Name name, std::vector<int64_t> shape, Init init,
                          DType dtype = DType::Float32);
  /// Registers a buffer (replicated on every rank).
  void register_buffer(Name name, std::vector<int64_t> shape, Init init,
                       DType dtype = DType::Float32);
  /// Puts every parameter of this module and its submodules into FSDP unit
  /// `unit` (default: the blocks of each layer list).
  void set_unit(const std::string &unit);

  /// The proxy of parameter `name` in the trace being recorded. Throws
  /// TraceError naming the call site when there is no such parameter or no
  /// trace is active (call it from forward, under shardc::jit).
  Tensor param(std::string_view name,
               SourceLocation loc = SourceLocation::current()) const;
  bool has_param(std::string_view name) const;

  /// Every parameter and buffer of this module and its submodules, full
  /// names, own parameters first then submodules' (torch's order).
  std::vector<ParameterSpec> named_parameters() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>> &
  children() const { return children_; }

  /// While the returned guard lives, traced ops are attributed to this
  /// module in error messages. Built-in modules enter it in operator().
  class Scope {
  public:
    explicit Scope(const Module &module);
    ~Scope();
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;
  };
  Scope scope() const { return Scope(*this); }

private:
  std::string join(const std::string &name) const {
    return path_.empty() ? name : path_ + "." + name;
  }
  void checkChildName(const Name &name) const;
  void adopt(const Name &name, std::shared_ptr<Module> child);
  void rename(const std::string &path);
  void addSpec(Name name, std::vector<int64_t> shape, Init init, DType dtype,
               bool isBuffer);
  void collect(std::vector<ParameterSpec> &out, const std::string &unit) const;

  std::string path_;
  std::string device_;
  std::string unit_;
  std::vector<ParameterSpec> params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

/// A model shardc::jit can trace: forward takes the inputs declared in
/// JitOptions::inputs, in order, and returns the outputs.
class Model : public Module {
public:
  virtual std::vector<Tensor> forward(const std::vector<Tensor> &inputs) = 0;
};

} // namespace shardc
