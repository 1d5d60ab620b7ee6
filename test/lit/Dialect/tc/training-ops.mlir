// RUN: shardc-opt %s -split-input-file | FileCheck %s
// RUN: shardc-opt %s -split-input-file | shardc-opt -split-input-file | FileCheck %s
// Round trip of the training ops (docs/training.md); the second RUN checks
// printed IR parses back.

// CHECK-LABEL: func.func @forward(
// CHECK:         %[[S:.*]] = tc.reduce_scatter %{{.*}} for @w : tensor<10x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT:    tc.reduce_scatter %{{.*}} for @w {sum} : tensor<10x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT:    tc.sgd_step @w, %[[S]] buffer @optim.momentum_buffer.w {lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, weight_decay = 0.000000e+00 : f64} : tensor<4x4xf32>
// CHECK-NEXT:    tc.sgd_step @w, %[[S]] buffer @optim.momentum_buffer.w {lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov, weight_decay = 0.000000e+00 : f64} : tensor<4x4xf32>
tc.param @w : tensor<10x4xf32> device "cpu" sharded <world_size = 3, chunk_rows = 4>
tc.param @optim.momentum_buffer.w : tensor<10x4xf32> device "cpu" non_persistent sharded <world_size = 3, chunk_rows = 4>
func.func @init() {
  %0 = tc.ones : tensor<4x4xf32> shard of tensor<10x4xf32>
  tc.materialize %0 into @w : tensor<4x4xf32>
  %1 = tc.zeros : tensor<4x4xf32> shard of tensor<10x4xf32>
  tc.materialize %1 into @optim.momentum_buffer.w : tensor<4x4xf32>
  return
}
func.func @forward(%g: tensor<10x4xf32>) {
  %s = tc.reduce_scatter %g for @w : tensor<10x4xf32> -> tensor<4x4xf32>
  // A data-parallel step sums the ranks' gradients.
  %t = tc.reduce_scatter %g for @w {sum} : tensor<10x4xf32> -> tensor<4x4xf32>
  tc.sgd_step @w, %s buffer @optim.momentum_buffer.w {lr = 0.1 : f64, momentum = 0.9 : f64, weight_decay = 0.0 : f64} : tensor<4x4xf32>
  // Nesterov momentum.
  tc.sgd_step @w, %s buffer @optim.momentum_buffer.w {lr = 0.1 : f64, momentum = 0.9 : f64, weight_decay = 0.0 : f64, nesterov} : tensor<4x4xf32>
  return
}

// -----

// A master weight's bfloat16 gradient reduced into its float32 shard.
// CHECK-LABEL: func.func @forward(
// CHECK:         tc.reduce_scatter %{{.*}} for @w : tensor<10x4xbf16> -> tensor<4x4xf32>
tc.param @w : tensor<10x4xf32> device "cpu" sharded <world_size = 3, chunk_rows = 4>
func.func @forward(%g: tensor<10x4xbf16>) {
  %s = tc.reduce_scatter %g for @w : tensor<10x4xbf16> -> tensor<4x4xf32>
  return
}

// -----

