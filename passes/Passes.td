//===- Passes.td - tc dialect passes -----------------------*- tablegen -*-===//

#ifndef SHARDC_TC_PASSES
#define SHARDC_TC_PASSES

include "mlir/Pass/PassBase.td"

def TcVerifyProgram : Pass<"tc-verify-program", "::mlir::ModuleOp"> {
  let summary = "Check the module-wide rules of a tc program";
  let description = [{
    Every tc.param is materialized exactly once, in func @init. No single
    op's verifier can check this without reading ops that may not be
    verified yet, so it is a verification pass over a verified module. The
    other tc passes run the same check first, and the compiler runs it
    before them.
  }];
  let dependentDialects = ["::mlir::tc::TcDialect"];
}

def TcFsdp : Pass<"tc-fsdp", "::mlir::ModuleOp"> {
  let summary = "Shard parameters on dim 0 over a world of ranks (FSDP)";
  let description = [{
    Gives every parameter of rank >= 1 a `#tc.shard` with
    chunk_rows = ceil(d0 / world-size); 0-d parameters, parameters with no
    rows and `buffer`s stay replicated.

    Init is rewritten so that each rank generates only its own shard: the
    generator feeding a parameter's `tc.materialize` produces the local type,
    `shard of` the full type. Nothing produces the full tensor.

    Forward is rewritten so that full parameters exist only while used: the
    uses of an FSDP unit's parameters (sharded over more than one rank) are
    split into runs — maximal stretches of ops with no other unit's use in
    between — and each run gets one `tc.all_gather` of the parameters it
    uses, before its first op, and one `tc.release` after its last (none
    when the function returns one). A root unit used at the start and the
    end is thus gathered twice instead of held throughout; a parameter used
    twice within a run (tied weights) is gathered once.

    Training (after `tc-optimizer`): the gradient an optimizer step of a
    sharded parameter reads is reduced into that parameter's shard by a
    `tc.reduce_scatter` placed right after the gradient is computed, so the
    full gradient lives only until then. With `sum-gradients` (data-parallel
    training) the reduction is a sum over ranks, and every gradient must
    belong to a sharded parameter. With `split-summed-gradients` (gradient
    accumulation), a gradient that is a `tc.add` of two full gradients read
    nowhere else is reduced as the `tc.add` of their shards, each reduced
    right after it is computed: a micro-step's full gradient lives only
    within its micro-step. A gradient that is a float cast widening another
    exactly (master weights: bfloat16 converted to the float32 parameter's
    dtype), read by nothing else, is reduced from the cast's input, and the
    cast goes: the reduce_scatter widens each value itself (the same bytes),
    so no full-size float32 copy of the gradient is made.
  }];
  let options = [
    Option<"worldSize", "world-size", "int64_t", /*default=*/"1",
           "Number of ranks to shard over (>= 1)">,
    Option<"prefetch", "prefetch", "bool", /*default=*/"false",
           "Gather the next FSDP unit right after the current one, before "
           "the current unit computes (two units live at a time)">,
    Option<"sumGradients", "sum-gradients", "bool", /*default=*/"false",
           "Data-parallel training: each rank's gradient is its share of "
           "the global batch's loss, so reduce_scatter sums over ranks "
           "instead of averaging">,
    Option<"splitSummedGradients", "split-summed-gradients", "bool",
           /*default=*/"false",
           "Gradient accumulation: a sum of two full gradients is reduced "
           "as the sum of their shards, each as soon as it is computed">
  ];
  let dependentDialects = ["::mlir::tc::TcDialect"];
}

