//===- Jit.cpp - shardc::jit: trace once, compile per world size, run -----===//
#include "shardc/jit.h"

#include "jit/JitDevice.h"
#include "jit/Trace.h"

#include "compiler/Autodiff.h"
#include "compiler/CheckpointLoad.h"
#include "compiler/DataParallel.h"
#include "compiler/FuseLinearCrossEntropy.h"
#include "compiler/MasterWeights.h"
#include "compiler/MemoryBudget.h"
#include "compiler/Pipeline.h"
#include "runtime/DataParallel.h"
#include "runtime/LocalRun.h"
#include "runtime/LocalSession.h"
#include "runtime/MemoryModel.h"
#include "runtime/PlanQueries.h"
#include "runtime/RuntimeError.h"
#include "runtime/Safetensors.h"
#include "runtime/checkpoint/LoadPlan.h"
#include "runtime/checkpoint/SafetensorsHeader.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <optional>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

namespace shardc {

using json = nlohmann::json;

namespace {

/// One trace: the graph it produced, shared by every compilation of it.
struct Traced {
  compiler::Graph graph;
  std::string json;
  /// The traced forward (master weights expanded) before --grad's backward
  /// was added: the joint graph is made again from it when the head and its
  /// loss are fused to fit a memory budget.
  std::string forwardJson;
  std::map<std::string, int64_t> intBounds;
  int64_t traceCount = 0;
};

runtime::HostTensor toRuntime(const HostTensor &t) {
  return runtime::HostTensor{t.name, detail::toPlan(t.dtype), t.shape, t.data};
}
HostTensor fromRuntime(runtime::HostTensor t) {
  return HostTensor{std::move(t.name), detail::fromPlan(t.dtype), std::move(t.shape),
                    std::move(t.data)};
}

/// Renames node result `from` to `to` in the recorded nodes.
void renameValue(json &nodes, const std::string &from, const std::string &to) {
  for (json &node : nodes) {
    if (node.contains("name") && node["name"] == from)
      node["name"] = to;
    if (node.contains("names"))
      for (json &name : node["names"])
        if (name == from)
          name = to;
    for (json &input : node["inputs"])
      if (input == from)
        input = to;
  }
}

std::shared_ptr<const Traced> trace(Model &model, const JitOptions &options) {
  auto traced = std::make_shared<Traced>();
  const SourceLocation here = SourceLocation::current();
  std::vector<ParameterSpec> specs = model.named_parameters();
  auto recording = std::make_shared<detail::Trace>();
  json params = json::array(), buffers = json::array(), inputs = json::array();
  std::map<std::string, const ParameterSpec *> seen;
  for (const ParameterSpec &spec : specs) {
    if (auto it = seen.find(spec.name); it != seen.end())
      throw Error(spec.file + ":" + std::to_string(spec.line) + ": parameter '" + spec.name +
                  "' is registered twice (first at " + it->second->file + ":" +
                  std::to_string(it->second->line) + ")");
    seen[spec.name] = &spec;
    (spec.is_buffer ? buffers : params).push_back(detail::paramJson(spec));
    recording->define(spec.name, spec.shape, spec.dtype);
  }
  std::vector<Tensor> proxies;
  for (const InputSpec &input : options.inputs) {
    if (seen.count(input.name) || recording->has(input.name))
      throw Error("jit: input '" + input.name + "' has the name of a parameter or another input");
    json entry = {{"name", input.name}, {"shape", input.shape},
                  {"dtype", dtype_name(input.dtype)}};
    if (input.high > 0) {
      entry["high"] = input.high;
      traced->intBounds[input.name] = input.high;
    }
    inputs.push_back(std::move(entry));
    recording->define(input.name, input.shape, input.dtype);
    proxies.push_back(recording->value(input.name));
  }

  std::vector<Tensor> outputs;
  {
    struct Activate {
      explicit Activate(std::shared_ptr<detail::Trace> t) {
        if (detail::Trace::active())
          throw Error("jit: a trace is already being recorded on this thread "
                      "(shardc::jit called from inside forward)");
        detail::Trace::active() = std::move(t);
      }
      ~Activate() { detail::Trace::active().reset(); }
    } activate(recording);
    outputs = model.forward(proxies);
  }
  ++traced->traceCount;
  if (outputs.empty())
    throw Error("jit: forward returned no outputs");
  if (!options.output_names.empty() && options.output_names.size() != outputs.size())
    throw Error("jit: " + std::to_string(options.output_names.size()) +
                " output names given for " + std::to_string(outputs.size()) + " outputs");

  json nodes = recording->nodes();
  json outputNames = json::array();
  std::set<std::string> nodeNames;
  for (const json &node : nodes) {
    if (node.contains("name"))
      nodeNames.insert(node["name"].get<std::string>());
    if (node.contains("names"))
      for (const json &name : node["names"])
        nodeNames.insert(name.get<std::string>());
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor &out = outputs[i];
    if (!out.defined())
      throw Error("jit: forward's output " + std::to_string(i) + " is an undefined Tensor");
    std::string name = out.name();
    if (!options.output_names.empty() && options.output_names[i] != name) {
      const std::string &wanted = options.output_names[i];
      if (!nodeNames.count(name))
        throw Error("jit: output " + std::to_string(i) + " is '" + name +
                    "' (a parameter or input), which cannot be renamed to '" + wanted + "'");
      if (recording->has(wanted))
        throw Error("jit: output name '" + wanted + "' is already used in the trace");
      renameValue(nodes, name, wanted);
      nodeNames.erase(name);
      nodeNames.insert(wanted);
      name = wanted;
    }
    outputNames.push_back(name);
  }

  // dropout's step counter: declared, and advanced by one after each forward
  json updates = json::array();
  if (recording->usesRng()) {
    const std::string one = std::string(detail::kRngStep) + ".one";
    for (const auto &[name, fill] :
         {std::pair{std::string(detail::kRngStep), 0.0}, std::pair{one, 1.0}})
      buffers.push_back({{"name", name},
                         {"shape", json::array()},
                         {"dtype", "float32"},
                         {"device", "cpu"},
                         {"persistent", false},
                         {"init", json::array({{{"op", "fill"}, {"value", fill}}})}});
    const std::string next = std::string(detail::kRngStep) + ".next";
    nodes.push_back({{"name", next}, {"op", "add"}, {"inputs", {detail::kRngStep, one}}});
    updates.push_back({{"buffer", detail::kRngStep}, {"value", next}});
  }

  json doc = {{"format", "shardc-graph"},
              {"version", compiler::kGraphFormatVersion},
              {"name", options.name},
              {"parameters", params},
              {"buffers", buffers},
              {"inputs", inputs},
              {"nodes", nodes},
              {"outputs", outputNames}};
  if (!updates.empty()) doc["updates"] = updates;
  traced->json = doc.dump(1);
  if (!options.master_dtype.empty() && !compiler::isMasterDtypeName(options.master_dtype))
    throw Error("jit: master_dtype must be float32, float64 or empty, got '" +
                options.master_dtype + "'");
  // Master weights: every reader of the text (parseGraph, autodiff, the
  // data-parallel split) expands them (compiler/MasterWeights.h).
  traced->json = compiler::withMasterDtype(traced->json, options.master_dtype, options.name);
  try {
    traced->graph = compiler::parseGraph(traced->json, options.name + " (traced)");
  } catch (const compiler::GraphError &error) {
    // Every node was checked when recorded; this is a bug, not user input.
    throw Error(std::string("jit: the traced graph does not parse: ") + error.what() +
                " (from " + here.file_name() + ")");
  }
  if (!options.grad.empty() && options.data_parallel && options.optimizer.name.empty())
    throw Error("jit: grad with data_parallel is a data-parallel training step: set optimizer "
                "(its gradients exist only summed into each rank's shards; docs/training.md)");
  if (options.grad.empty() && options.fuse_linear_cross_entropy) {
    try {  // a loss evaluated without its logits (compiler/FuseLinearCrossEntropy.h)
      traced->json = compiler::fusedLossGraphText(traced->json, options.name + " (traced)",
                                                  "fuse_linear_cross_entropy");
      traced->graph = compiler::parseGraph(traced->json, options.name + " (traced)");
    } catch (const compiler::GraphError &error) {
      throw Error(std::string("jit: ") + error.what());
    }
  }
  traced->forwardJson = traced->json;
  // A data-parallel step splits the forward before it differentiates it
  // (compileGraph); the others differentiate the whole graph here.
  if (!options.grad.empty() && !options.data_parallel) {
    try {  // the joint forward and backward graph (compiler/Autodiff.h)
      compiler::JointGraph joint =
          compiler::withGradients(traced->json, options.name + " (traced)", options.grad,
                                  options.fuse_linear_cross_entropy);
      traced->json = std::move(joint.text);
      traced->graph = compiler::parseGraph(traced->json, options.name + " (traced)");
    } catch (const compiler::GraphError &error) {
      throw Error(std::string("jit: ") + error.what());
    }
  }
  return traced;
}

} // namespace

int64_t HostTensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string MemoryReport::to_string() const {
  std::ostringstream out;
  out << "rank   params held    init peak (predicted)    load peak (predicted)    "
         "forward peak (predicted)\n";
  for (const RankMemory &r : ranks)
    out << r.rank << "  " << r.param_bytes << "  " << r.init_peak << " ("
        << r.init_predicted_peak << ")  " << r.load_peak << " (" << r.load_predicted_peak
        << ")  " << r.forward_peak << " (" << r.forward_predicted_peak << ")\n";
  out << "unsharded parameters: " << unsharded_param_bytes << " bytes\n";
  return out.str();
}

struct CompiledModel::Impl {
  std::shared_ptr<const Traced> traced;
  JitOptions options;
  plan::Plan plan;
  /// The plan recomputes activations: asked for, or chosen to fit
  /// memory_budget_bytes.
  bool recomputing = false;
  /// The plan prefetches: asked for and kept within memory_budget_bytes.
  bool prefetching = false;
  std::vector<ParameterInfo> params;
  /// Every rank's device and shards; created by the first init/load/forward.
  std::unique_ptr<runtime::LocalSession> session;
  /// Measurements of the last init(), load() and forward() (empty: none yet).
  std::vector<runtime::PhaseReport> initReports, loadReports, forwardReports;
  /// Set when a load failed after the old shards were released: why the
  /// model holds no shards. Cleared by init() and a successful load().
  std::string lostShards;
};

namespace {

/// Compiles `graph` for `worldSize` ranks; `what` says what for in errors.
/// With `training` (data-parallel training), a data-parallel step of it.
plan::Plan compileGraph(const compiler::Graph &graph, int64_t worldSize,
                        const compiler::ShardOptions &shard, const std::string &what,
                        bool dataParallel = false,
                        const compiler::OptimizerOptions *optimizer = nullptr,
                        compiler::DataParallelTraining *training = nullptr) {
  mlir::MLIRContext context;
  compiler::loadTcDialects(context);
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    diagnostics += (diagnostics.empty() ? "" : "\n") + diag.str();
    return mlir::success();
  });
  mlir::FailureOr<plan::Plan> compiled = mlir::failure();
  try {
    compiled = dataParallel ? compiler::compileDataParallel(graph, compiler::graphBatchRows(graph),
                                                            worldSize, context, shard, training)
                            : compiler::compileToPlan(graph, worldSize, context, shard, optimizer);
  } catch (const compiler::GraphError &error) {  // a forward that cannot be split
    throw Error("jit: " + what + " for world size " + std::to_string(worldSize) +
                " failed: " + error.what());
  }
  if (mlir::failed(compiled))
    throw Error("jit: " + what + " for world size " + std::to_string(worldSize) +
                " failed: " + diagnostics);
  return std::move(*compiled);
}

