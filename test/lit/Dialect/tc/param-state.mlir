// RUN: shardc-opt %s | FileCheck %s
// RUN: shardc-opt %s | shardc-opt | FileCheck %s
// What a checkpoint holds: a non-persistent buffer (never saved) and a
// parameter tied to other state_dict names (saved under each of them).

// CHECK-LABEL: tc.param @wte : tensor<4x2xf32> device "cpu" tied ["lm_head.weight", "out.weight"]{{$}}
tc.param @wte : tensor<4x2xf32> device "cpu" tied ["lm_head.weight", "out.weight"]
// CHECK: tc.param @gain : tensor<2xf32> device "cpu" buffer non_persistent{{$}}
tc.param @gain : tensor<2xf32> device "cpu" buffer non_persistent
func.func @init() {
  %0 = tc.ones : tensor<4x2xf32>
  tc.materialize %0 into @wte : tensor<4x2xf32>
  %1 = tc.ones : tensor<2xf32>
  tc.materialize %1 into @gain : tensor<2xf32>
  return
}