def TcFoldParamCasts : Pass<"tc-fold-param-casts", "::mlir::ModuleOp"> {
  let summary = "Read a parameter in the dtype a cast of it gives";
  let description = [{
    Master weights (docs/graph-format.md): a parameter stored in float32
    that forward reads through `tc.op "cast"` to bfloat16. Each user of such
    a cast of a `tc.use` reads its own `tc.use` of the parameter in the
    cast's dtype, placed right before it, and the cast goes:

      %w = tc.use @p : tensor<4x8xf32>
      %c = tc.op "cast"(%w) {dtype = "bfloat16"} : ... -> tensor<4x8xbf16>
      %y = tc.linear %x, %c ...          // forward
      %g = tc.matmul %dy, %c ...         // backward
    becomes
      %c0 = tc.use @p : tensor<4x8xbf16>
      %y = tc.linear %x, %c0 ...
      %c1 = tc.use @p : tensor<4x8xbf16>
      %g = tc.matmul %dy, %c1 ...

    so the converted copy lives only around each read (one rank: the
    lowering casts there), and `tc-fsdp`, which gathers a parameter around
    its reads, gathers it in the compute dtype: every rank converts its own
    shard and the unit's full values exist only in bfloat16, as FSDP2's
    `param_dtype`. Float types only; other casts are left alone.
  }];
  let dependentDialects = ["::mlir::tc::TcDialect"];
}

