// shardc embedded JIT API: shardc::jit and the compiled model (docs/jit.md).
#pragma once

#include "shardc/module.h"

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <utility>
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

/// A training step after the gradients (docs/training.md, "Training steps"):
/// torch.optim's SGD or AdamW on the shards. weight_decay < 0: the
/// optimizer's default (SGD 0, AdamW 0.01).
struct OptimizerOptions {
  std::string name;  // "sgd" or "adamw"; empty: no optimizer
  double lr = 0;
  double momentum = 0;    // SGD
  bool nesterov = false;  // SGD: Nesterov momentum (needs momentum > 0)
  double weight_decay = -1;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // AdamW
  /// The learning-rate schedule (AdamW or SGD) by the optimizer's step
  /// count (docs/training.md):
  /// lr * k / warmup_steps at step k <= warmup_steps, then a cosine decay
  /// to min_lr over decay_steps steps (0: lr stays).
  int64_t warmup_steps = 0, decay_steps = 0;
  double min_lr = 0;
  /// Gradient clipping (torch.nn.utils.clip_grad_norm_ before the step):
  /// > 0 scales every gradient by min(1, max_grad_norm / (norm + 1e-6)),
  /// norm being the global L2 norm of all of them, summed exactly so that
  /// every world size gets the same bits (docs/training.md).
  double max_grad_norm = 0;
  /// Regexes: the parameters whose names one matches (anywhere) get no
  /// weight decay (torch's parameter group with weight_decay 0).
  std::vector<std::string> no_weight_decay;
  /// Resume: the state from this file (CompiledModel::save_optimizer)
  /// instead of zeros, at init() and at a load() of every parameter.
  std::string state_file;
  /// Gradient accumulation (docs/training.md): each rank's rows of the
  /// global batch run as this many forward and backward micro-steps, then
  /// one optimizer step; the loss and gradients are the whole batch's.
  /// Needs data_parallel (at world_size 1, the whole batch is the rank's).
  int64_t accumulate = 1;
};

struct JitOptions {
  int64_t world_size = 1;
  /// FSDP unit patterns (regexes over parameter names, as shardc --units);
  /// empty: the default units (blocks of each layer list).
  std::vector<std::string> units;
  bool prefetch = false;
  /// Where the ranks run (docs/jit.md): "cpu", or "cuda" / "cuda:N": every
  /// rank on that one GPU (its own stream and exact ledger; collectives are
  /// device-to-device copies). Checked by jit(): a shardc built without the
  /// CUDA runtime, or no such GPU, is an Error there.
  std::string device = "cpu";
  /// "local": ranks are threads of this process.
  std::string backend = "local";
  uint64_t seed = 0;
  std::vector<InputSpec> inputs;
  /// Names of forward's outputs, in order (default: generated names).
  std::vector<std::string> output_names;
  std::string name = "model";
  double timeout_seconds = 60;
  /// CompiledModel::load converts a checkpoint tensor whose dtype differs
  /// from its parameter's through one io buffer per rank, of at most this
  /// many bytes (`shardc run --io-buffer-mib`; docs/checkpoints.md).
  int64_t io_buffer_bytes = int64_t{64} << 20;
  /// Data-parallel forward (docs/jit.md): `inputs` describe the global
  /// batch; forward() splits every input along dim 0 over the ranks (the
  /// first B mod N ranks get one row more), each rank computes only its
  /// rows, and the outputs are concatenated in rank order (a 0-d output,
  /// such as a mean loss over the batch: the ranks' shares summed). With
  /// grad and an optimizer, every forward() is a data-parallel training
  /// step: each rank differentiates its share of the loss over the global
  /// batch and the shares of the gradients are summed into the shards
  /// (docs/training.md; the batch must split evenly). false: every rank
  /// runs the whole batch (replicated).
  bool data_parallel = false;
  /// Gradients (docs/training.md): the name of a 0-d floating output of
  /// forward (see output_names) to differentiate with respect to every
  /// parameter. forward() then returns forward's outputs followed by
  /// "grad.NAME" for each parameter that output depends on, full on every
  /// rank and byte-identical at every world size. With data_parallel only
  /// together with an optimizer. Empty: forward only.
  std::string grad;
  /// With grad: activation checkpointing per FSDP unit (docs/training.md,
  /// "Recomputing activations"): each unit's backward recomputes what its
  /// forward computed, from the unit's input, instead of keeping it alive
  /// across the rest of the model; the same gradients, bit for bit.
  bool recompute_activations = false;
  /// A loss cross_entropy(linear(h, W), targets) becomes one op that makes
  /// the logits a block of rows at a time, in forward and, with grad, again
  /// in backward (docs/training.md, "Fusing the head and its loss"): no
  /// [tokens, vocabulary] tensor is held; the same loss and gradients, bit
  /// for bit. A traced graph with no such loss is an Error saying why.
  bool fuse_linear_cross_entropy = false;
  /// Bytes each rank may hold at its peak (docs/jit.md, `shardc
  /// --memory-budget`); 0: no budget. Every rank's peak is predicted
  /// exactly at compile time: prefetch is left out and, with grad, the head
  /// and its loss fused and / or activations recomputed when only that fits
  /// (prefetches(), fuses_linear_cross_entropy() and
  /// recomputes_activations() say so); a plan that cannot fit is an Error
  /// naming the world size that would.
  int64_t memory_budget_bytes = 0;
  /// Master weights (docs/jit.md): "float32" (or "float64") stores every
  /// bfloat16 / float16 parameter in that dtype (init, shards, the optimizer
  /// step and its state, save() and load()) while forward and backward read
  /// it in its declared dtype, as FSDP2's MixedPrecisionPolicy(param_dtype=
  /// bfloat16): units are gathered in bfloat16, gradients ("grad.NAME") come
  /// back in the master dtype. Empty: every parameter as declared.
  std::string master_dtype;
  /// With grad: every forward() is a training step (docs/training.md):
  /// each gradient is reduced into its parameter's shard and updates it in
  /// place; forward() returns forward's outputs only (the loss), and the
  /// optimizer state (optim.* parameters, sharded, zero at init() and at a
  /// load() of every parameter) is neither listed by parameters() nor saved.
  OptimizerOptions optimizer;
};

