// RUN: shardc-opt %s -split-input-file -tc-fsdp=world-size=4 | FileCheck %s
// tc-fsdp folds an init chain's views into its generator's index map and
// computes pointwise ops on the shard; non-shardable chains are computed on
// an owner rank and scattered.

// CHECK-DAG: #[[TRANSPOSE:.*]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-DAG: #[[RESHAPE:.*]] = affine_map<(d0, d1) -> (d0 * 3 + d1)>
// CHECK-DAG: #[[SLICE:.*]] = affine_map<(d0) -> (d0 * 2 + 1)>
// CHECK-LABEL: func.func @init()
// trunc_normal as torch writes it: uniform, erfinv, mul, add, clamp.
// CHECK:      %[[U:.*]] = tc.uniform low -0.9544{{[0-9]*}} high 0.9544{{[0-9]*}} position 0 : tensor<256x64xf32> shard of tensor<1023x64xf32>
// CHECK-NEXT: %[[E:.*]] = tc.erfinv %[[U]] : tensor<256x64xf32>
// CHECK-NEXT: %[[M:.*]] = tc.mul_scalar %[[E]], {{.*}} : tensor<256x64xf32>
// CHECK-NEXT: %[[A:.*]] = tc.add_scalar %[[M]], 0.000000e+00 : tensor<256x64xf32>
// CHECK-NEXT: %[[C:.*]] = tc.clamp %[[A]] min -4.000000e-02 max 4.000000e-02 : tensor<256x64xf32>
// CHECK-NEXT: tc.materialize %[[C]] into @trunc : tensor<256x64xf32>
// A transposed draw: the shard reads the source's columns.
// CHECK:      %[[T:.*]] = tc.normal mean 0.000000e+00 std 2.000000e-02 position 0 : tensor<3x5xf32> shard of tensor<10x5xf32> from tensor<5x10xf32> map #[[TRANSPOSE]]
// CHECK-NEXT: tc.materialize %[[T]] into @transposed
// CHECK:      %[[R:.*]] = tc.arange start 0.000000e+00 step 1.000000e+00 : tensor<1x3xf32> shard of tensor<4x3xf32> from tensor<12xf32> map #[[RESHAPE]]
// CHECK-NEXT: tc.materialize %[[R]] into @reshaped
// CHECK:      %[[S:.*]] = tc.eye : tensor<2x6xf32> shard of tensor<6x6xf32> from tensor<13x6xf32> map #{{.*}}
// CHECK:      %[[L:.*]] = tc.uniform low 0.000000e+00 high 1.000000e+00 position 0 : tensor<1xf32> shard of tensor<3xf32> from tensor<7xf32> map #[[SLICE]]
// Constant generators ignore views.
// CHECK:      tc.ones : tensor<1x3xf32> shard of tensor<4x3xf32>{{$}}
tc.param @trunc : tensor<1023x64xf32> device "cuda:0"
tc.param @transposed : tensor<10x5xf32> device "cpu"
tc.param @reshaped : tensor<4x3xf32> device "cpu"
tc.param @sliced_eye : tensor<6x6xf32> device "cpu"
tc.param @sliced : tensor<3xf32> device "cpu"
tc.param @const : tensor<4x3xf32> device "cpu"
func.func @init() {
  %0 = tc.uniform low -0.95449973610364158 high 0.95449973610364158 position 0 : tensor<1023x64xf32>
  %1 = tc.erfinv %0 : tensor<1023x64xf32>
  %2 = tc.mul_scalar %1, 0.028284271247461901 : tensor<1023x64xf32>
  %3 = tc.add_scalar %2, 0.0 : tensor<1023x64xf32>
  %4 = tc.clamp %3 min -0.04 max 0.04 : tensor<1023x64xf32>
  tc.materialize %4 into @trunc : tensor<1023x64xf32>
  %5 = tc.normal mean 0.0 std 0.02 position 0 : tensor<5x10xf32>
  %6 = tc.transpose %5, 0, 1 : tensor<5x10xf32> -> tensor<10x5xf32>
  tc.materialize %6 into @transposed : tensor<10x5xf32>
  %7 = tc.arange start 0.0 step 1.0 : tensor<12xf32>
  %8 = tc.reshape %7 : tensor<12xf32> -> tensor<4x3xf32>
  tc.materialize %8 into @reshaped : tensor<4x3xf32>
  %9 = tc.eye : tensor<13x6xf32>
  %10 = tc.slice %9 dim 0 start 1 end 13 step 2 : tensor<13x6xf32> -> tensor<6x6xf32>
  tc.materialize %10 into @sliced_eye : tensor<6x6xf32>
  %11 = tc.uniform low 0.0 high 1.0 position 0 : tensor<7xf32>
  %12 = tc.slice %11 dim 0 start 1 end 7 step 2 : tensor<7xf32> -> tensor<3xf32>
  tc.materialize %12 into @sliced : tensor<3xf32>
  %13 = tc.ones : tensor<12xf32>
  %14 = tc.reshape %13 : tensor<12xf32> -> tensor<4x3xf32>
  tc.materialize %14 into @const : tensor<4x3xf32>
  return
}

// -----
// Non-shardable parameters: owners spread by size, largest first, each to
// the least-loaded rank. The scatter's input chain runs on the owner only.

// CHECK-LABEL: func.func @init()
// CHECK:      %[[SMALL:.*]] = tc.orthogonal gain 1.000000e+00 position 0 : tensor<8x8xf32>
// CHECK-NEXT: %[[SMALLS:.*]] = tc.scatter %[[SMALL]] from 1 : tensor<8x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT: tc.materialize %[[SMALLS]] into @small
// CHECK:      %[[BIG:.*]] = tc.orthogonal gain 2.000000e+00 position 0 : tensor<64x64xf32>
// CHECK-NEXT: %[[SCALED:.*]] = tc.mul_scalar %[[BIG]], 5.000000e-01 : tensor<64x64xf32>
// CHECK-NEXT: %[[BIGS:.*]] = tc.scatter %[[SCALED]] from 0 : tensor<64x64xf32> -> tensor<16x64xf32>
// CHECK-NEXT: tc.materialize %[[BIGS]] into @big
// CHECK:      tc.scatter %{{.*}} from 2 : tensor<8x8xf32> -> tensor<2x8xf32>
// A replicated (0-d or buffer) parameter needs no scatter.
// CHECK:      %[[REP:.*]] = tc.orthogonal gain 1.000000e+00 position 0 : tensor<3x3xf32>
// CHECK-NEXT: tc.materialize %[[REP]] into @replicated : tensor<3x3xf32>
tc.param @small : tensor<8x8xf32> device "cpu"
tc.param @big : tensor<64x64xf32> device "cpu"
tc.param @small2 : tensor<8x8xf32> device "cpu"
tc.param @replicated : tensor<3x3xf32> device "cpu" buffer
func.func @init() {
  %0 = tc.orthogonal gain 1.0 position 0 : tensor<8x8xf32>
  tc.materialize %0 into @small : tensor<8x8xf32>
  %1 = tc.orthogonal gain 2.0 position 0 : tensor<64x64xf32>
  %2 = tc.mul_scalar %1, 0.5 : tensor<64x64xf32>
  tc.materialize %2 into @big : tensor<64x64xf32>
  %3 = tc.orthogonal gain 1.0 position 0 : tensor<8x8xf32>
  tc.materialize %3 into @small2 : tensor<8x8xf32>
  %4 = tc.orthogonal gain 1.0 position 0 : tensor<3x3xf32>
  tc.materialize %4 into @replicated : tensor<3x3xf32>
  return
}