def TcOptimizer : Pass<"tc-optimizer", "::mlir::ModuleOp"> {
  let summary = "Turn @forward's gradients into an optimizer step";
  let description = [{
    Runs before `tc-fsdp`, on a program whose @forward returns gradients:
    the results named `grad.P` (as `--grad` names them) for parameters `@P`.
    Each is consumed by one `tc.sgd_step` or `tc.adamw_step` of `@P`,
    placed right after the last op it must follow: its gradient (with the
    views of it read by nothing else, moved along: --grad names gradients
    by a reshape at the end), the clipping norm if any, and the last read
    of `@P` directly or through a view (a later read would see the update).
    That is torch's optimizer in backward: each step reads and writes only
    its parameter and state, so the values are those of steps at the end
    (where `optimizer.step()` follows `loss.backward()`), but a gradient
    (its shard, after tc-fsdp) dies at its step instead of living to the
    end of the backward. `tc.advance_step` comes right before the first
    step. The gradients are removed from the results. The optimizer state is parameters of the updated parameter's
    type, unit and device, initialized to zero in @init, `non_persistent`
    (checkpoints of the model never save it): `@optim.momentum_buffer.P`
    (SGD with momentum), `@optim.exp_avg.P` and `@optim.exp_avg_sq.P`
    (AdamW), and the 0-d float32 buffer `@optim.step` (AdamW, and SGD with a
    learning-rate schedule), advanced by
    `tc.advance_step` before the first update (with `state-file`, the state
    is a `tc.load` of the tensor of its name from that file instead: a
    resumed run; so is dropout's step counter `@rng.step`, when the program
    has one, replacing its init). `tc-fsdp` then shards the state like its parameter and
    reduces each gradient into its shard. With `max-grad-norm`, one
    `tc.grad_norm` of all the gradients comes before the steps, and each
    step clips its gradient by it (`clip(%norm)`); tc-fsdp makes the norm
    read the gradients' shards. `no-weight-decay` regexes exempt the
    parameters whose names they match (anywhere) from weight decay, as a
    torch parameter group with weight_decay 0 does; a regex that matches
    no updated parameter is an error.
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"sgd\"",
           "sgd or adamw (torch.optim's formulas)">,
    Option<"lr", "lr", "double", /*default=*/"0.0", "Learning rate (> 0)">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0",
           "SGD momentum (>= 0; dampening 0)">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"-1.0",
           "Weight decay (>= 0; default: SGD 0, AdamW 0.01)">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false",
           "SGD: Nesterov momentum (needs momentum > 0)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "AdamW eps">,
    Option<"warmupSteps", "warmup-steps", "int64_t", /*default=*/"0",
           "Steps of linear learning-rate warmup (AdamW and SGD)">,
    Option<"decaySteps", "decay-steps", "int64_t", /*default=*/"0",
           "Steps of cosine decay to min-lr after the warmup (0: none)">,
    Option<"minLr", "min-lr", "double", /*default=*/"0.0",
           "The learning rate the decay ends at">,
    ListOption<"noWeightDecay", "no-weight-decay", "std::string",
               "Regexes: a parameter whose name one matches (anywhere) gets "
               "no weight decay (torch's parameter group with weight_decay "
               "0: biases, norms)">,
    Option<"maxGradNorm", "max-grad-norm", "double", /*default=*/"0.0",
           "Clip the gradients to this global L2 norm first (0: no "
           "clipping; torch.nn.utils.clip_grad_norm_)">,
    Option<"stateFile", "state-file", "std::string", /*default=*/"\"\"",
           "Resume: the optimizer state from this safetensors file (tensors "
           "named as the state parameters, as --save-optimizer writes them) "
           "instead of zeros">
  ];
  let dependentDialects = ["::mlir::tc::TcDialect", "::mlir::func::FuncDialect"];
}

def TcExpandInit : Pass<"tc-expand-init", "::mlir::ModuleOp"> {
  let summary = "Expand the kaiming/xavier families into uniform and normal";
  let description = [{
    Computes fan_in and fan_out exactly as torch.nn.init does (fan_in =
    size(1) * prod(size[2:]), fan_out = size(0) * prod(size[2:])) and the
    gain of `calculate_gain`, then replaces

      kaiming_uniform -> uniform [-b, b) with b = gain * sqrt(3 / fan)
      kaiming_normal  -> normal mean 0 std gain / sqrt(fan)
      xavier_uniform  -> uniform [-b, b) with b = gain * sqrt(6 / (fan_in + fan_out))
      xavier_normal   -> normal mean 0 std gain * sqrt(2 / (fan_in + fan_out))

    keeping the op's chain position, so the values are those of the
    expanded op.
  }];
  let dependentDialects = ["::mlir::tc::TcDialect"];
}

def TcRecomputeActivations : Pass<"tc-recompute-activations",
                                  "::mlir::ModuleOp"> {
  let summary = "Recompute a unit's activations where its backward reads them";
  let description = [{
    Activation checkpointing, one checkpoint per FSDP unit (torch's
    `checkpoint_wrapper` around each block), on a joint graph (`--grad`):
    runs after `tc-assign-units` and before `tc-fsdp`.

    The ops of @forward that read a unit's parameters form runs, as
    `tc-fsdp` splits them (maximal stretches with no other unit's read in
    between; here over every parameter, sharded or not, so the result does
    not depend on the world size). A run's stretch is the run and the ops
    before it back to the previous run, which read no parameter. A value
    computed within a run (between its first and last parameter read) and
    read after it only in later runs' stretches of the same unit (its
    backward) is computed again in each such stretch: its defining ops and,
    within the same run, the ops they read from are cloned in order right
    before the stretch's first read of any such value, reading the
    parameters and the values from before the run (the block's input: the
    checkpoint) as the originals did, and the stretch reads the clones.
    The originals die after their last forward read.

      %h = tc.linear %x, %w1          // forward, unit "b.0"
      %a = tc.gelu %h
      %y = tc.linear %a, %w2
      ...                             // other units
      %g1 = tc.matmul %dy, %w2        // backward of b.0 reads %a and %h
      %dw2 = tc.matmul %dyt, %a
      %da = tc.mul %g1, %h            // (gelu's gradient, simplified)
    becomes
      ...
      %h2 = tc.linear %x, %w1
      %a2 = tc.gelu %h2
      %g1 = tc.matmul %dy, %w2
      %dw2 = tc.matmul %dyt, %a2
      %da = tc.mul %g1, %h2

    Across another run of the same unit (gradient accumulation's next
    micro-step, a weight-shared block applied again) a value is recomputed
    only when every value its clones read from before the run is read
    at or after the stretch's first read anyway: a micro-step's weight
    gradient, which the next micro-step adds to its own, stays as it is
    instead of keeping that earlier backward's inputs alive across the next
    forward.

    A value also read elsewhere after its run (another unit, the results)
    stays alive anyway and is not recomputed; parameter reads are not
    activations (`tc-fsdp` gathers the unit again for the stretch). Ops
    are pure and kernels deterministic, so the clones hold the originals'
    bits: the gradients are byte-identical with and without this pass.
  }];
  let dependentDialects = ["::mlir::tc::TcDialect"];
}

