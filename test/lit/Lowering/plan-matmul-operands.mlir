// RUN: shardc-opt %s -split-input-file -tc-print-plan -o /dev/null | FileCheck %s

// A transpose of the last two dims read only by matmuls is not copied: the
// matmuls read its source in place, stored transposed (transpose_a /
// transpose_b; compiler/MatmulOperands.h). A linear layer's weight gradient
// x^T g, attention's k^T.

// CHECK-LABEL: function @forward(
// CHECK-SAME:    %[[X:[0-9]+]], %[[G:[0-9]+]], %[[W:[0-9]+]]) -> (%[[DW:[0-9]+]], %[[Y:[0-9]+]])
// CHECK-NOT:     strided_copy
// CHECK:         alloc %[[DW]]
// CHECK-NEXT:    matmul %[[X]], %[[G]] -> %[[DW]] {transpose_a = 1}
// CHECK-NEXT:    alloc %[[Y]]
// CHECK-NEXT:    matmul %[[G]], %[[W]] -> %[[Y]] {transpose_b = 1}
// CHECK-NOT:     strided_copy
func.func @init() {
  return
}
func.func @forward(%x: tensor<6x4xf32> {tc.name = "x"}, %g: tensor<6x3xf32> {tc.name = "g"},
                   %w: tensor<5x3xf32> {tc.name = "w"})
    -> (tensor<4x3xf32> {tc.name = "dw"}, tensor<6x5xf32> {tc.name = "y"}) {
  %xt = tc.transpose %x, 0, 1 : tensor<6x4xf32> -> tensor<4x6xf32>
  %dw = tc.matmul %xt, %g : tensor<4x6xf32>, tensor<6x3xf32> -> tensor<4x3xf32>
  %wt = tc.transpose %w, 1, 0 : tensor<5x3xf32> -> tensor<3x5xf32>
  %y = tc.matmul %g, %wt : tensor<6x3xf32>, tensor<3x5xf32> -> tensor<6x5xf32>
  return %dw, %y : tensor<4x3xf32>, tensor<6x5xf32>
}

// -----

// Batched: a permute that swaps the last two dims is the same view; one
// swapping batch dims is copied.
// CHECK-LABEL: function @forward(
// CHECK-SAME:    %[[Q:[0-9]+]], %[[K:[0-9]+]]) -> (%[[S:[0-9]+]], %[[R:[0-9]+]])
// CHECK:         alloc %[[S]]
// CHECK-NEXT:    matmul %[[Q]], %[[K]] -> %[[S]] {transpose_b = 1}
// CHECK-NEXT:    alloc %[[P:[0-9]+]]
// CHECK-NEXT:    strided_copy %[[K]] -> %[[P]]
// CHECK-NEXT:    alloc %[[R]]
// CHECK-NEXT:    matmul %[[Q]], %[[P]] -> %[[R]]{{$}}
func.func @init() {
  return
}
func.func @forward(%q: tensor<3x3x4x8xf32> {tc.name = "q"}, %k: tensor<3x3x5x8xf32> {tc.name = "k"})
    -> (tensor<3x3x4x5xf32> {tc.name = "s"}, tensor<3x3x4x5xf32> {tc.name = "r"}) {
  %kt = tc.permute %k [0, 1, 3, 2] : tensor<3x3x5x8xf32> -> tensor<3x3x8x5xf32>
  %s = tc.matmul %q, %kt : tensor<3x3x4x8xf32>, tensor<3x3x8x5xf32> -> tensor<3x3x4x5xf32>
  %p = tc.permute %k [1, 0, 3, 2] : tensor<3x3x5x8xf32> -> tensor<3x3x8x5xf32>
  %r = tc.matmul %q, %p : tensor<3x3x4x8xf32>, tensor<3x3x8x5xf32> -> tensor<3x3x4x5xf32>
  return %s, %r : tensor<3x3x4x5xf32>, tensor<3x3x4x5xf32>
}

// -----

// A transpose another op reads too, or the function returns, is copied.
// CHECK-LABEL: function @forward(
// CHECK:         strided_copy
// CHECK:         matmul %{{[0-9]+}}, %{{[0-9]+}} -> %{{[0-9]+}}{{$}}
// CHECK:         add
// CHECK:         strided_copy
// CHECK:         matmul %{{[0-9]+}}, %{{[0-9]+}} -> %{{[0-9]+}}{{$}}
func.func @init() {
  return
}
func.func @forward(%x: tensor<4x4xf32> {tc.name = "x"}, %y: tensor<4x4xf32> {tc.name = "y"})
    -> (tensor<4x4xf32> {tc.name = "a"}, tensor<4x4xf32> {tc.name = "b"}, tensor<4x4xf32> {tc.name = "t"}) {
  %xt = tc.transpose %x, 0, 1 : tensor<4x4xf32> -> tensor<4x4xf32>
  %m = tc.matmul %xt, %y : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %a = tc.add %xt, %m : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %yt = tc.transpose %y, 0, 1 : tensor<4x4xf32> -> tensor<4x4xf32>
  %b = tc.matmul %x, %yt : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  return %a, %b, %yt : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// A gathered weight's transpose is read in place while the unit is
// gathered; released before the matmul, it is copied first (the copy
// outlives the gathered buffer).
// CHECK-LABEL: function @forward(
// CHECK-DAG:     %[[W:[0-9]+]] = alias "w" float32 [5, 4] of %[[U:[0-9]+]] + 0
// CHECK:         all_gather
// CHECK-NEXT:    alloc %[[Y:[0-9]+]]
// CHECK-NEXT:    matmul %{{[0-9]+}}, %[[W]] -> %[[Y]] {transpose_b = 1}
// CHECK:         alloc %[[C:[0-9]+]]
// CHECK-NEXT:    strided_copy %[[W]] -> %[[C]]
// CHECK-NEXT:    free %[[U]]
// CHECK:         matmul %{{[0-9]+}}, %[[C]] -> %{{[0-9]+}}{{$}}
module attributes {tc.world_size = 2 : i64} {
  tc.param @w : tensor<5x4xf32> device "cpu" unit "h.0" sharded <world_size = 2, chunk_rows = 3>
  func.func @init() {
    %0 = tc.zeros : tensor<3x4xf32> shard of tensor<5x4xf32>
    tc.materialize %0 into @w : tensor<3x4xf32>
    return
  }
  func.func @forward(%x: tensor<2x4xf32> {tc.name = "x"}) -> (tensor<2x5xf32> {tc.name = "y"}, tensor<2x5xf32> {tc.name = "z"}) {
    %0 = tc.all_gather [@w] unit "h.0" : tensor<5x4xf32>
    %wt = tc.transpose %0, 0, 1 : tensor<5x4xf32> -> tensor<4x5xf32>
    %y = tc.matmul %x, %wt : tensor<2x4xf32>, tensor<4x5xf32> -> tensor<2x5xf32>
    %wt2 = tc.transpose %0, 0, 1 : tensor<5x4xf32> -> tensor<4x5xf32>
    tc.release %0 : tensor<5x4xf32>
    %z = tc.matmul %x, %wt2 : tensor<2x4xf32>, tensor<4x5xf32> -> tensor<2x5xf32>
    return %y, %z : tensor<2x5xf32>, tensor<2x5xf32>
  }
}
