//===- TcTrainingOps.td - gradients into shards, optimizer steps -*- tablegen -*-===//
//
// Training's ops (docs/training.md): `tc-optimizer` appends one optimizer
// step per gradient of @forward, `tc-fsdp` reduces the gradient of a sharded
// parameter into its shard first. The steps update a parameter's storage
// (and its optimizer state) in place, on the rows this rank stores.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_TC_TRAINING_OPS
#define SHARDC_TC_TRAINING_OPS

def Tc_ReduceScatterOp : Tc_Op<"reduce_scatter", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Reduce a full gradient into this rank's shard of a parameter";
  let description = [{
    `%s = tc.reduce_scatter %g for @w : tensor<10x4xf32> -> tensor<5x4xf32>`
    is the mean over ranks of every rank's `%g`, of which this rank keeps
    the dim-0 rows it stores of `@w` (padding rows zero). The sum runs in
    double in rank order, so ranks holding equal gradients get them back
    exactly. With `{sum}` it is the sum, not the mean: in a data-parallel
    step each rank's gradient is its share of one loss over the global
    batch, and the shares add up. Inserted by `tc-fsdp` in front of an
    optimizer step of a sharded parameter.
  }];
  let arguments = (ins AnyRankedTensor:$full, FlatSymbolRefAttr:$param,
                       UnitAttr:$sum);
  let results = (outs AnyRankedTensor:$shard);
  let assemblyFormat = [{
    $full `for` $param attr-dict `:` type($full) `->` type($shard)
  }];
}

// grad_norm's result, which the steps read: one float64, so the printed
// form needs no type for it.
def Tc_GradNormType : 0DTensorOf<[F64]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getF64Type())">;

def Tc_GradNormOp : Tc_Op<"grad_norm", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "The global L2 norm of the gradients, for gradient clipping";
  let description = [{
    `%n = tc.grad_norm %gw, %gb for [@w, @b] : tensor<5x4xf32>, tensor<4xf32>`
    (a `tensor<f64>`) is the L2 norm of all the gradients together
    (torch.nn.utils.clip_grad_norm_'s total norm): operand i is the gradient
    of parameter `params[i]` in the layout that parameter is stored in (its
    shard once it is sharded, so the norm sums over every rank's rows; a
    replicated parameter's gradient counts once). The squares are summed
    exactly and rounded once, so the norm does not depend on the world size.
    Created by `tc-optimizer` with `max-grad-norm`; each optimizer step then
    reads it to clip its gradient.
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$grads, FlatSymbolRefArrayAttr:$params);
  let results = (outs Tc_GradNormType:$norm);
  let assemblyFormat = [{
    $grads `for` $params attr-dict `:` type($grads)
  }];
  let hasVerifier = 1;
}

def Tc_SgdStepOp : Tc_Op<"sgd_step", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "torch.optim.SGD's update of one parameter, in place";
  let description = [{
    `tc.sgd_step @w, %g {lr = 0.1, momentum = 0.9, weight_decay = 0.0}
    buffer @optim.momentum_buffer.w : tensor<5x4xf32>` updates the rows of
    `@w` this rank stores with `%g`, the gradient in that layout (its shard
    once `@w` is sharded). A non-zero momentum needs the momentum buffer, a
    parameter of `@w`'s type and sharding that starts at zero. With
    `clip(%n)` and `max_grad_norm` > 0, the gradient is first scaled by
    min(1, max_grad_norm / (%n + 1e-6)), %n being `tc.grad_norm`'s norm of
    all the gradients (torch.nn.utils.clip_grad_norm_). With `step
    @optim.step` (the 0-d count `tc.advance_step` advances), `warmup_steps`,
    `decay_steps` and `min_lr` schedule the learning rate as
    `tc.adamw_step`'s do. `{nesterov}`: Nesterov momentum (torch's
    `nesterov=True`), which needs a momentum.
  }];
  let arguments = (ins FlatSymbolRefAttr:$param, AnyRankedTensor:$grad,
                       Optional<Tc_GradNormType>:$grad_norm, F64Attr:$lr,
                       F64Attr:$momentum, F64Attr:$weight_decay,
                       OptionalAttr<FlatSymbolRefAttr>:$momentum_buffer,
                       DefaultValuedAttr<F64Attr, "0.0">:$max_grad_norm,
                       OptionalAttr<FlatSymbolRefAttr>:$step,
                       DefaultValuedAttr<I64Attr, "0">:$warmup_steps,
                       DefaultValuedAttr<I64Attr, "0">:$decay_steps,
                       DefaultValuedAttr<F64Attr, "0.0">:$min_lr,
                       UnitAttr:$nesterov);
  let assemblyFormat = [{
    $param `,` $grad (`clip` `(` $grad_norm^ `)`)? (`buffer` $momentum_buffer^)?
    (`step` $step^)? attr-dict `:` type($grad)
  }];
  let hasVerifier = 1;
}

def Tc_AdamwStepOp : Tc_Op<"adamw_step", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "torch.optim.AdamW's update of one parameter, in place";
  let description = [{
    `tc.adamw_step @w, %g state(@optim.exp_avg.w, @optim.exp_avg_sq.w,
    @optim.step) {lr = ..., beta1 = ..., beta2 = ..., eps = ...,
    weight_decay = ...} : tensor<5x4xf32>` updates the rows of `@w` this
    rank stores and its two moments (parameters of `@w`'s type and
    sharding); `@optim.step`, a 0-d floating buffer advanced by
    `tc.advance_step` before the first update, counts the steps.
    `warmup_steps`, `decay_steps` and `min_lr` (defaults 0: lr throughout)
    schedule the learning rate by that count: a linear warmup, then a
    cosine decay to `min_lr` (docs/training.md). `clip(%n)` with
    `max_grad_norm` clips the gradient first, as in `tc.sgd_step`.
  }];
  let arguments = (ins FlatSymbolRefAttr:$param, AnyRankedTensor:$grad,
                       Optional<Tc_GradNormType>:$grad_norm,
                       FlatSymbolRefAttr:$exp_avg, FlatSymbolRefAttr:$exp_avg_sq,
                       FlatSymbolRefAttr:$step, F64Attr:$lr, F64Attr:$beta1, F64Attr:$beta2,
                       F64Attr:$eps, F64Attr:$weight_decay,
                       DefaultValuedAttr<I64Attr, "0">:$warmup_steps,
                       DefaultValuedAttr<I64Attr, "0">:$decay_steps,
                       DefaultValuedAttr<F64Attr, "0.0">:$min_lr,
                       DefaultValuedAttr<F64Attr, "0.0">:$max_grad_norm);
  let assemblyFormat = [{
    $param `,` $grad (`clip` `(` $grad_norm^ `)`)? `state` `(` $exp_avg `,` $exp_avg_sq `,`
    $step `)` attr-dict `:` type($grad)
  }];
  let hasVerifier = 1;
}

def Tc_AdvanceStepOp : Tc_Op<"advance_step", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Add one to an optimizer's step count";
  let description = [{
    `tc.advance_step @optim.step` adds 1 to a 0-d floating buffer in place
    (torch's `state['step'] += 1`, before the updates that read it).
  }];
  let arguments = (ins FlatSymbolRefAttr:$counter);
  let assemblyFormat = "$counter attr-dict";
}

#endif // SHARDC_TC_TRAINING_OPS