// CHECK-LABEL: func.func @forward(
// CHECK-NEXT:    tc.advance_step @optim.step
// CHECK-NEXT:    tc.adamw_step @w, %{{.*}} state(@optim.exp_avg.w, @optim.exp_avg_sq.w, @optim.step) {beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, eps = 1.000000e-08 : f64, lr = 1.000000e-03 : f64, weight_decay = 0.000000e+00 : f64} : tensor<8xbf16>
// CHECK-NEXT:    tc.adamw_step @w, %{{.*}} {{.*}}decay_steps = 900 : i64{{.*}}min_lr = 1.000000e-04 : f64, warmup_steps = 100 : i64{{.*}}} : tensor<8xbf16>
tc.param @optim.step : tensor<f32> device "cpu" buffer non_persistent
tc.param @w : tensor<8xbf16> device "cpu"
tc.param @optim.exp_avg.w : tensor<8xbf16> device "cpu" non_persistent
tc.param @optim.exp_avg_sq.w : tensor<8xbf16> device "cpu" non_persistent
func.func @init() {
  %0 = tc.zeros : tensor<f32>
  tc.materialize %0 into @optim.step : tensor<f32>
  %1 = tc.ones : tensor<8xbf16>
  tc.materialize %1 into @w : tensor<8xbf16>
  %2 = tc.zeros : tensor<8xbf16>
  tc.materialize %2 into @optim.exp_avg.w : tensor<8xbf16>
  %3 = tc.zeros : tensor<8xbf16>
  tc.materialize %3 into @optim.exp_avg_sq.w : tensor<8xbf16>
  return
}
func.func @forward(%g: tensor<8xbf16>) {
  tc.advance_step @optim.step
  tc.adamw_step @w, %g state(@optim.exp_avg.w, @optim.exp_avg_sq.w, @optim.step) {lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<8xbf16>
  // With a learning-rate schedule (the defaults, 0, are not printed).
  tc.adamw_step @w, %g state(@optim.exp_avg.w, @optim.exp_avg_sq.w, @optim.step) {lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, warmup_steps = 100 : i64, decay_steps = 900 : i64, min_lr = 1.0e-4 : f64} : tensor<8xbf16>
  return
}

// -----

// Gradient clipping: one norm of all the gradients (a shard and a
// replicated one), which each step reads (max_grad_norm, default 0, is
// printed when set).
// CHECK-LABEL: func.func @forward(
// CHECK:         %[[N:.*]] = tc.grad_norm %{{.*}}, %{{.*}} for [@w, @s] : tensor<4x4xf32>, tensor<f32>
// CHECK-NEXT:    tc.sgd_step @w, %{{.*}} clip(%[[N]]) {lr = 1.000000e-01 : f64, max_grad_norm = 1.000000e+00 : f64, momentum = 0.000000e+00 : f64, weight_decay = 0.000000e+00 : f64} : tensor<4x4xf32>
// CHECK-NEXT:    tc.adamw_step @s, %{{.*}} clip(%[[N]]) state(@optim.exp_avg.s, @optim.exp_avg_sq.s, @optim.step) {{.*}}max_grad_norm = 1.000000e+00 : f64{{.*}} : tensor<f32>
// CHECK-NEXT:    tc.sgd_step @w, %{{.*}} clip(%[[N]]) step @optim.step {{.*}}warmup_steps = 4 : i64{{.*}} : tensor<4x4xf32>
tc.param @optim.step : tensor<f32> device "cpu" buffer non_persistent
tc.param @w : tensor<10x4xf32> device "cpu" sharded <world_size = 3, chunk_rows = 4>
tc.param @s : tensor<f32> device "cpu"
tc.param @optim.exp_avg.s : tensor<f32> device "cpu" non_persistent
tc.param @optim.exp_avg_sq.s : tensor<f32> device "cpu" non_persistent
func.func @init() {
  %0 = tc.zeros : tensor<f32>
  tc.materialize %0 into @optim.step : tensor<f32>
  %1 = tc.ones : tensor<4x4xf32> shard of tensor<10x4xf32>
  tc.materialize %1 into @w : tensor<4x4xf32>
  %2 = tc.ones : tensor<f32>
  tc.materialize %2 into @s : tensor<f32>
  %3 = tc.zeros : tensor<f32>
  tc.materialize %3 into @optim.exp_avg.s : tensor<f32>
  %4 = tc.zeros : tensor<f32>
  tc.materialize %4 into @optim.exp_avg_sq.s : tensor<f32>
  return
}
func.func @forward(%gw: tensor<4x4xf32>, %gs: tensor<f32>) {
  %n = tc.grad_norm %gw, %gs for [@w, @s] : tensor<4x4xf32>, tensor<f32>
  tc.sgd_step @w, %gw clip(%n) {lr = 0.1 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64, max_grad_norm = 1.0 : f64} : tensor<4x4xf32>
  tc.adamw_step @s, %gs clip(%n) state(@optim.exp_avg.s, @optim.exp_avg_sq.s, @optim.step) {lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 1.0 : f64} : tensor<f32>
  // SGD with a schedule reads a step count.
  tc.sgd_step @w, %gw clip(%n) step @optim.step {lr = 0.1 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64, max_grad_norm = 1.0 : f64, warmup_steps = 4 : i64} : tensor<4x4xf32>
  return
}
