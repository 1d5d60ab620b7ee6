// RUN: shardc-opt %s -split-input-file | FileCheck %s
// RUN: shardc-opt %s -split-input-file | shardc-opt -split-input-file | FileCheck %s
// Round trip of the init generators, pointwise init ops, views and scatter.

tc.param @g : tensor<4x3xf32> device "cpu"
tc.param @v : tensor<3x4xf64> device "cpu"
// CHECK-LABEL: func.func @init()
func.func @init() {
  // CHECK: tc.uniform low -1.000000e-01 high 1.000000e-01 position 0 : tensor<4x3xf32>
  %0 = tc.uniform low -0.1 high 0.1 position 0 : tensor<4x3xf32>
  // CHECK: tc.normal mean 0.000000e+00 std 2.000000e-02 position 0 : tensor<4x3xf32>
  %1 = tc.normal mean 0.0 std 0.02 position 0 : tensor<4x3xf32>
  // CHECK: tc.trunc_normal mean 0.000000e+00 std 1.000000e+00 a -2.000000e+00 b 2.000000e+00 position 3 : tensor<4x3xf32>
  %2 = tc.trunc_normal mean 0.0 std 1.0 a -2.0 b 2.0 position 3 : tensor<4x3xf32>
  // CHECK: tc.kaiming_uniform a 2.2360679774997898 mode "fan_in" nonlinearity "leaky_relu" position 0 : tensor<4x3xf32>
  %3 = tc.kaiming_uniform a 2.2360679774997898 mode "fan_in" nonlinearity "leaky_relu" position 0 : tensor<4x3xf32>
  // CHECK: tc.kaiming_normal a 0.000000e+00 mode "fan_out" nonlinearity "relu" position 0 : tensor<4x3xf32>
  %4 = tc.kaiming_normal a 0.0 mode "fan_out" nonlinearity "relu" position 0 : tensor<4x3xf32>
  // CHECK: tc.xavier_uniform gain 1.000000e+00 position 0 : tensor<4x3xf32>
  %5 = tc.xavier_uniform gain 1.0 position 0 : tensor<4x3xf32>
  // CHECK: tc.xavier_normal gain 5.000000e-01 position 0 : tensor<4x3xf32>
  %6 = tc.xavier_normal gain 0.5 position 0 : tensor<4x3xf32>
  // CHECK: tc.eye : tensor<4x3xf32>
  %7 = tc.eye : tensor<4x3xf32>
  // CHECK: tc.arange start 1.000000e+00 step 5.000000e-01 : tensor<4x3xf32>
  %8 = tc.arange start 1.0 step 0.5 : tensor<4x3xf32>
  // CHECK: tc.orthogonal gain 1.000000e+00 position 0 : tensor<4x3xf32>
  %9 = tc.orthogonal gain 1.0 position 0 : tensor<4x3xf32>
  // CHECK: tc.norm_of of "v" dims [0] : tensor<1x4xf64>
  %n = tc.norm_of of "v" dims [0] : tensor<1x4xf64>
  // CHECK: %[[M:.*]] = tc.mul_scalar %{{.*}}, 2.000000e+00 : tensor<4x3xf32>
  // CHECK: %[[A:.*]] = tc.add_scalar %[[M]], 1.000000e+00 : tensor<4x3xf32>
  // CHECK: %[[S:.*]] = tc.sub_scalar %[[A]], 1.000000e+00 : tensor<4x3xf32>
  // CHECK: %[[D:.*]] = tc.div_scalar %[[S]], 4.000000e+00 : tensor<4x3xf32>
  // CHECK: %[[C:.*]] = tc.clamp %[[D]] min -1.000000e+00 max 1.000000e+00 : tensor<4x3xf32>
  // CHECK: %[[E:.*]] = tc.erfinv %[[C]] : tensor<4x3xf32>
  // CHECK: %[[Q:.*]] = tc.sqrt %[[E]] : tensor<4x3xf32>
  // CHECK: %[[N:.*]] = tc.neg %[[Q]] : tensor<4x3xf32>
  // CHECK: %[[X:.*]] = tc.exp %[[N]] : tensor<4x3xf32>
  // CHECK: %[[LG:.*]] = tc.log %[[X]] : tensor<4x3xf32>
  // CHECK: %[[XM:.*]] = tc.expm1 %[[LG]] : tensor<4x3xf32>
  // CHECK: %[[IS:.*]] = tc.inverse_softplus %[[XM]] : tensor<4x3xf32>
  // CHECK: tc.materialize %[[IS]] into @g
  %10 = tc.mul_scalar %0, 2.0 : tensor<4x3xf32>
  %11 = tc.add_scalar %10, 1.0 : tensor<4x3xf32>
  %12 = tc.sub_scalar %11, 1.0 : tensor<4x3xf32>
  %13 = tc.div_scalar %12, 4.0 : tensor<4x3xf32>
  %14 = tc.clamp %13 min -1.0 max 1.0 : tensor<4x3xf32>
  %15 = tc.erfinv %14 : tensor<4x3xf32>
  %16 = tc.sqrt %15 : tensor<4x3xf32>
  %17 = tc.neg %16 : tensor<4x3xf32>
  %18 = tc.exp %17 : tensor<4x3xf32>
  %19 = tc.log %18 : tensor<4x3xf32>
  %e1 = tc.expm1 %19 : tensor<4x3xf32>
  %is = tc.inverse_softplus %e1 : tensor<4x3xf32>
  tc.materialize %is into @g : tensor<4x3xf32>
  // CHECK: %[[R:.*]] = tc.reshape %{{.*}} : tensor<12xf64> -> tensor<4x3xf64>
  // CHECK: %[[T:.*]] = tc.transpose %[[R]], 0, 1 : tensor<4x3xf64> -> tensor<3x4xf64>
  // CHECK: %[[P:.*]] = tc.permute %[[T]] [1, 0] : tensor<3x4xf64> -> tensor<4x3xf64>
  // CHECK: %[[L:.*]] = tc.slice %[[P]] dim 1 start 0 end 3 step 1 : tensor<4x3xf64> -> tensor<4x3xf64>
  // CHECK: tc.transpose %[[L]], 1, 0 : tensor<4x3xf64> -> tensor<3x4xf64>
  %20 = tc.normal mean 0.0 std 1.0 position 0 : tensor<12xf64>
  %21 = tc.reshape %20 : tensor<12xf64> -> tensor<4x3xf64>
  %22 = tc.transpose %21, 0, 1 : tensor<4x3xf64> -> tensor<3x4xf64>
  %23 = tc.permute %22 [1, 0] : tensor<3x4xf64> -> tensor<4x3xf64>
  %24 = tc.slice %23 dim 1 start 0 end 3 step 1 : tensor<4x3xf64> -> tensor<4x3xf64>
  %25 = tc.transpose %24, 1, 0 : tensor<4x3xf64> -> tensor<3x4xf64>
  tc.materialize %25 into @v : tensor<3x4xf64>
  return
}

