// RUN: shardc-opt %s -split-input-file -tc-fold-param-casts | FileCheck %s
// RUN: shardc-opt %s -split-input-file -tc-fold-param-casts -tc-fsdp=world-size=2 | FileCheck %s --check-prefix=N2

// Master weights (docs/graph-format.md): @w is stored in float32 and forward
// reads it through one cast to bfloat16, used twice (a forward and a
// backward read). Each user gets its own read of @w in bfloat16, right
// before it; the cast and the float32 read go. At N = 2, tc-fsdp gathers
// those reads in bfloat16 (one run here: no other unit in between): the
// unit's full values exist only in the compute dtype.

// CHECK-LABEL: func.func @forward(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x4xbf16>
// CHECK-NOT:     tc.op "cast"
// CHECK:         %[[W1:.*]] = tc.use @w : tensor<3x4xbf16>
// CHECK-NEXT:    %[[Y:.*]] = tc.linear %[[X]], %[[W1]]
// CHECK-NEXT:    %[[R:.*]] = tc.relu %[[Y]]
// CHECK-NEXT:    %[[W2:.*]] = tc.use @w : tensor<3x4xbf16>
// CHECK-NEXT:    %[[Z:.*]] = tc.matmul %[[R]], %[[W2]]
// CHECK-NOT:     tc.use @w : tensor<3x4xf32>

// N2-LABEL: tc.param @w : tensor<3x4xf32> device "cpu" sharded <world_size = 2, chunk_rows = 2>
// N2-LABEL: func.func @forward(
// N2:         %[[G:.*]] = tc.all_gather [@w] unit "root" : tensor<3x4xbf16>
// N2-NEXT:    %[[Y:.*]] = tc.linear %{{.*}}, %[[G]]
// N2-NEXT:    %[[R:.*]] = tc.relu %[[Y]]
// N2-NEXT:    tc.matmul %[[R]], %[[G]]
// N2-NEXT:    tc.release %[[G]] : tensor<3x4xbf16>
tc.param @w : tensor<3x4xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<3x4xf32>
  tc.materialize %0 into @w : tensor<3x4xf32>
  return
}
func.func @forward(%x: tensor<2x4xbf16> {tc.name = "x"}) -> (tensor<2x4xbf16> {tc.name = "z"}) {
  %w = tc.use @w : tensor<3x4xf32>
  %c = tc.op "cast"(%w) {dtype = "bfloat16"} : (tensor<3x4xf32>) -> tensor<3x4xbf16>
  %y = tc.linear %x, %c : tensor<2x4xbf16>, tensor<3x4xbf16> -> tensor<2x3xbf16>
  %r = tc.relu %y : tensor<2x3xbf16>
  %z = tc.matmul %r, %c : tensor<2x3xbf16>, tensor<3x4xbf16> -> tensor<2x4xbf16>
  return %z : tensor<2x4xbf16>
}

// -----
// One unit read in two dtypes: @a through a cast to bfloat16, @b as stored
// (float32). A gathered buffer holds one dtype, so the run gets one
// tc.all_gather per dtype, both released after the run.

// N2-LABEL: func.func @forward(
// N2:         %[[A:.*]] = tc.all_gather [@a] unit "root" : tensor<4x4xbf16>
// N2-NEXT:    %[[B:.*]] = tc.all_gather [@b] unit "root" : tensor<4xf32>
// N2-NEXT:    %[[Y:.*]] = tc.matmul %{{.*}}, %[[A]]
// N2-NEXT:    %[[F:.*]] = tc.op "cast"(%[[Y]])
// N2-NEXT:    %[[S:.*]] = tc.add %[[F]], %[[B]]
// N2-NEXT:    tc.release %[[A]] : tensor<4x4xbf16>
// N2-NEXT:    tc.release %[[B]] : tensor<4xf32>
tc.param @a : tensor<4x4xf32> device "cpu"
tc.param @b : tensor<4xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<4x4xf32>
  tc.materialize %0 into @a : tensor<4x4xf32>
  %1 = tc.zeros : tensor<4xf32>
  tc.materialize %1 into @b : tensor<4xf32>
  return
}
func.func @forward(%x: tensor<2x4xbf16> {tc.name = "x"}) -> (tensor<2x4xf32> {tc.name = "s"}) {
  %a = tc.use @a : tensor<4x4xf32>
  %c = tc.op "cast"(%a) {dtype = "bfloat16"} : (tensor<4x4xf32>) -> tensor<4x4xbf16>
  %y = tc.matmul %x, %c : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xbf16>
  %f = tc.op "cast"(%y) {dtype = "float32"} : (tensor<2x4xbf16>) -> tensor<2x4xf32>
  %b = tc.use @b : tensor<4xf32>
  %s = tc.add %f, %b : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
  return %s : tensor<2x4xf32>
}

// -----
// Casts that are not of a parameter read, or not float to float, stay.

// CHECK-LABEL: func.func @forward(
// CHECK:         tc.op "cast"(%{{.*}}) {dtype = "bfloat16"} : (tensor<4xf32>) -> tensor<4xbf16>
// CHECK:         tc.use @ids : tensor<4xi64>
// CHECK-NEXT:    tc.op "cast"(%{{.*}}) {dtype = "float32"} : (tensor<4xi64>) -> tensor<4xf32>
tc.param @ids : tensor<4xi64> device "cpu" buffer non_persistent
func.func @init() {
  %0 = tc.zeros : tensor<4xi64>
  tc.materialize %0 into @ids : tensor<4xi64>
  return
}
func.func @forward(%x: tensor<4xf32> {tc.name = "x"}) -> (tensor<4xbf16> {tc.name = "y"}, tensor<4xf32> {tc.name = "z"}) {
  %y = tc.op "cast"(%x) {dtype = "bfloat16"} : (tensor<4xf32>) -> tensor<4xbf16>
  %i = tc.use @ids : tensor<4xi64>
  %z = tc.op "cast"(%i) {dtype = "float32"} : (tensor<4xi64>) -> tensor<4xf32>
  return %y, %z : tensor<4xbf16>, tensor<4xf32>
}