/// JitOptions::optimizer for the compiler, or nullopt when none is set.
std::optional<compiler::OptimizerOptions> optimizerOptions(const JitOptions &options) {
  const OptimizerOptions &o = options.optimizer;
  if (o.name.empty()) return std::nullopt;
  compiler::OptimizerOptions step;
  step.optimizer = o.name;
  step.lr = o.lr;
  step.momentum = o.momentum;
  step.nesterov = o.nesterov;
  step.weightDecay = o.weight_decay;
  step.beta1 = o.beta1;
  step.beta2 = o.beta2;
  step.eps = o.eps;
  step.warmupSteps = o.warmup_steps;
  step.decaySteps = o.decay_steps;
  step.minLr = o.min_lr;
  step.maxGradNorm = o.max_grad_norm;
  step.noWeightDecay = o.no_weight_decay;
  step.stateFile = o.state_file;
  step.accumulate = o.accumulate;
  return step;
}

/// The data-parallel training step of JitOptions (data_parallel, grad and
/// an optimizer), or nullopt. `prepare` runs on its joint graphs.
std::optional<compiler::DataParallelTraining>
dataParallelTraining(const Traced &traced, const JitOptions &options,
                     std::function<void(compiler::Graph &)> prepare = {}) {
  const std::optional<compiler::OptimizerOptions> optimizer = optimizerOptions(options);
  if (!options.data_parallel || options.grad.empty() || !optimizer) return std::nullopt;
  compiler::DataParallelTraining training;
  training.graphText = traced.json;
  training.loss = options.grad;
  training.fuseLinearCrossEntropy = options.fuse_linear_cross_entropy;
  training.optimizer = *optimizer;
  training.prepare = std::move(prepare);
  return training;
}

