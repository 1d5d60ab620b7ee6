// RUN: shardc-opt %s -split-input-file | FileCheck %s
// RUN: shardc-opt %s -split-input-file | shardc-opt -split-input-file | FileCheck %s
// tc.update_buffer: forward overwrites a buffer (a training-mode batch
// norm's running statistics, a graph's "updates").

// CHECK-LABEL: tc.param @bn.running_mean
tc.param @bn.running_mean : tensor<4xf32> device "cpu" buffer
func.func @init() {
  %0 = tc.zeros : tensor<4xf32>
  tc.materialize %0 into @bn.running_mean : tensor<4xf32>
  return
}
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32>)
func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: %[[OLD:.*]] = tc.use @bn.running_mean : tensor<4xf32>
  %old = tc.use @bn.running_mean : tensor<4xf32>
  // CHECK: %[[NEW:.*]] = tc.add %[[OLD]], %[[OLD]] : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %new = tc.add %old, %old : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  // CHECK: tc.update_buffer @bn.running_mean, %[[NEW]] : tensor<4xf32>
  tc.update_buffer @bn.running_mean, %new : tensor<4xf32>
  // CHECK: return %[[X]]
  return %x : tensor<2x4xf32>
}
