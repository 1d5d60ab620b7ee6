// RUN: shardc-opt %s -tc-optimizer='optimizer=sgd lr=0.1' -tc-fsdp='world-size=2 sum-gradients=true split-summed-gradients=true' | FileCheck %s
// RUN: shardc-opt %s -tc-optimizer='optimizer=sgd lr=0.1' -tc-fsdp='world-size=2 sum-gradients=true' | FileCheck %s --check-prefix=WHOLE

// Gradient accumulation (docs/training.md): the gradient is a sum of the
// micro-steps' gradients. With split-summed-gradients each addend is
// reduce-scattered right after it is computed and the shards are added as
// soon as both exist, so no full gradient outlives its micro-step; the
// renames the joint graph names gradients by are seen through.

// CHECK-LABEL: func.func @forward(
// CHECK:         %[[G1:.*]] = tc.mul
// CHECK-NEXT:    %[[S1:.*]] = tc.reduce_scatter %[[G1]] for @w {sum} : tensor<10x4xf32> -> tensor<5x4xf32>
// CHECK:         %[[G2:.*]] = tc.mul
// CHECK-NEXT:    %[[S2:.*]] = tc.reduce_scatter %[[G2]] for @w {sum}
// CHECK-NEXT:    %[[SUM:.*]] = tc.add %[[S1]], %[[S2]] : tensor<5x4xf32>, tensor<5x4xf32> -> tensor<5x4xf32>
// CHECK:         %[[G3:.*]] = tc.mul
// CHECK-NEXT:    %[[S3:.*]] = tc.reduce_scatter %[[G3]] for @w {sum}
// CHECK-NEXT:    %[[TOTAL:.*]] = tc.add %[[SUM]], %[[S3]]
// CHECK-NOT:     tc.reshape
// CHECK:         tc.sgd_step @w, %[[TOTAL]]

// Without the option the sum is reduced once, whole (a weight used twice
// has its two gradients added before one reduce_scatter).
// WHOLE-LABEL: func.func @forward(
// WHOLE-COUNT-1: tc.reduce_scatter
// WHOLE-NOT:     tc.reduce_scatter
tc.param @w : tensor<10x4xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<10x4xf32>
  tc.materialize %0 into @w : tensor<10x4xf32>
  return
}
func.func @forward(%x: tensor<10x4xf32> {tc.name = "x"}) -> (tensor<10x4xf32> {tc.name = "grad.w"}) {
  %w = tc.use @w : tensor<10x4xf32>
  %g1 = tc.mul %x, %w : tensor<10x4xf32>, tensor<10x4xf32> -> tensor<10x4xf32>
  %r1 = tc.reshape %g1 : tensor<10x4xf32> -> tensor<10x4xf32>
  %g2 = tc.mul %x, %x : tensor<10x4xf32>, tensor<10x4xf32> -> tensor<10x4xf32>
  %sum = tc.add %r1, %g2 : tensor<10x4xf32>, tensor<10x4xf32> -> tensor<10x4xf32>
  %g3 = tc.mul %w, %w : tensor<10x4xf32>, tensor<10x4xf32> -> tensor<10x4xf32>
  %total = tc.add %sum, %g3 : tensor<10x4xf32>, tensor<10x4xf32> -> tensor<10x4xf32>
  %named = tc.reshape %total : tensor<10x4xf32> -> tensor<10x4xf32>
  return %named : tensor<10x4xf32>
}