compiler::ShardOptions shardOptions(const JitOptions &options) {
  compiler::ShardOptions shard;
  shard.unitPatterns = options.units;
  shard.prefetch = options.prefetch;
  shard.recomputeActivations = options.recompute_activations;
  return shard;
}

std::shared_ptr<CompiledModel::Impl> compile(std::shared_ptr<const Traced> traced,
                                             const JitOptions &options) {
  if (options.world_size < 1)
    throw Error("jit: world_size must be at least 1, got " +
                std::to_string(options.world_size));
  detail::checkDevice(options.device);
  if (options.backend != "local")
    throw Error("jit: backend '" + options.backend +
                "' is not supported by the embedded API yet (use \"local\")");
  if (options.io_buffer_bytes < 8)
    throw Error("jit: io_buffer_bytes must be at least 8, got " +
                std::to_string(options.io_buffer_bytes));
  if (!options.optimizer.name.empty() && options.grad.empty())
    throw Error("jit: optimizer '" + options.optimizer.name +
                "' steps on gradients; set grad to the loss output (docs/training.md)");
  if (options.recompute_activations && options.grad.empty())
    throw Error("jit: recompute_activations recomputes in the backward what the forward "
                "computed; set grad to the loss output (docs/training.md)");
  if (options.memory_budget_bytes < 0)
    throw Error("jit: memory_budget_bytes must be 0 (no budget) or positive, got " +
                std::to_string(options.memory_budget_bytes));
  if (options.optimizer.accumulate < 1)
    throw Error("jit: optimizer.accumulate must be at least 1, got " +
                std::to_string(options.optimizer.accumulate));
  if (options.optimizer.accumulate > 1 && !options.data_parallel)
    throw Error("jit: optimizer.accumulate splits each rank's rows of the global batch into "
                "micro-steps; set data_parallel (at world_size 1 the rank's rows are the "
                "whole batch)");
  auto impl = std::make_shared<CompiledModel::Impl>();
  impl->traced = traced;
  impl->options = options;
  const std::optional<compiler::OptimizerOptions> optimizer = optimizerOptions(options);
  std::optional<compiler::DataParallelTraining> training = dataParallelTraining(*traced, options);
  impl->plan = compileGraph(traced->graph, options.world_size, shardOptions(options), "compiling",
                            options.data_parallel, optimizer ? &*optimizer : nullptr,
                            training ? &*training : nullptr);
  impl->recomputing = options.recompute_activations;
  impl->prefetching = options.prefetch;
  if (options.memory_budget_bytes > 0) {
    // The trace with its head and loss fused (a joint graph made again from
    // the traced forward; a data-parallel step fuses its own), once asked for.
    std::shared_ptr<Traced> fusedTrace;
    auto fused = [&]() -> std::shared_ptr<const Traced> {
      if (!fusedTrace) {
        fusedTrace = std::make_shared<Traced>(*traced);
        if (!options.data_parallel) {
          fusedTrace->json =
              compiler::withGradients(traced->forwardJson, options.name + " (traced)", options.grad,
                                      /*fuseLinearCrossEntropy=*/true)
                  .text;
          fusedTrace->graph = compiler::parseGraph(fusedTrace->json, options.name + " (traced)");
        }
      }
      return fusedTrace;
    };
    // Trial plans at this and other world sizes (compiler/MemoryBudget.h).
    const compiler::PlanCompiler trial =
        [&](const compiler::PlanChoice &choice) -> std::optional<plan::Plan> {
      compiler::ShardOptions shard = shardOptions(options);
      shard.recomputeActivations = choice.recompute;
      shard.prefetch = choice.prefetch;
      std::optional<compiler::DataParallelTraining> resplit = training;
      if (resplit) {
        resplit->optimizer.accumulate = choice.accumulate;
        resplit->fuseLinearCrossEntropy = choice.fuse;
      }
      try {
        const bool other = choice.fuse != options.fuse_linear_cross_entropy;
        return compileGraph(other ? fused()->graph : traced->graph, choice.worldSize, shard,
                            "compiling", options.data_parallel, optimizer ? &*optimizer : nullptr,
                            resplit ? &*resplit : nullptr);
      } catch (const Error &) {  // a batch that does not split so
        return std::nullopt;
      } catch (const compiler::GraphError &) {  // nothing to fuse
        return std::nullopt;
      }
    };
    compiler::MemoryBudget budget;
    budget.bytesPerRank = options.memory_budget_bytes;
    budget.recomputing = options.recompute_activations;
    budget.prefetching = options.prefetch;
    budget.mayRecompute = !options.grad.empty() && !options.recompute_activations;
    budget.fusing = options.fuse_linear_cross_entropy;
    budget.mayFuse = !options.grad.empty() && !options.fuse_linear_cross_entropy;
    budget.accumulate = training ? training->optimizer.accumulate : 0;
    try {
      compiler::BudgetFit fit = compiler::fitMemoryBudget(std::move(impl->plan), budget, trial);
      impl->plan = std::move(fit.plan);
      impl->recomputing = fit.choice.recompute;
      impl->prefetching = fit.choice.prefetch;
      if (fit.choice.fuse && !options.fuse_linear_cross_entropy) {
        // The plan runs the fused graph: so do load(), graph_json() and
        // with_world_size() from now on.
        impl->traced = fused();
        impl->options.fuse_linear_cross_entropy = true;
      }
    } catch (const compiler::MemoryBudgetError &error) {
      throw Error(std::string("jit: ") + error.what() + " (memory_budget_bytes)");
    }
  }
  for (const plan::Param &p : impl->plan.params)
    // Not constants (grad's, an exporter's) nor the optimizer's state.
    if ((!p.isBuffer || p.persistent) && !plan::isOptimizerState(p.name))
      impl->params.push_back(ParameterInfo{p.name, p.shape, p.localShape(),
                                         detail::fromPlan(p.dtype), p.device, p.unit,
                                         p.sharded()});
  return impl;
}

