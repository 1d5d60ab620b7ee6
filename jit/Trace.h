//===- Trace.h - the state of one trace (internal) ---------------*- C++ -*-===//
//
// A Trace holds the forward nodes recorded so far as graph-format JSON
// (docs/graph-format.md) and the type of every value. Each op is checked by
// the graph importer's own node rules (compiler/GraphNodes.h) the moment it
// is recorded, so trace-time errors and file-time errors are the same rules,
// and the finished trace always parses.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "shardc/module.h"
#include "shardc/tensor.h"

#include "compiler/GraphNodes.h"
#include "runtime/Plan.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

namespace shardc::detail {

plan::DType toPlan(DType dtype);
DType fromPlan(plan::DType dtype);

/// The module path traced ops are attributed to ("" = root).
const std::string &currentScope();

class Trace : public std::enable_shared_from_this<Trace> {
public:
  /// The trace being recorded on this thread (null outside shardc::jit).
  static std::shared_ptr<Trace> &active();

  /// Declares a parameter, buffer or input value.
  void define(const std::string &name, const std::vector<int64_t> &shape,
              DType dtype);
  /// A proxy of a declared value.
  Tensor value(const std::string &name);
  bool has(const std::string &name) const { return types_.count(name) > 0; }

  /// Records `op` on `inputs` with attributes `attrs`; returns its results
  /// (`results` of them: split has one per piece).
  std::vector<Tensor> record(const std::string &op,
                             const std::vector<const Tensor *> &inputs,
                             nlohmann::json attrs, const SourceLocation &loc,
                             size_t results = 1);

  const nlohmann::json &nodes() const { return nodes_; }
  nlohmann::json &mutableNodes() { return nodes_; }

  /// The step counter dropout's masks read (kRngStep, a 0-d float32 buffer
  /// the finished graph declares and advances by one per forward), and the
  /// next dropout's stream: the FNV-1a hash of its scope and its number.
  Tensor rngStep();
  uint32_t nextDropoutStream(const std::string &scope);
  bool usesRng() const { return usesRng_; }

private:
  bool usesRng_ = false;
  int64_t dropouts_ = 0;
  compiler::ValueTypes types_;
  nlohmann::json nodes_ = nlohmann::json::array();
  int64_t counter_ = 0;
};

/// The name of the JIT's dropout step counter (docs/jit.md): the one that
/// save_optimizer writes and a state file resumes (runtime/Plan.h).
inline constexpr const char *kRngStep = plan::kRngStepBuffer;

/// Makes a graph-format init chain.
nlohmann::json initJson(const Init &init);
/// Makes a graph-format parameter entry.
nlohmann::json paramJson(const ParameterSpec &spec);

} // namespace shardc::detail
