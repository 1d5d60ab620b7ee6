// RUN: shardc-opt %s -split-input-file -tc-optimizer='optimizer=sgd lr=0.1' -verify-diagnostics
// RUN: not shardc-opt %s -split-input-file -tc-optimizer='optimizer=rmsprop lr=0.1' 2>&1 | FileCheck %s --check-prefix=NAME
// RUN: not shardc-opt %s -split-input-file -tc-optimizer='optimizer=sgd lr=0' 2>&1 | FileCheck %s --check-prefix=LR
// RUN: not shardc-opt %s -split-input-file -tc-optimizer='optimizer=adamw lr=0.1 momentum=0.9' 2>&1 | FileCheck %s --check-prefix=MOMENTUM
// RUN: not shardc-opt %s -split-input-file -tc-optimizer='optimizer=adamw lr=0.1 beta2=1' 2>&1 | FileCheck %s --check-prefix=BETA
// RUN: not shardc-opt %s -split-input-file -tc-optimizer='optimizer=sgd lr=0.1 warmup-steps=-3' 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not shardc-opt %s -split-input-file -tc-optimizer='optimizer=adamw lr=0.1 min-lr=0.01' 2>&1 | FileCheck %s --check-prefix=MINLR
// RUN: not shardc-opt %s -split-input-file -tc-optimizer='optimizer=sgd lr=0.1 max-grad-norm=-1' 2>&1 | FileCheck %s --check-prefix=CLIP
// RUN: not shardc-opt %s -split-input-file -tc-optimizer='optimizer=sgd lr=0.1 nesterov=true' 2>&1 | FileCheck %s --check-prefix=NESTEROV
// RUN: not shardc-opt %S/optimizer.mlir -split-input-file -tc-optimizer='optimizer=sgd lr=0.1 no-weight-decay=LayerNorm' 2>&1 | FileCheck %s --check-prefix=NODECAY

// NAME: tc-optimizer: optimizer must be sgd or adamw, got 'rmsprop'
// LR: tc-optimizer: the learning rate must be positive, got 0.000000
// MOMENTUM: tc-optimizer: momentum is SGD's; AdamW has beta1 and beta2
// BETA: tc-optimizer: betas must lie in [0, 1)
// SCHEDULE: tc-optimizer: warmup-steps and decay-steps must not be negative
// MINLR: tc-optimizer: min-lr is where the decay ends; give decay-steps
// CLIP: tc-optimizer: max-grad-norm must not be negative (0: no clipping)
// NESTEROV: tc-optimizer: nesterov is SGD's Nesterov momentum; it needs momentum > 0
// NODECAY: tc-optimizer: no-weight-decay pattern 'LayerNorm' matches no parameter the optimizer updates

tc.param @w : tensor<4xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<4xf32>
  tc.materialize %0 into @w : tensor<4xf32>
  return
}
// expected-error @+1 {{returns no gradient (a result named grad.P for a parameter @P); tc-optimizer needs the joint graph of --grad}}
func.func @forward(%x: tensor<4xf32> {tc.name = "x"}) -> (tensor<4xf32> {tc.name = "y"}) {
  %w = tc.use @w : tensor<4xf32>
  %y = tc.add %w, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

tc.param @w : tensor<4xf32> device "cpu"
// expected-error @+1 {{uses the name prefix 'optim.', which tc-optimizer keeps for optimizer state}}
tc.param @optim.lr : tensor<f32> device "cpu" buffer
func.func @init() {
  %0 = tc.ones : tensor<4xf32>
  tc.materialize %0 into @w : tensor<4xf32>
  %1 = tc.ones : tensor<f32>
  tc.materialize %1 into @optim.lr : tensor<f32>
  return
}
func.func @forward(%x: tensor<4xf32> {tc.name = "x"}) -> (tensor<4xf32> {tc.name = "grad.w"}) {
  return %x : tensor<4xf32>
}
