// shardc embedded JIT API: shardc::jit and the compiled model (docs/jit.md).
#pragma once

#include "shardc/module.h"

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace shardc {

/// A tensor in ordinary host memory: inputs, outputs, shards, checkpoints.
/// Row-major, contiguous.
struct HostTensor {
  std::string name;
  DType dtype = DType::Float32;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;

  int64_t num_elements() const;
  template <typename T> const T *as() const { return reinterpret_cast<const T *>(data.data()); }
  template <typename T> T *as() { return reinterpret_cast<T *>(data.data()); }
};

/// A forward input: what the model's forward receives, in order.
struct InputSpec {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::Float32;
  /// int64 inputs (token ids): example_inputs draws them from [0, high).
  int64_t high = 0;
};

struct JitOptions {
  int64_t world_size = 1;
  /// FSDP unit patterns (regexes over parameter names, as shardc --units);
  /// empty: the default units (blocks of the main layer list).
  std::vector<std::string> units;
  bool prefetch = false;
  /// Where it runs: "cpu" (the only device of this release).
  std::string device = "cpu";
  /// "local": ranks are threads of this process.
  std::string backend = "local";
  uint64_t seed = 0;
  std::vector<InputSpec> inputs;
  /// Names of forward's outputs, in order (default: generated names).
  std::vector<std::string> output_names;
  std::string name = "model";
  double timeout_seconds = 60;
};

/// Measured and predicted bytes of one rank (docs/plan.md).
struct RankMemory {
  int64_t rank = 0;
  int64_t param_bytes = 0;
  int64_t init_peak = 0, init_predicted_peak = 0;
  int64_t forward_peak = 0, forward_predicted_peak = 0; // 0 without forward
  int64_t forward_end = 0;
};

struct MemoryReport {
  int64_t unsharded_param_bytes = 0;
  std::vector<RankMemory> ranks;
  std::string to_string() const;
};

/// What the compiler knows of a parameter after sharding.
struct ParameterInfo {
  std::string name;
  std::vector<int64_t> shape;       // full
  std::vector<int64_t> local_shape; // what each rank stores
  DType dtype = DType::Float32;
  std::string device;               // the original device
  std::string unit;
  bool sharded = false;
};

class CompiledModel {
public:
  /// Materializes every rank's shards (init program only).
  void init();
  /// Runs init (when not yet run) and forward on every rank; returns rank 0's
  /// outputs (all ranks' outputs are checked to be byte-identical).
  std::vector<HostTensor> forward(const std::vector<HostTensor> &inputs);
  /// Deterministic inputs for `seed` (int64 inputs in [0, high)), the same
  /// `shardc run` generates without --inputs.
  std::vector<HostTensor> example_inputs(uint64_t seed) const;

  /// Gathers every parameter and writes them as safetensors (full tensors,
  /// full names). Atomic: no partial file is ever left under `path`.
  void save(const std::string &path);
  /// Loading a checkpoint: not supported yet (throws Error); see docs/jit.md.
  void load(const std::string &path);

  /// This rank's shard of parameter `name` after init: its local shape
  /// (chunk rows, padding zero) and bytes. With the local backend every rank
  /// lives in this process; `rank` selects one.
  HostTensor shard(const std::string &name, int64_t rank = 0) const;
  MemoryReport memory_report() const;

  /// The same trace compiled for another world size (no re-tracing).
  CompiledModel with_world_size(int64_t world_size) const;

  int64_t world_size() const;
  const std::vector<ParameterInfo> &parameters() const;
  /// The traced model as a graph file (docs/graph-format.md); `shardc run`
  /// reads it.
  std::string graph_json() const;
  /// How many times the model's forward was traced for this trace (1).
  int64_t trace_count() const;

  struct Impl;
  explicit CompiledModel(std::shared_ptr<Impl> impl);

private:
  std::shared_ptr<Impl> impl_;
};

/// Traces `model` once (its registered parameters and one call of forward
/// on proxies for options.inputs) and compiles it for options.world_size.
CompiledModel jit(Model &model, const JitOptions &options);

/// Writes tensors as one safetensors file (atomically).
void save_tensors(const std::string &path, const std::vector<HostTensor> &tensors);
std::vector<HostTensor> load_tensors(const std::string &path);

} // namespace shardc