// -----
// The forms tc-fsdp produces: generators over index maps, and scatter.

// CHECK: affine_map<(d0, d1) -> (d1, d0)>
tc.param @w : tensor<5x3xf32> device "cpu" sharded <world_size = 2, chunk_rows = 3>
tc.param @o : tensor<6x4xf32> device "cpu" sharded <world_size = 2, chunk_rows = 3>
// CHECK-LABEL: func.func @init()
func.func @init() {
  // CHECK: tc.uniform low -1.000000e+00 high 1.000000e+00 position 0 : tensor<3x3xf32> shard of tensor<5x3xf32> from tensor<3x5xf32> map #{{.*}}
  %0 = tc.uniform low -1.0 high 1.0 position 0 : tensor<3x3xf32> shard of tensor<5x3xf32> from tensor<3x5xf32> map affine_map<(d0, d1) -> (d1, d0)>
  tc.materialize %0 into @w : tensor<3x3xf32>
  // CHECK: %[[FULL:.*]] = tc.orthogonal gain 1.000000e+00 position 0 : tensor<6x4xf32>
  // CHECK: %[[LOCAL:.*]] = tc.scatter %[[FULL]] from 1 : tensor<6x4xf32> -> tensor<3x4xf32>
  // CHECK: tc.materialize %[[LOCAL]] into @o : tensor<3x4xf32>
  %1 = tc.orthogonal gain 1.0 position 0 : tensor<6x4xf32>
  %2 = tc.scatter %1 from 1 : tensor<6x4xf32> -> tensor<3x4xf32>
  tc.materialize %2 into @o : tensor<3x4xf32>
  return
}

// -----

// tc.fill_rows (nn.Embedding's padding_idx row) round-trips.
// CHECK-LABEL: func.func @fill_rows()
func.func @fill_rows() {
  %0 = tc.normal mean 0.0 std 1.0 position 0 : tensor<10x4xf32>
  // CHECK: tc.fill_rows %{{.*}} value 0.000000e+00 rows 3 to 4 : tensor<10x4xf32>
  %1 = tc.fill_rows %0 value 0.0 rows 3 to 4 : tensor<10x4xf32>
  return
}
