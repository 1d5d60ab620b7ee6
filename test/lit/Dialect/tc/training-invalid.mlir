// RUN: shardc-opt %s -split-input-file -verify-diagnostics

tc.param @w : tensor<10x4xf32> device "cpu" sharded <world_size = 3, chunk_rows = 4>
func.func @forward(%g: tensor<10x4xf32>) {
  // expected-error @+1 {{gradient type 'tensor<10x4xf32>' differs from the type @w is stored in ('tensor<4x4xf32>'); a sharded parameter's gradient is reduced into its shard with tc.reduce_scatter}}
  tc.sgd_step @w, %g {lr = 0.1 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64} : tensor<10x4xf32>
  return
}

// -----

tc.param @w : tensor<4xf32> device "cpu"
func.func @forward(%g: tensor<4xf32>) {
  // expected-error @+1 {{a momentum buffer goes with a non-zero momentum, and only then}}
  tc.sgd_step @w, %g {lr = 0.1 : f64, momentum = 0.9 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
  return
}

// -----

tc.param @w : tensor<4xf32> device "cpu"
func.func @forward(%g: tensor<4xf32>) {
  // expected-error @+1 {{learning rate must be positive}}
  tc.sgd_step @w, %g {lr = 0.0 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
  return
}

// -----

tc.param @stats : tensor<4xf32> device "cpu" buffer
func.func @forward(%g: tensor<4xf32>) {
  // expected-error @+1 {{updates @stats, a buffer; optimizers update parameters}}
  tc.sgd_step @stats, %g {lr = 0.1 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
  return
}

// -----

tc.param @w : tensor<4xf32> device "cpu"
tc.param @optim.momentum_buffer.w : tensor<5xf32> device "cpu" non_persistent
func.func @forward(%g: tensor<4xf32>) {
  // expected-error @+1 {{optimizer state @optim.momentum_buffer.w ('tensor<5xf32>' stored) must have the type and sharding of parameter w ('tensor<4xf32>' stored)}}
  tc.sgd_step @w, %g buffer @optim.momentum_buffer.w {lr = 0.1 : f64, momentum = 0.9 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
  return
}

// -----

tc.param @w : tensor<4xf32> device "cpu"
func.func @forward(%g: tensor<4xf32>) {
  // expected-error @+1 {{parameter @w is not sharded; its gradient needs no reduction}}
  %s = tc.reduce_scatter %g for @w : tensor<4xf32> -> tensor<2xf32>
  return
}

// -----

tc.param @w : tensor<10x4xf32> device "cpu" sharded <world_size = 3, chunk_rows = 4>
func.func @forward(%g: tensor<10x4xf32>) {
  // expected-error @+1 {{reduces 'tensor<10x4xf32>' into 'tensor<5x4xf32>', but parameter @w is 'tensor<10x4xf32>' stored as 'tensor<4x4xf32>'}}
  %s = tc.reduce_scatter %g for @w : tensor<10x4xf32> -> tensor<5x4xf32>
  return
}

// -----

// A gradient is reduced into a shard that holds every one of its values:
// float16 into bfloat16 would round.
tc.param @w : tensor<10x4xbf16> device "cpu" sharded <world_size = 3, chunk_rows = 4>
func.func @forward(%g: tensor<10x4xf16>) {
  // expected-error @+1 {{reduces a 'f16' gradient into parameter @w of 'bf16', which does not hold every 'f16' value}}
  %s = tc.reduce_scatter %g for @w : tensor<10x4xf16> -> tensor<4x4xbf16>
  return
}

// -----

tc.param @w : tensor<4xf32> device "cpu"
tc.param @m : tensor<4xf32> device "cpu"
tc.param @step : tensor<f32> device "cpu" buffer
func.func @forward(%g: tensor<4xf32>) {
  // expected-error @+1 {{betas must lie in [0, 1), got 1}}
  tc.adamw_step @w, %g state(@m, @m, @step) {lr = 0.1 : f64, beta1 = 0.9 : f64, beta2 = 1.0 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
  return
}

// -----

tc.param @w : tensor<4xf32> device "cpu"
tc.param @m : tensor<4xf32> device "cpu"
tc.param @step : tensor<2xf32> device "cpu" buffer
func.func @forward(%g: tensor<4xf32>) {
  // expected-error @+1 {{step count @step must be a 0-d floating buffer}}
  tc.adamw_step @w, %g state(@m, @m, @step) {lr = 0.1 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
  return
}

// -----

tc.param @w : tensor<4xf32> device "cpu"
tc.param @m : tensor<4xf32> device "cpu"
tc.param @step : tensor<f32> device "cpu" buffer
func.func @forward(%g: tensor<4xf32>) {
  // expected-error @+1 {{min_lr must lie in [0, lr], got 5.000000e-01}}
  tc.adamw_step @w, %g state(@m, @m, @step) {lr = 0.1 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, decay_steps = 10 : i64, min_lr = 0.5 : f64} : tensor<4xf32>
  return
}

// -----

tc.param @w : tensor<4xf32> device "cpu"
tc.param @m : tensor<4xf32> device "cpu"
tc.param @step : tensor<f32> device "cpu" buffer
func.func @forward(%g: tensor<4xf32>) {
  // expected-error @+1 {{warmup_steps and decay_steps must not be negative}}
  tc.adamw_step @w, %g state(@m, @m, @step) {lr = 0.1 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, warmup_steps = -2 : i64} : tensor<4xf32>
  return
}

// -----

tc.param @count : tensor<f32> device "cpu"
func.func @forward() {
  // expected-error @+1 {{step count @count must be a 0-d floating buffer}}
  tc.advance_step @count
  return
}

// -----

tc.param @w : tensor<4xf32> device "cpu"
tc.param @step : tensor<f32> device "cpu" buffer
func.func @forward(%g: tensor<4xf32>) {
  // expected-error @+1 {{a step count goes with a learning-rate schedule (warmup_steps or decay_steps), and only then}}
  tc.sgd_step @w, %g step @step {lr = 0.1 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
  return
}

// -----

tc.param @w : tensor<4xf32> device "cpu"
func.func @forward(%g: tensor<4xf32>) {
  // expected-error @+1 {{a step count goes with a learning-rate schedule (warmup_steps or decay_steps), and only then}}
  tc.sgd_step @w, %g {lr = 0.1 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64, warmup_steps = 3 : i64} : tensor<4xf32>
  return
}

// -----

tc.param @w : tensor<4xf32> device "cpu"
func.func @forward(%g: tensor<4xf32>) {
  // expected-error @+1 {{Nesterov momentum needs a non-zero momentum}}
  tc.sgd_step @w, %g {lr = 0.1 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64, nesterov} : tensor<4xf32>
  return
}

// -----

// Gradient clipping: a clip without max_grad_norm, max_grad_norm without a
// clip, a gradient not in its parameter's stored layout, and mismatched
// lists.
tc.param @w : tensor<4xf32> device "cpu"
func.func @forward(%g: tensor<4xf32>) {
  %n = tc.grad_norm %g for [@w] : tensor<4xf32>
  // expected-error @+1 {{clips with clip(%norm) and max_grad_norm > 0 together, or neither}}
  tc.sgd_step @w, %g clip(%n) {lr = 0.1 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
  return
}

// -----

tc.param @w : tensor<4xf32> device "cpu"
func.func @forward(%g: tensor<4xf32>) {
  // expected-error @+1 {{clips with clip(%norm) and max_grad_norm > 0 together, or neither}}
  tc.sgd_step @w, %g {lr = 0.1 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64, max_grad_norm = 1.0 : f64} : tensor<4xf32>
  return
}

// -----

tc.param @w : tensor<10x4xf32> device "cpu" sharded <world_size = 3, chunk_rows = 4>
func.func @forward(%g: tensor<10x4xf32>) {
  // expected-error @+1 {{gradient type 'tensor<10x4xf32>' differs from the type @w is stored in ('tensor<4x4xf32>')}}
  %n = tc.grad_norm %g for [@w] : tensor<10x4xf32>
  return
}

// -----

tc.param @w : tensor<4xf32> device "cpu"
func.func @forward(%g: tensor<4xf32>) {
  // expected-error @+1 {{has 2 gradients for 1 parameters}}
  %n = tc.grad_norm %g, %g for [@w] : tensor<4xf32>, tensor<4xf32>
  return
}

// -----

tc.param @w : tensor<4xf32> device "cpu"
func.func @forward(%g: tensor<4xf32>) {
  // expected-error @+1 {{max_grad_norm must not be negative}}
  tc.sgd_step @w, %g {lr = 0.1 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64, max_grad_norm = -1.0 : f64} : tensor<4xf32>
  return
}
