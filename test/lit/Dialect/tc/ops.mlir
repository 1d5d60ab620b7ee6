// RUN: shardc-opt %s -split-input-file | FileCheck %s
// RUN: shardc-opt %s -split-input-file | shardc-opt -split-input-file | FileCheck %s
// Round trip of every tc op; the second RUN checks printed IR parses back.

// CHECK-LABEL: tc.param @p1 : tensor<1024x1024xf32> device "cuda:0"{{$}}
tc.param @p1 : tensor<1024x1024xf32> device "cuda:0"
// CHECK: tc.param @h.0.fc.weight : tensor<8x4xf32> device "cpu" unit "h.0"{{$}}
tc.param @h.0.fc.weight : tensor<8x4xf32> device "cpu" unit "h.0"
// CHECK: tc.param @running_mean : tensor<3xf32> device "cpu:1" buffer{{$}}
tc.param @running_mean : tensor<3xf32> device "cpu:1" buffer
// CHECK: tc.param @scale : tensor<f64> device "meta"{{$}}
tc.param @scale : tensor<f64> device "meta"
// CHECK: tc.param @half : tensor<4xbf16> device "cuda"{{$}}
tc.param @half : tensor<4xbf16> device "cuda"

// CHECK-LABEL: func.func @init()
func.func @init() {
  // CHECK: %[[ONES:.*]] = tc.ones : tensor<1024x1024xf32>
  // CHECK: tc.materialize %[[ONES]] into @p1 : tensor<1024x1024xf32>
  %0 = tc.ones : tensor<1024x1024xf32>
  tc.materialize %0 into @p1 : tensor<1024x1024xf32>
  // CHECK: %[[FILL:.*]] = tc.fill -2.500000e-01 : tensor<8x4xf32>
  // CHECK: tc.materialize %[[FILL]] into @h.0.fc.weight
  %1 = tc.fill -0.25 : tensor<8x4xf32>
  tc.materialize %1 into @h.0.fc.weight : tensor<8x4xf32>
  // CHECK: %[[ZEROS:.*]] = tc.zeros : tensor<3xf32>
  %2 = tc.zeros : tensor<3xf32>
  tc.materialize %2 into @running_mean : tensor<3xf32>
  // CHECK: tc.fill 3.000000e+00 : tensor<f64>
  %3 = tc.fill 3.0 : tensor<f64>
  tc.materialize %3 into @scale : tensor<f64>
  // CHECK: tc.ones : tensor<4xbf16>
  %4 = tc.ones : tensor<4xbf16>
  tc.materialize %4 into @half : tensor<4xbf16>
  return
}

// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[X:.*]]: tensor<1xf32> {tc.name = "x"}
func.func @forward(%x: tensor<1xf32> {tc.name = "x"}) -> (tensor<1024x1024xf32> {tc.name = "y"}) {
  // CHECK: %[[W:.*]] = tc.use @p1 : tensor<1024x1024xf32>
  // CHECK: %[[Y:.*]] = tc.add %[[W]], %[[X]] : tensor<1024x1024xf32>, tensor<1xf32> -> tensor<1024x1024xf32>
  // CHECK: return %[[Y]]
  %w = tc.use @p1 : tensor<1024x1024xf32>
  %y = tc.add %w, %x : tensor<1024x1024xf32>, tensor<1xf32> -> tensor<1024x1024xf32>
  return %y : tensor<1024x1024xf32>
}

// -----
// The forms tc-fsdp produces: sharded params, shard generators, gathers.

// CHECK-LABEL: tc.param @w : tensor<1023x4xf32> device "cuda:0" sharded <world_size = 4, chunk_rows = 256>
tc.param @w : tensor<1023x4xf32> device "cuda:0" sharded <world_size = 4, chunk_rows = 256>

// CHECK-LABEL: func.func @init()
func.func @init() {
  // CHECK: %[[S:.*]] = tc.fill 1.000000e+00 : tensor<256x4xf32> shard of tensor<1023x4xf32>
  // CHECK: tc.materialize %[[S]] into @w : tensor<256x4xf32>
  %0 = tc.fill 1.0 : tensor<256x4xf32> shard of tensor<1023x4xf32>
  tc.materialize %0 into @w : tensor<256x4xf32>
  // CHECK: tc.zeros : tensor<256x4xf32> shard of tensor<1023x4xf32>
  // CHECK: tc.ones : tensor<256x4xf32> shard of tensor<1023x4xf32>
  %1 = tc.zeros : tensor<256x4xf32> shard of tensor<1023x4xf32>
  %2 = tc.ones : tensor<256x4xf32> shard of tensor<1023x4xf32>
  return
}

// CHECK-LABEL: func.func @forward(
func.func @forward(%x: tensor<4xf32>) -> tensor<1023x4xf32> {
  // CHECK: %[[G:.*]] = tc.all_gather [@w] unit "h.0" : tensor<1023x4xf32>
  // CHECK: %[[Y:.*]] = tc.add %[[G]], %{{.*}} : tensor<1023x4xf32>, tensor<4xf32> -> tensor<1023x4xf32>
  // CHECK: tc.release %[[G]] : tensor<1023x4xf32>
  %g = tc.all_gather [@w] unit "h.0" : tensor<1023x4xf32>
  %y = tc.add %g, %x : tensor<1023x4xf32>, tensor<4xf32> -> tensor<1023x4xf32>
  tc.release %g : tensor<1023x4xf32>
  return %y : tensor<1023x4xf32>
}