/// Measured and predicted bytes of one rank (docs/plan.md), equal on CPU.
/// Peaks are of the last init(), load() and forward() (0: not run yet).
struct RankMemory {
  int64_t rank = 0;
  /// Parameter bytes this rank holds now: its shards (padding included).
  int64_t param_bytes = 0;
  /// The last init(): the rank's shards plus one non-shardable tensor at a
  /// time (docs/design.md, invariant 1).
  int64_t init_peak = 0, init_predicted_peak = 0;
  /// The last load(): the rank's shards plus its io buffer.
  int64_t load_peak = 0, load_predicted_peak = 0;
  /// The last forward(): shards, gathered units, activations.
  int64_t forward_peak = 0, forward_predicted_peak = 0;
  int64_t forward_end = 0;
};

struct MemoryReport {
  int64_t unsharded_param_bytes = 0;
  std::vector<RankMemory> ranks;
  std::string to_string() const;
};

/// What the compiler knows of a parameter (or persistent buffer) after
/// sharding. Constants (non-persistent buffers: those grad adds) and the
/// optimizer's state are not listed: they are not the model's state
/// (shard() still reads the latter by name).
struct ParameterInfo {
  std::string name;
  std::vector<int64_t> shape;       // full
  std::vector<int64_t> local_shape; // what each rank stores
  DType dtype = DType::Float32;
  std::string device;               // the original device
  std::string unit;
  bool sharded = false;
};

/// A compiled model with its state: every rank's shards, held in this process
/// (the local backend) from the first init(), load() or forward() until the
/// CompiledModel's last copy is destroyed. Copies share the compiled program
/// and the shards; with_world_size() starts with none. Not thread-safe: one
/// call at a time.
class CompiledModel {
public:
  /// One `shardc run --rename OLD=NEW` rule: a checkpoint tensor whose name
  /// starts with OLD is the parameter NEW + the rest of its name.
  using RenameRule = std::pair<std::string, std::string>;

  /// (Re)materializes every rank's shards from the init programs: releases
  /// the shards held (values loaded or not), then runs the sharded init.
  void init();
  /// Runs forward on every rank on the shards held now (init() first when
  /// none are held; never again after that); returns rank 0's outputs (all
  /// ranks' outputs are checked to be byte-identical). Shards are unchanged.
  std::vector<HostTensor> forward(const std::vector<HostTensor> &inputs);
  /// Deterministic inputs for `seed` (int64 inputs in [0, high)), the same
  /// `shardc run` generates without --inputs.
  std::vector<HostTensor> example_inputs(uint64_t seed) const;

  /// Writes the shards held now (init() first when none are held) as one
  /// safetensors file of full tensors with full names, cooperatively: every
  /// rank pwrites its own rows; nothing is gathered or allocated. Atomic: the
  /// file appears under `path` only when every rank succeeded.
  void save(const std::string &path);
  /// With JitOptions::optimizer: writes the optimizer's state (every optim.*
  /// tensor, full, each rank its rows) as save() does; a model compiled
  /// with optimizer.state_file = that path (and load() of the saved
  /// parameters) resumes training from it, at any world size.
  void save_optimizer(const std::string &path);
  /// Loads a safetensors file, a Hugging Face `model.safetensors.index.json`
  /// or a directory holding either into the shards, as `shardc run --load
  /// path [--rename OLD=NEW]...` does: each rank reads only its own rows,
  /// converting F32/F64/F16/BF16 to the parameter's dtype. Parameters not in
  /// the checkpoint keep their current values (their init values when no
  /// shards were held); the names of those are returned. Checkpoint
  /// tensors no parameter uses are ignored. The checkpoint is validated
  /// before any shard changes; a bad one (missing, truncated, wrong shape,
  /// no parameter found) throws Error "load: FILE: tensor 'x': reason" with
  /// the shards untouched. Per-rank peak: the shards + one io buffer.
  std::vector<std::string> load(const std::string &path,
                                const std::vector<RenameRule> &rename = {});

  /// This rank's shard of parameter `name` now: its local shape (chunk
  /// rows, padding zero) and bytes. With the local backend every rank lives
  /// in this process; `rank` selects one. Error when no shards are held.
  HostTensor shard(const std::string &name, int64_t rank = 0) const;
  /// Per rank: the parameter bytes held now, and the peaks of the last
  /// init(), load() and forward() with their predictions. Error before any
  /// of them ran.
  MemoryReport memory_report() const;

  /// The same trace compiled for another world size (no re-tracing), with
  /// no shards held (carry values over with save() and load()).
  CompiledModel with_world_size(int64_t world_size) const;

  int64_t world_size() const;
  /// Activations are recomputed in the backward: recompute_activations, or
  /// chosen to fit memory_budget_bytes.
  bool recomputes_activations() const;
  /// The next unit is gathered while one computes: prefetch, unless
  /// leaving it out was what fit memory_budget_bytes.
  bool prefetches() const;
  /// The head and its loss are one op: fuse_linear_cross_entropy, or chosen
  /// to fit memory_budget_bytes (then kept by with_world_size()).
  bool fuses_linear_cross_entropy() const;
  /// The largest rank's predicted peak over init and forward (docs/plan.md;
  /// what the ledger measures on the CPU), known before anything runs.
  int64_t predicted_peak_bytes() const;
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
