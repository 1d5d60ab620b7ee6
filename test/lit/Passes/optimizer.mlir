// RUN: shardc-opt %s -split-input-file -tc-optimizer='optimizer=sgd lr=0.1 momentum=0.9' | FileCheck %s --check-prefix=SGD
// RUN: shardc-opt %s -split-input-file -tc-optimizer='optimizer=adamw lr=0.01' -tc-fsdp=world-size=3 | FileCheck %s --check-prefix=ADAMW
// RUN: shardc-opt %s -split-input-file -tc-optimizer='optimizer=sgd lr=0.5' -tc-fsdp=world-size=1 | FileCheck %s --check-prefix=N1
// RUN: shardc-opt %s -split-input-file -tc-optimizer='optimizer=sgd lr=0.1 max-grad-norm=1.0' -tc-fsdp=world-size=3 | FileCheck %s --check-prefix=CLIP
// RUN: shardc-opt %s -split-input-file -tc-optimizer='optimizer=sgd lr=0.1 warmup-steps=2 decay-steps=5 min-lr=0.01' | FileCheck %s --check-prefix=SGDSCHED
// RUN: shardc-opt %s -split-input-file -tc-optimizer='optimizer=adamw lr=0.1 weight-decay=0.5 no-weight-decay=^b$' | FileCheck %s --check-prefix=NODECAY

// tc-optimizer turns the results named grad.P into optimizer steps of @P
// (the results go away), each right after its gradient and the last read
// of @P (torch's optimizer in backward: the same values, the gradient
// freed at its step); its state is zero-initialized non_persistent
// parameters after their parameter. tc-fsdp shards the state like its
// parameter and reduces each gradient into the shard right after the
// gradient is computed. Buffers get no step (a result grad.stats for a
// buffer stays a result).

// SGD-LABEL: tc.param @w : tensor<10x4xf32> device "cpu"{{$}}
// SGD-NEXT:  tc.param @optim.momentum_buffer.w : tensor<10x4xf32> device "cpu" non_persistent
// SGD-NEXT:  tc.param @b : tensor<4xf32> device "cpu"{{$}}
// SGD-NEXT:  tc.param @optim.momentum_buffer.b : tensor<4xf32> device "cpu" non_persistent
// SGD-NEXT:  tc.param @stats
// SGD-LABEL: func.func @init()
// SGD:         %[[ZW:.*]] = tc.zeros : tensor<10x4xf32>
// SGD-NEXT:    tc.materialize %[[ZW]] into @optim.momentum_buffer.w
// SGD:         %[[ZB:.*]] = tc.zeros : tensor<4xf32>
// SGD-NEXT:    tc.materialize %[[ZB]] into @optim.momentum_buffer.b
// SGD-LABEL: func.func @forward(
// SGD-SAME:      -> (tensor<10x4xf32> {tc.name = "y"}, tensor<4xf32> {tc.name = "grad.stats"})
// SGD:         %[[Y:.*]] = tc.add
// SGD-NEXT:    %[[GW:.*]] = tc.mul %{{.*}}, %[[Y]]
// SGD-NEXT:    tc.sgd_step @w, %[[GW]] buffer @optim.momentum_buffer.w {lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, weight_decay = 0.000000e+00 : f64} : tensor<10x4xf32>
// SGD-NEXT:    %[[GB:.*]] = tc.add
// SGD-NEXT:    tc.sgd_step @b, %[[GB]] buffer @optim.momentum_buffer.b
// SGD-NEXT:    return %[[Y]], %{{.*}} : tensor<10x4xf32>, tensor<4xf32>

// ADAMW-LABEL: tc.param @optim.step : tensor<f32> device "cpu" buffer non_persistent
// ADAMW-NEXT:  tc.param @w : tensor<10x4xf32> device "cpu" sharded <world_size = 3, chunk_rows = 4>
// ADAMW-NEXT:  tc.param @optim.exp_avg.w : tensor<10x4xf32> device "cpu" non_persistent sharded <world_size = 3, chunk_rows = 4>
// ADAMW-NEXT:  tc.param @optim.exp_avg_sq.w : tensor<10x4xf32> device "cpu" non_persistent sharded <world_size = 3, chunk_rows = 4>
// ADAMW-NEXT:  tc.param @b : tensor<4xf32> device "cpu" sharded <world_size = 3, chunk_rows = 2>
// ADAMW-LABEL: func.func @init()
// ADAMW:         %[[Z:.*]] = tc.zeros : tensor<4x4xf32> shard of tensor<10x4xf32>
// ADAMW-NEXT:    tc.materialize %[[Z]] into @optim.exp_avg.w : tensor<4x4xf32>
// ADAMW-LABEL: func.func @forward(
// ADAMW:         %[[P:.*]]:2 = tc.all_gather [@w, @b] unit "root"
// ADAMW:         %[[GW:.*]] = tc.mul
// ADAMW-NEXT:    %[[SW:.*]] = tc.reduce_scatter %[[GW]] for @w : tensor<10x4xf32> -> tensor<4x4xf32>
// ADAMW-NEXT:    tc.advance_step @optim.step
// ADAMW-NEXT:    tc.adamw_step @w, %[[SW]] state(@optim.exp_avg.w, @optim.exp_avg_sq.w, @optim.step) {beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, eps = 1.000000e-08 : f64, lr = 1.000000e-02 : f64, weight_decay = 1.000000e-02 : f64} : tensor<4x4xf32>
// ADAMW-NEXT:    %[[GB:.*]] = tc.add %[[P]]#1, %[[P]]#1
// ADAMW-NEXT:    %[[SB:.*]] = tc.reduce_scatter %[[GB]] for @b : tensor<4xf32> -> tensor<2xf32>
// ADAMW-NEXT:    tc.release %[[P]]#0, %[[P]]#1
// ADAMW-NEXT:    tc.adamw_step @b, %[[SB]] state(@optim.exp_avg.b, @optim.exp_avg_sq.b, @optim.step)
// ADAMW-SAME:      : tensor<2xf32>
// ADAMW-NEXT:    return

