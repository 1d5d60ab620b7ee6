// RUN: shardc-opt %s -split-input-file -tc-optimizer='optimizer=sgd lr=0.1' -tc-fsdp=world-size=2 | FileCheck %s

// Master weights (docs/graph-format.md): @w is stored in float32, forward
// and backward compute in bfloat16, and autodiff's rule for the cast of @w
// converts its bfloat16 gradient to float32. tc-fsdp's reduce_scatter reads
// the bfloat16 gradient itself and widens each value exactly (the same
// bytes): the full-size float32 copy is never made, and the bfloat16
// gradient is freed one op earlier.

// CHECK-LABEL: func.func @forward(
// CHECK:         %[[G:.*]] = tc.mul %{{.*}}, %{{.*}} : tensor<10x4xbf16>
// CHECK-NEXT:    %[[S:.*]] = tc.reduce_scatter %[[G]] for @w : tensor<10x4xbf16> -> tensor<5x4xf32>
// CHECK-NOT:     tc.op "cast"
// CHECK:         tc.sgd_step @w, %[[S]]
tc.param @w : tensor<10x4xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<10x4xf32>
  tc.materialize %0 into @w : tensor<10x4xf32>
  return
}
func.func @forward(%x: tensor<10x4xbf16> {tc.name = "x"}) -> (tensor<10x4xbf16> {tc.name = "y"}, tensor<10x4xf32> {tc.name = "grad.w"}) {
  %w = tc.use @w : tensor<10x4xbf16>
  %y = tc.add %w, %x : tensor<10x4xbf16>, tensor<10x4xbf16> -> tensor<10x4xbf16>
  %g = tc.mul %x, %y : tensor<10x4xbf16>, tensor<10x4xbf16> -> tensor<10x4xbf16>
  %g32 = tc.op "cast"(%g) {dtype = "float32"} : (tensor<10x4xbf16>) -> tensor<10x4xf32>
  return %y, %g32 : tensor<10x4xbf16>, tensor<10x4xf32>
}

// -----

// The cast stays where something else reads the float32 gradient (here
// forward's output), and where it does not widen exactly (float16 to
// bfloat16 rounds): the reduce_scatter then reads the cast.

// CHECK-LABEL: func.func @forward(
// CHECK:         %[[C:.*]] = tc.op "cast"(%{{.*}}) {dtype = "float32"}
// CHECK-NEXT:    %[[S:.*]] = tc.reduce_scatter %[[C]] for @w : tensor<10x4xf32> -> tensor<5x4xf32>
// CHECK:         %[[D:.*]] = tc.op "cast"(%{{.*}}) {dtype = "bfloat16"}
// CHECK-NEXT:    tc.reduce_scatter %[[D]] for @v : tensor<10x4xbf16> -> tensor<5x4xbf16>
// CHECK:         return %{{.*}}, %[[C]]
tc.param @w : tensor<10x4xf32> device "cpu"
tc.param @v : tensor<10x4xbf16> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<10x4xf32>
  tc.materialize %0 into @w : tensor<10x4xf32>
  %1 = tc.ones : tensor<10x4xbf16>
  tc.materialize %1 into @v : tensor<10x4xbf16>
  return
}
func.func @forward(%x: tensor<10x4xbf16> {tc.name = "x"}, %h: tensor<10x4xf16> {tc.name = "h"}) -> (tensor<10x4xbf16> {tc.name = "y"}, tensor<10x4xf32> {tc.name = "g32"}, tensor<10x4xf32> {tc.name = "grad.w"}, tensor<10x4xbf16> {tc.name = "grad.v"}) {
  %w = tc.use @w : tensor<10x4xbf16>
  %y = tc.add %w, %x : tensor<10x4xbf16>, tensor<10x4xbf16> -> tensor<10x4xbf16>
  %g = tc.mul %x, %y : tensor<10x4xbf16>, tensor<10x4xbf16> -> tensor<10x4xbf16>
  %g32 = tc.op "cast"(%g) {dtype = "float32"} : (tensor<10x4xbf16>) -> tensor<10x4xf32>
  %gv = tc.op "cast"(%h) {dtype = "bfloat16"} : (tensor<10x4xf16>) -> tensor<10x4xbf16>
  return %y, %g32, %g32, %gv : tensor<10x4xbf16>, tensor<10x4xf32>, tensor<10x4xf32>, tensor<10x4xbf16>
}
