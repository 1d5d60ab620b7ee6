// RUN: shardc-opt %s -split-input-file -tc-optimizer='optimizer=sgd lr=0.1' -tc-fsdp='world-size=2 sum-gradients=true' -verify-diagnostics | FileCheck %s

// Data-parallel training (docs/training.md): each rank's gradient is its
// share of the loss over the global batch, so tc-fsdp's reduce_scatter sums
// the ranks' gradients ({sum}) instead of averaging equal ones.

// CHECK-LABEL: func.func @forward(
// CHECK:         %[[GW:.*]] = tc.mul
// CHECK-NEXT:    %[[SW:.*]] = tc.reduce_scatter %[[GW]] for @w {sum} : tensor<10x4xf32> -> tensor<5x4xf32>
// CHECK:         tc.sgd_step @w, %[[SW]]
tc.param @w : tensor<10x4xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<10x4xf32>
  tc.materialize %0 into @w : tensor<10x4xf32>
  return
}
func.func @forward(%x: tensor<10x4xf32> {tc.name = "x"}) -> (tensor<10x4xf32> {tc.name = "y"}, tensor<10x4xf32> {tc.name = "grad.w"}) {
  %w = tc.use @w : tensor<10x4xf32>
  %y = tc.add %w, %x : tensor<10x4xf32>, tensor<10x4xf32> -> tensor<10x4xf32>
  %gw = tc.mul %x, %y : tensor<10x4xf32>, tensor<10x4xf32> -> tensor<10x4xf32>
  return %y, %gw : tensor<10x4xf32>, tensor<10x4xf32>
}

// -----

// A 0-d parameter is not sharded: its ranks' gradients would have nowhere
// to be summed.
tc.param @scale : tensor<f32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<f32>
  tc.materialize %0 into @scale : tensor<f32>
  return
}
func.func @forward(%x: tensor<f32> {tc.name = "x"}) -> (tensor<f32> {tc.name = "grad.scale"}) {
  %s = tc.use @scale : tensor<f32>
  %g = tc.mul %x, %s : tensor<f32>, tensor<f32> -> tensor<f32>
  // The step stands where the gradient was returned.
  // expected-error @+1 {{'tc.sgd_step' op updates @scale, which is not sharded (a 0-d or empty parameter): its data-parallel gradient differs per rank and has no shard to be summed into}}
  return %g : tensor<f32>
}