def TcNarrowUnitRuns : Pass<"tc-narrow-unit-runs", "::mlir::ModuleOp"> {
  let summary = "Move ops that read no unit parameter out of the unit's run";
  let description = [{
    Runs before `tc-fsdp` (after `tc-optimizer`), which gathers a unit
    from the first op of a run that reads its parameters to the last
    (the runs of `tc-recompute-activations`: over every parameter, so the
    result does not depend on the world size). An op strictly inside a run
    that reads none of the unit's parameters, and that no later read in
    the run needs (directly or through other ops), moves right after the
    run's last read, after `tc-fsdp`'s release; the ops moved keep their
    order. A linear's weight gradient is such an op: computed between its
    input gradient, which reads the weight, and the next read of the unit.

      %dx = tc.matmul %g, %w          // reads the unit
      %gt = tc.transpose %g, 0, 1
      %dw = tc.matmul %gt, %x         // reads none of it
      %dn = tc.mul %dx, %ln_w         // the run's last read
    becomes
      %dx = tc.matmul %g, %w
      %dn = tc.mul %dx, %ln_w         // tc-fsdp releases the unit here
      %gt = tc.transpose %g, 0, 1
      %dw = tc.matmul %gt, %x

    Of the ops that may move, one does when an op it reads from moves, or
    when its result's bytes are at least those of the tensors it reads
    that nothing after the run reads (moving it keeps them alive to the
    run's end): a weight gradient moves, a scalar loss read from the
    logits stays; a view read only by moved ops goes with them (a
    transpose its matmul reads in place). The moves are made only where
    they lower the largest
    live tensor bytes over the run's ops (views counted once, the unit's
    gathered bytes until its last read). Moved ops are pure, or optimizer
    steps (`tc-optimizer` places each after its parameter's last read; it
    touches only that parameter and its state): values are unchanged. The
    pipeline runs it at N >= 2 (at N = 1 nothing is gathered).
  }];
  let dependentDialects = ["::mlir::tc::TcDialect"];
}

def TcAssignUnits : Pass<"tc-assign-units", "::mlir::ModuleOp"> {
  let summary = "Group parameters into FSDP units";
  let description = [{
    Gives every tc.param a `unit`. With `patterns`, a parameter's unit is
    the text matched by the first pattern (an extended regex, anchored at
    the start of the name) that matches it, e.g. `transformer\.h\.[0-9]+`;
    a pattern that matches no parameter is an error. Without patterns,
    parameters that already have a unit keep it and the rest follow the
    default: a layer list is a name prefix `P` with at least two distinct
    numbered children `P.N.` (N all digits, or a name ending in digits such
    as `encoder_layer_3`), or the prefix with the most of them; each `P.N`
    of a layer list is a unit, for the first numbered `P.N` of a name (the
    outermost list). A unit holding more than a quarter of the parameter
    bytes (buffers do not count) is split into the blocks of a list nested
    in it, if one of them holds a module of its own (Swin's stages into
    their blocks; a block's `mlp.0`, `mlp.3` stay whole), until none is left
    to split. Every other parameter goes to the unit "root".
  }];
  let options = [
    ListOption<"patterns", "patterns", "std::string",
               "Regexes whose match (at the start of a name) is the unit">
  ];
  let dependentDialects = ["::mlir::tc::TcDialect"];
}

#endif // SHARDC_TC_PASSES
