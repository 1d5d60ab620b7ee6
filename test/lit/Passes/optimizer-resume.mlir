// RUN: shardc-opt %s -tc-optimizer='optimizer=sgd lr=0.1 momentum=0.9 state-file=half.st' | FileCheck %s

// Resume (state-file): the optimizer state is a tc.load of the tensor of
// its name, and so is dropout's step counter @rng.step (docs/rng.md), whose
// graph init (zeros) goes away: the resumed run draws the masks the straight
// run would. The model's own parameters keep their init (--load replaces it).

// CHECK-LABEL: func.func @init()
// CHECK:         %[[W:.*]] = tc.ones : tensor<4x4xf32>
// CHECK-NEXT:    tc.materialize %[[W]] into @w
// CHECK:         %[[STEP:.*]] = tc.load file "half.st" tensor "rng.step" : tensor<f32>
// CHECK-NEXT:    tc.materialize %[[STEP]] into @rng.step : tensor<f32>
// CHECK:         %[[M:.*]] = tc.load file "half.st" tensor "optim.momentum_buffer.w" : tensor<4x4xf32>
// CHECK-NEXT:    tc.materialize %[[M]] into @optim.momentum_buffer.w
// CHECK-NOT:     tc.zeros
// CHECK:         return

tc.param @w : tensor<4x4xf32> device "cpu"
tc.param @rng.step : tensor<f32> device "cpu" buffer non_persistent
func.func @init() {
  %0 = tc.ones : tensor<4x4xf32>
  tc.materialize %0 into @w : tensor<4x4xf32>
  %1 = tc.zeros : tensor<f32>
  tc.materialize %1 into @rng.step : tensor<f32>
  return
}
func.func @forward(%x: tensor<4x4xf32> {tc.name = "x"}) -> (tensor<4x4xf32> {tc.name = "y"}, tensor<4x4xf32> {tc.name = "grad.w"}) {
  %w = tc.use @w : tensor<4x4xf32>
  %y = tc.mul %x, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  return %y, %x : tensor<4x4xf32>, tensor<4x4xf32>
}