// Gradient clipping: one grad_norm before the steps, of the gradients'
// shards (tc-fsdp rewires it to the reduce_scatters, so no full gradient
// lives on to the steps); every step reads it.
// The norm is also returned, as grad_norm, the same on every rank.
// CLIP-LABEL: func.func @forward(
// CLIP-SAME:      tensor<f64> {tc.name = "grad_norm", tc.replicated})
// CLIP:         %[[SW:.*]] = tc.reduce_scatter %{{.*}} for @w : tensor<10x4xf32> -> tensor<4x4xf32>
// CLIP:         %[[SB:.*]] = tc.reduce_scatter %{{.*}} for @b : tensor<4xf32> -> tensor<2xf32>
// CLIP:         %[[N:.*]] = tc.grad_norm %[[SW]], %[[SB]] for [@w, @b] : tensor<4x4xf32>, tensor<2xf32>
// CLIP-NEXT:    tc.sgd_step @w, %[[SW]] clip(%[[N]]) {lr = 1.000000e-01 : f64, max_grad_norm = 1.000000e+00 : f64, momentum = 0.000000e+00 : f64, weight_decay = 0.000000e+00 : f64} : tensor<4x4xf32>
// CLIP-NEXT:    tc.sgd_step @b, %[[SB]] clip(%[[N]])
// CLIP-NEXT:    return {{.*}}, %[[N]] : {{.*}}, tensor<f64>

// SGD with a learning-rate schedule counts its steps, as AdamW does.
// SGDSCHED-LABEL: tc.param @optim.step : tensor<f32> device "cpu" buffer non_persistent
// SGDSCHED-LABEL: func.func @forward(
// SGDSCHED:         tc.advance_step @optim.step
// SGDSCHED-NEXT:    tc.sgd_step @w, %{{.*}} step @optim.step {decay_steps = 5 : i64, lr = 1.000000e-01 : f64, min_lr = 1.000000e-02 : f64, momentum = 0.000000e+00 : f64, warmup_steps = 2 : i64, weight_decay = 0.000000e+00 : f64} : tensor<10x4xf32>
// SGDSCHED-NEXT:    tc.add
// SGDSCHED-NEXT:    tc.sgd_step @b, %{{.*}} step @optim.step

// no-weight-decay: the parameters it names get weight_decay 0, the others
// the option's.
// NODECAY-LABEL: func.func @forward(
// NODECAY:         tc.adamw_step @w, {{.*}}weight_decay = 5.000000e-01 : f64} : tensor<10x4xf32>
// NODECAY:         tc.adamw_step @b, {{.*}}weight_decay = 0.000000e+00 : f64} : tensor<4xf32>

// One rank stores whole parameters: no reduction, no momentum buffer.
// N1-LABEL: func.func @forward(
// N1-NOT:      tc.reduce_scatter
// N1:          tc.sgd_step @w, %{{.*}} {lr = 5.000000e-01 : f64, momentum = 0.000000e+00 : f64, weight_decay = 0.000000e+00 : f64} : tensor<10x4xf32>
// N1-NEXT:     tc.add
// N1-NEXT:     tc.sgd_step @b
// N1-NOT:      optim.
tc.param @w : tensor<10x4xf32> device "cpu"
tc.param @b : tensor<4xf32> device "cpu"
tc.param @stats : tensor<4xf32> device "cpu" buffer
func.func @init() {
  %0 = tc.ones : tensor<10x4xf32>
  tc.materialize %0 into @w : tensor<10x4xf32>
  %1 = tc.zeros : tensor<4xf32>
  tc.materialize %1 into @b : tensor<4xf32>
  %2 = tc.zeros : tensor<4xf32>
  tc.materialize %2 into @stats : tensor<4xf32>
  return
}
func.func @forward(%x: tensor<10x4xf32> {tc.name = "x"}) -> (tensor<10x4xf32> {tc.name = "y"}, tensor<10x4xf32> {tc.name = "grad.w"}, tensor<4xf32> {tc.name = "grad.b"}, tensor<4xf32> {tc.name = "grad.stats"}) {
  %w = tc.use @w : tensor<10x4xf32>
  %b = tc.use @b : tensor<4xf32>
  %s = tc.use @stats : tensor<4xf32>
  %y = tc.add %w, %b : tensor<10x4xf32>, tensor<4xf32> -> tensor<10x4xf32>
  %gw = tc.mul %x, %y : tensor<10x4xf32>, tensor<10x4xf32> -> tensor<10x4xf32>
  %gb = tc.add %b, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %y, %gw, %gb, %s : tensor<10x4xf32>, tensor<10x4xf32>, tensor<4xf32>, tensor<4xf32>
}

