// RUN: shardc-opt %s -tc-optimizer='optimizer=sgd lr=0.1' | FileCheck %s
// RUN: shardc-opt %s -tc-optimizer='optimizer=sgd lr=0.1' -tc-fsdp=world-size=2 | FileCheck %s --check-prefix=N2

// Where tc-optimizer puts a step: right after its gradient and the last
// read of its parameter, here a read of a view of it after the gradient is
// complete (a transpose the lowering reads in place): the step waits for
// it, or the read would see the updated value (compiler/MatmulOperands.cpp
// also refuses to read a transpose in place across a step). At N = 2 the
// step reads the gradient's shard, reduced right after the gradient.

// N2-LABEL: func.func @forward(
// N2:         %[[S:.*]] = tc.reduce_scatter %{{.*}} for @w
// N2:         tc.matmul
// N2-NEXT:    tc.sgd_step @w, %[[S]]

// A read of a view of the parameter after its gradient is complete (a
// transpose the lowering reads in place): the step waits for it, or the
// read would see the updated value.

// CHECK-LABEL: func.func @forward(
// CHECK:         %[[G:.*]] = tc.mul %[[X:.*]], %[[X]]
// CHECK-NEXT:    %[[T:.*]] = tc.transpose %{{.*}}, 0, 1
// CHECK-NEXT:    %[[Y:.*]] = tc.matmul %[[X]], %[[T]]
// CHECK-NEXT:    tc.sgd_step @w, %[[G]]
// CHECK-NEXT:    return %[[Y]]
tc.param @w : tensor<4x4xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<4x4xf32>
  tc.materialize %0 into @w : tensor<4x4xf32>
  return
}
func.func @forward(%x: tensor<4x4xf32> {tc.name = "x"}) -> (tensor<4x4xf32> {tc.name = "y"}, tensor<4x4xf32> {tc.name = "grad.w"}) {
  %w = tc.use @w : tensor<4x4xf32>
  %g = tc.mul %x, %x : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %t = tc.transpose %w, 0, 1 : tensor<4x4xf32> -> tensor<4x4xf32>
  %y = tc.matmul %x, %t : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  return %y, %g : tensor<4x4xf32>, tensor<4x4xf32>
}