runtime::LocalSession &session(CompiledModel::Impl &impl) {
  if (!impl.session) {
    try {
      impl.session = std::make_unique<runtime::LocalSession>(
          impl.plan, impl.options.seed,
          std::chrono::duration<double>(impl.options.timeout_seconds),
          detail::sessionRanks(impl.options.device));
      impl.session->setDataParallel(impl.options.data_parallel);
    } catch (const runtime::RuntimeError &error) {
      throw Error(error.what());
    }
  }
  return *impl.session;
}

bool holdsShards(const CompiledModel::Impl &impl) {
  return impl.session && impl.session->materialized();
}

/// Runs init unless every rank holds its shards; refuses after a load that
/// lost them.
void requireShards(CompiledModel &model, CompiledModel::Impl &impl) {
  if (holdsShards(impl))
    return;
  if (!impl.lostShards.empty())
    throw Error(impl.lostShards + "; call init() or load() again");
  model.init();
}

} // namespace

CompiledModel::CompiledModel(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

void CompiledModel::init() {
  runtime::LocalSession &s = session(*impl_);
  try {
    impl_->initReports = s.init();
  } catch (const runtime::RuntimeError &error) {
    throw Error(std::string("init: ") + error.what());
  }
  impl_->lostShards.clear();
}

std::vector<HostTensor> CompiledModel::forward(const std::vector<HostTensor> &inputs) {
  requireShards(*this, *impl_);
  std::vector<runtime::HostTensor> converted;
  for (const HostTensor &t : inputs)
    converted.push_back(toRuntime(t));
  std::vector<runtime::HostTensor> result;
  try {
    result = impl_->session->forward(converted, impl_->forwardReports);
  } catch (const runtime::RuntimeError &error) {
    throw Error(std::string("forward: ") + error.what());
  }
  std::vector<HostTensor> outputs;
  for (runtime::HostTensor &t : result)
    outputs.push_back(fromRuntime(std::move(t)));
  return outputs;
}

std::vector<HostTensor> CompiledModel::example_inputs(uint64_t seed) const {
  std::vector<HostTensor> inputs;
  try {
    // Data-parallel: the plan's forward is rank 0's micro-batch; the
    // inputs are the global batch the model was traced with.
    std::vector<runtime::HostTensor> made =
        impl_->options.data_parallel
            ? runtime::makeGlobalInputs(impl_->plan, compiler::graphBatchRows(impl_->traced->graph),
                                        seed, impl_->traced->intBounds)
            : runtime::makeDeterministicInputs(impl_->plan, seed, impl_->traced->intBounds);
    for (runtime::HostTensor &t : made) inputs.push_back(fromRuntime(std::move(t)));
  } catch (const runtime::RuntimeError &error) {
    throw Error(error.what());
  }
  return inputs;
}

void CompiledModel::save(const std::string &path) {
  requireShards(*this, *impl_);
  try {
    impl_->session->save(path);
  } catch (const runtime::RuntimeError &error) {
    throw Error(std::string("save: ") + error.what());
  }
}

void CompiledModel::save_optimizer(const std::string &path) {
  if (impl_->options.optimizer.name.empty())
    throw Error("save_optimizer: the model has no optimizer (JitOptions::optimizer)");
  requireShards(*this, *impl_);
  try {
    impl_->session->saveOptimizerState(path);
  } catch (const runtime::RuntimeError &error) {
    throw Error(std::string("save_optimizer: ") + error.what());
  }
}

std::vector<std::string> CompiledModel::load(const std::string &path,
                                             const std::vector<RenameRule> &rename) {
  Impl &impl = *impl_;
  const bool held = holdsShards(impl);
  compiler::Graph graph = impl.traced->graph;
  std::vector<std::string> kept;
  plan::Plan source;
  // Everything that can be wrong with the checkpoint is found here, before
  // any shard changes (as `shardc run --load` does before any rank runs).
  try {
    kept = compiler::applyCheckpointLoad(graph, path, rename);
    if (!graph.params.empty() && kept.size() == graph.params.size())
      throw runtime::checkpoint::CheckpointError(
          path + ": none of the model's " + std::to_string(graph.params.size()) +
          " parameter(s) is in the checkpoint (check the names, or the rename map)");
    compiler::ShardOptions shard = shardOptions(impl.options);
    if (held) {
      // Only the loaded parameters: the others keep their current values.
      // Each keeps its unit; its sharding (dim 0, ceil(d0 / N) rows) does not
      // depend on the other parameters, and replaceParams checks it.
      std::set<std::string> unchanged(kept.begin(), kept.end());
      std::map<std::string, std::string> unitOf;
      for (const plan::Param &p : impl.plan.params)
        unitOf[p.name] = p.unit;
      std::erase_if(graph.params, [&](const compiler::GraphParam &p) {
        return unchanged.count(p.name) > 0;
      });
      for (compiler::GraphParam &p : graph.params)
        p.unit = unitOf[p.name];
      graph.inputs.clear();
      graph.nodes.clear();
      graph.outputs.clear();
      shard = {};
    }
    // Loading every parameter starts the optimizer over (its state zero);
    // a partial load keeps the state of the parameters it does not touch.
    const std::optional<compiler::OptimizerOptions> optimizer =
        held ? std::nullopt : optimizerOptions(impl.options);
    // A data-parallel step's plan comes from its joint graphs, which take
    // the checkpoint's loads themselves.
    std::optional<compiler::DataParallelTraining> training =
        held ? std::nullopt
             : dataParallelTraining(*impl.traced, impl.options, [&](compiler::Graph &step) {
                 compiler::applyCheckpointLoad(step, path, rename);
               });
    source = compileGraph(training ? impl.traced->graph : graph, impl.plan.worldSize, shard,
                          "compiling the load of '" + path + "'", training.has_value(),
                          optimizer ? &*optimizer : nullptr, training ? &*training : nullptr);
    runtime::checkpoint::setIoBufferCap(source, impl.options.io_buffer_bytes);
    runtime::checkpoint::checkPlanLoads(source);
  } catch (const runtime::RuntimeError &error) {
    throw Error(std::string("load: ") + error.what());
  }
  runtime::LocalSession &s = session(impl);
  try {
    impl.loadReports = s.replaceParams(source);
  } catch (const runtime::RuntimeError &error) {
    impl.lostShards = "load('" + path + "') failed after the old shards were released (" +
                      error.what() + ")";
    throw Error(std::string("load: ") + error.what() +
                " (the shards are released; call init() or load() again)");
  }
  impl.lostShards.clear();
  return kept;
}

HostTensor CompiledModel::shard(const std::string &name, int64_t rank) const {
  if (rank < 0 || rank >= impl_->plan.worldSize)
    throw Error("shard('" + name + "', rank " + std::to_string(rank) +
                "): rank out of range for world size " +
                std::to_string(impl_->plan.worldSize));
  if (!holdsShards(*impl_))
    throw Error("shard('" + name + "'): no shards are held; call init(), load() or forward() first" +
                (impl_->lostShards.empty() ? "" : " (" + impl_->lostShards + ")"));
  for (size_t i = 0; i < impl_->plan.params.size(); ++i)
    if (impl_->plan.params[i].name == name)
      return fromRuntime(*impl_->session->localParam(static_cast<int32_t>(i), rank));
  throw Error("shard('" + name + "'): no such parameter");
}

MemoryReport CompiledModel::memory_report() const {
  const Impl &impl = *impl_;
  if (!impl.session ||
      (impl.initReports.empty() && impl.loadReports.empty() && impl.forwardReports.empty()))
    throw Error("memory_report(): call init(), load() or forward() first");
  MemoryReport memory;
  memory.unsharded_param_bytes = runtime::unshardedParamBytes(impl.plan);
  for (int64_t r = 0; r < impl.plan.worldSize; ++r) {
    RankMemory m;
    m.rank = r;
    m.param_bytes = impl.session->paramBytes(r);
    if (!impl.initReports.empty()) {
      m.init_peak = impl.initReports[r].peakBytes;
      m.init_predicted_peak = impl.initReports[r].predictedPeakBytes;
    }
    if (!impl.loadReports.empty()) {
      m.load_peak = impl.loadReports[r].peakBytes;
      m.load_predicted_peak = impl.loadReports[r].predictedPeakBytes;
    }
    if (!impl.forwardReports.empty()) {
      m.forward_peak = impl.forwardReports[r].peakBytes;
      m.forward_predicted_peak = impl.forwardReports[r].predictedPeakBytes;
      m.forward_end = impl.forwardReports[r].endBytes;
    }
    memory.ranks.push_back(m);
  }
  return memory;
}

CompiledModel CompiledModel::with_world_size(int64_t world_size) const {
  JitOptions options = impl_->options;
  options.world_size = world_size;
  return CompiledModel(compile(impl_->traced, options));
}

int64_t CompiledModel::world_size() const { return impl_->plan.worldSize; }
bool CompiledModel::recomputes_activations() const { return impl_->recomputing; }
bool CompiledModel::prefetches() const { return impl_->prefetching; }
bool CompiledModel::fuses_linear_cross_entropy() const {
  return impl_->options.fuse_linear_cross_entropy;
}
int64_t CompiledModel::predicted_peak_bytes() const {
  return runtime::largestPredictedPeak(impl_->plan).bytes;
}
const std::vector<ParameterInfo> &CompiledModel::parameters() const { return impl_->params; }
std::string CompiledModel::graph_json() const { return impl_->traced->json; }
int64_t CompiledModel::trace_count() const { return impl_->traced->traceCount; }

CompiledModel jit(Model &model, const JitOptions &options) {
  return CompiledModel(compile(trace(model, options), options));
}

void save_tensors(const std::string &path, const std::vector<HostTensor> &tensors) {
  std::vector<runtime::HostTensor> converted;
  for (const HostTensor &t : tensors)
    converted.push_back(toRuntime(t));
  try {
    runtime::writeSafetensors(path, converted);
  } catch (const runtime::RuntimeError &error) {
    throw Error(error.what());
  }
}

std::vector<HostTensor> load_tensors(const std::string &path) {
  try {
    std::vector<HostTensor> out;
    for (runtime::HostTensor &t : runtime::readSafetensors(path).tensors)
      out.push_back(fromRuntime(std::move(t)));
    return out;
  } catch (const runtime::RuntimeError &error) {
    throw Error(error.what());
  }
}

} // namespace shardc
