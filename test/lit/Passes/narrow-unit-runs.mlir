// RUN: shardc-opt %s -split-input-file -tc-narrow-unit-runs | FileCheck %s
// RUN: shardc-opt %s -split-input-file -tc-narrow-unit-runs -tc-fsdp=world-size=2 | FileCheck %s --check-prefix=N2

// A tied head's backward in the root unit, written by hand: the input
// gradient reads the table, the weight gradient (a transposed matmul)
// reads none of the unit, and the norm's gradient reads @norm after it.
// The weight gradient moves after that last read, where tc-fsdp releases
// the gathered unit, and the transpose read only by it goes along (a view
// its matmul reads in place, with no release in between).

// CHECK-LABEL: func.func @forward(
// CHECK:         %[[DX:.*]] = tc.matmul %[[G:.*]], %{{.*}} : tensor<4x64xf32>, tensor<64x8xf32>
// CHECK-NEXT:    %[[DN:.*]] = tc.mul %[[DX]], %{{.*}} : tensor<4x8xf32>, tensor<8xf32>
// CHECK-NEXT:    %[[GT:.*]] = tc.transpose %[[G]], 0, 1
// CHECK-NEXT:    %[[DW:.*]] = tc.matmul %[[GT]], %{{.*}} : tensor<64x4xf32>, tensor<4x8xf32>
// CHECK-NEXT:    return %[[DW]], %[[DN]]

// N2-LABEL: func.func @forward(
// N2:         %[[U:.*]]:2 = tc.all_gather [@norm, @table] unit "root"
// N2:         tc.matmul %{{.*}}, %[[U]]#1 : tensor<4x64xf32>, tensor<64x8xf32>
// N2-NEXT:    tc.mul %{{.*}}, %[[U]]#0 : tensor<4x8xf32>, tensor<8xf32>
// N2-NEXT:    tc.release %[[U]]#0, %[[U]]#1
// N2-NEXT:    tc.transpose
// N2-NEXT:    tc.matmul %{{.*}} : tensor<64x4xf32>, tensor<4x8xf32>
tc.param @table : tensor<64x8xf32> device "cpu"
tc.param @norm : tensor<8xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<64x8xf32>
  tc.materialize %0 into @table : tensor<64x8xf32>
  %1 = tc.ones : tensor<8xf32>
  tc.materialize %1 into @norm : tensor<8xf32>
  return
}
func.func @forward(%x: tensor<4x8xf32>) -> (tensor<64x8xf32>, tensor<4x8xf32>) {
  %n = tc.use @norm : tensor<8xf32>
  %h = tc.mul %x, %n : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %e = tc.use @table : tensor<64x8xf32>
  %logits = tc.linear %h, %e : tensor<4x8xf32>, tensor<64x8xf32> -> tensor<4x64xf32>
  %g = tc.relu %logits : tensor<4x64xf32>
  %dx = tc.matmul %g, %e : tensor<4x64xf32>, tensor<64x8xf32> -> tensor<4x8xf32>
  %gt = tc.transpose %g, 0, 1 : tensor<4x64xf32> -> tensor<64x4xf32>
  %dw = tc.matmul %gt, %h : tensor<64x4xf32>, tensor<4x8xf32> -> tensor<64x8xf32>
  %dn = tc.mul %dx, %n : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return %dw, %dn : tensor<64x8xf32>, tensor<4x8xf32>
}

// -----
// An optimizer step follows its gradient (it touches only its parameter,
// read for the last time before it). The loss, a 4-byte scalar computed
// from the logits, stays: moving it would keep the [4, 64] logits alive
// to the end of the run.

// CHECK-LABEL: func.func @forward(
// CHECK:         %[[LOSS:.*]] = tc.cross_entropy
// CHECK-NEXT:    tc.relu
// CHECK:         %[[DN:.*]] = tc.mul
// CHECK-NEXT:    tc.transpose
// CHECK-NEXT:    %[[DW:.*]] = tc.matmul
// CHECK-NEXT:    tc.sgd_step @table, %[[DW]]
// CHECK-NEXT:    return %[[LOSS]], %[[DN]]
tc.param @table : tensor<64x8xf32> device "cpu"
tc.param @norm : tensor<8xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<64x8xf32>
  tc.materialize %0 into @table : tensor<64x8xf32>
  %1 = tc.ones : tensor<8xf32>
  tc.materialize %1 into @norm : tensor<8xf32>
  return
}
func.func @forward(%x: tensor<4x8xf32>, %t: tensor<4xi64>) -> (tensor<f32>, tensor<4x8xf32>) {
  %n = tc.use @norm : tensor<8xf32>
  %h = tc.mul %x, %n : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %e = tc.use @table : tensor<64x8xf32>
  %logits = tc.linear %h, %e : tensor<4x8xf32>, tensor<64x8xf32> -> tensor<4x64xf32>
  %loss = tc.cross_entropy %logits, %t : tensor<4x64xf32>, tensor<4xi64> -> tensor<f32>
  %g = tc.relu %logits : tensor<4x64xf32>
  %dx = tc.matmul %g, %e : tensor<4x64xf32>, tensor<64x8xf32> -> tensor<4x8xf32>
  %gt = tc.transpose %g, 0, 1 : tensor<4x64xf32> -> tensor<64x4xf32>
  %dw = tc.matmul %gt, %h : tensor<64x4xf32>, tensor<4x8xf32> -> tensor<64x8xf32>
  tc.sgd_step @table, %dw {lr = 0.1 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64} : tensor<64x8xf32>
  %dn = tc.mul %dx, %n : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return %loss, %dn : tensor<f32>, tensor<4x8xf32>
}

// -----
// Nothing is worth moving: the op between the reads is a reduction whose
// 256-byte result would keep its [4, 64] operand alive; the order stays.

// CHECK-LABEL: func.func @forward(
// CHECK:         tc.matmul
// CHECK-NEXT:    %[[S:.*]] = tc.op "sum"
// CHECK-NEXT:    tc.mul
// CHECK-NEXT:    return %[[S]]
tc.param @table : tensor<64x8xf32> device "cpu"
tc.param @norm : tensor<8xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<64x8xf32>
  tc.materialize %0 into @table : tensor<64x8xf32>
  %1 = tc.ones : tensor<8xf32>
  tc.materialize %1 into @norm : tensor<8xf32>
  return
}
func.func @forward(%x: tensor<4x8xf32>) -> (tensor<64xf32>, tensor<4x8xf32>) {
  %n = tc.use @norm : tensor<8xf32>
  %h = tc.mul %x, %n : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %e = tc.use @table : tensor<64x8xf32>
  %logits = tc.linear %h, %e : tensor<4x8xf32>, tensor<64x8xf32> -> tensor<4x64xf32>
  %g = tc.relu %logits : tensor<4x64xf32>
  %dx = tc.matmul %g, %e : tensor<4x64xf32>, tensor<64x8xf32> -> tensor<4x8xf32>
  %s = tc.op "sum"(%g) {dims = [0], keepdim = 0 : i64} : (tensor<4x64xf32>) -> tensor<64xf32>
  %dn = tc.mul %dx, %n : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return %s, %dn : tensor<64xf32>, tensor<4x8xf32>
}
