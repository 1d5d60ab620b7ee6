// RUN: shardc-opt %s -split-input-file -tc-print-plan -o /dev/null | FileCheck %s

// An elementwise op whose operand dies there writes its result into that
// operand's buffer (compiler/LowerToPlan.cpp, reuseDeadOperands): a
// gradient accumulated from two pieces, a residual add. No alloc for the
// result; the plan's memory model then predicts the smaller peak.

// %s dies at the second add, so %t is written into its buffer; %x is the
// function's input and is never overwritten; the output %u gets its own
// buffer (returned buffers keep their names).
// CHECK-LABEL: function @forward(
// CHECK-SAME:    %[[X:[0-9]+]]) -> (%[[U:[0-9]+]])
// CHECK:         alloc %[[S:[0-9]+]]
// CHECK-NEXT:    add %[[X]], %[[X]] -> %[[S]]
// CHECK-NEXT:    mul %[[S]], %[[X]] -> %[[S]]
// CHECK-NEXT:    alloc %[[U]]
// CHECK-NEXT:    sub %[[S]], %[[X]] -> %[[U]]
// CHECK-NEXT:    free %[[S]]
func.func @init() {
  return
}
func.func @forward(%x: tensor<4x3xf32> {tc.name = "x"}) -> (tensor<4x3xf32> {tc.name = "u"}) {
  %s = tc.add %x, %x : tensor<4x3xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
  %t = tc.mul %s, %x : tensor<4x3xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
  %u = tc.sub %t, %x : tensor<4x3xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
  return %u : tensor<4x3xf32>
}

// -----

// An operand of another shape (broadcast) or still read later keeps its
// buffer: the result is fresh.
// CHECK-LABEL: function @forward(
// CHECK:         alloc %[[S:[0-9]+]]
// CHECK-NEXT:    add %{{[0-9]+}}, %{{[0-9]+}} -> %[[S]]
// CHECK-NEXT:    alloc %[[T:[0-9]+]]
// CHECK-NEXT:    mul %[[S]], %{{[0-9]+}} -> %[[T]]
// CHECK-NEXT:    alloc %[[W:[0-9]+]]
// CHECK-NEXT:    add %[[T]], %[[S]] -> %[[W]]
func.func @init() {
  return
}
func.func @forward(%x: tensor<4x3xf32> {tc.name = "x"}, %b: tensor<3xf32> {tc.name = "b"}) -> (tensor<4x3xf32> {tc.name = "w"}) {
  %s = tc.add %x, %x : tensor<4x3xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
  %t = tc.mul %s, %b : tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>
  %w = tc.add %t, %s : tensor<4x3xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
  return %w : tensor<4x3xf32>
}
