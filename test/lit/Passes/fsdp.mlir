// RUN: shardc-opt %s -split-input-file -tc-fsdp=world-size=2 | FileCheck %s --check-prefix=N2
// RUN: shardc-opt %s -split-input-file -tc-fsdp=world-size=4 | FileCheck %s --check-prefix=N4
// RUN: shardc-opt %s -split-input-file -tc-fsdp=world-size=1 | FileCheck %s --check-prefix=N1

// The seed case (Lightning Thunder issue 478): p1 = ones(1024, 1024) on
// cuda:0, forward(x) = p1 + x.

// N2-LABEL: tc.param @p1 : tensor<1024x1024xf32> device "cuda:0" sharded <world_size = 2, chunk_rows = 512>
// N2-LABEL: func.func @init()
// N2-NEXT:    %[[SHARD:.*]] = tc.ones : tensor<512x1024xf32> shard of tensor<1024x1024xf32>
// N2-NEXT:    tc.materialize %[[SHARD]] into @p1 : tensor<512x1024xf32>
// N2-LABEL: func.func @forward(
// N2-SAME:      %[[X:.*]]: tensor<1xf32>
// N2-NEXT:    %[[FULL:.*]] = tc.all_gather [@p1] unit "root" : tensor<1024x1024xf32>
// N2-NEXT:    %[[Y:.*]] = tc.add %[[FULL]], %[[X]]
// N2-NEXT:    tc.release %[[FULL]] : tensor<1024x1024xf32>
// N2-NEXT:    return %[[Y]]

// N1-LABEL: tc.param @p1 : tensor<1024x1024xf32> device "cuda:0" sharded <world_size = 1, chunk_rows = 1024>
// N1-LABEL: func.func @forward(
// N1-NEXT:    tc.use @p1 : tensor<1024x1024xf32>
// N1-NOT:     tc.all_gather
// N1-NOT:     tc.release
tc.param @p1 : tensor<1024x1024xf32> device "cuda:0"
func.func @init() {
  %0 = tc.ones : tensor<1024x1024xf32>
  tc.materialize %0 into @p1 : tensor<1024x1024xf32>
  return
}
func.func @forward(%x: tensor<1xf32> {tc.name = "x"}) -> (tensor<1024x1024xf32> {tc.name = "y"}) {
  %w = tc.use @p1 : tensor<1024x1024xf32>
  %y = tc.add %w, %x : tensor<1024x1024xf32>, tensor<1xf32> -> tensor<1024x1024xf32>
  return %y : tensor<1024x1024xf32>
}

// -----
// Uneven rows: 1023 over 4 ranks stores 256 rows each (the last has one
// padding row). d0 < N: 3 rows over 4 ranks stores one row each (rank 3
// holds only padding). 0-d params and buffers stay replicated.

// N4-LABEL: tc.param @uneven : tensor<1023x8xf32> device "cpu" sharded <world_size = 4, chunk_rows = 256>
// N4-NEXT:  tc.param @tiny : tensor<3x2xf32> device "cpu" sharded <world_size = 4, chunk_rows = 1>
// N4-NEXT:  tc.param @scalar : tensor<f32> device "cpu"{{$}}
// N4-NEXT:  tc.param @stats : tensor<8xf32> device "cpu" buffer{{$}}
// N4-LABEL: func.func @init()
// N4-DAG:   %[[U:.*]] = tc.fill 2.000000e-02 : tensor<256x8xf32> shard of tensor<1023x8xf32>
// N4-DAG:   tc.materialize %[[U]] into @uneven : tensor<256x8xf32>
// N4-DAG:   %[[T:.*]] = tc.zeros : tensor<1x2xf32> shard of tensor<3x2xf32>
// N4-DAG:   tc.materialize %[[T]] into @tiny : tensor<1x2xf32>
// N4-DAG:   %[[S:.*]] = tc.ones : tensor<f32>{{$}}
// N4-DAG:   tc.materialize %[[S]] into @scalar : tensor<f32>
// N4-DAG:   %[[B:.*]] = tc.zeros : tensor<8xf32>{{$}}
// N4-DAG:   tc.materialize %[[B]] into @stats : tensor<8xf32>
// N4-LABEL: func.func @forward(
// N4:       %[[SC:.*]] = tc.use @scalar : tensor<f32>
// N4:       %[[G:.*]] = tc.all_gather [@uneven] unit "root" : tensor<1023x8xf32>
// N4:       %[[A:.*]] = tc.add %[[G]], %[[SC]]
// N4-NEXT:  tc.release %[[G]] : tensor<1023x8xf32>
// N4:       %[[ST:.*]] = tc.use @stats : tensor<8xf32>
// N4-NEXT:  %[[R:.*]] = tc.add %[[A]], %[[ST]]
// N4-NEXT:  return %[[R]]
tc.param @uneven : tensor<1023x8xf32> device "cpu"
tc.param @tiny : tensor<3x2xf32> device "cpu"
tc.param @scalar : tensor<f32> device "cpu"
tc.param @stats : tensor<8xf32> device "cpu" buffer
func.func @init() {
  %0 = tc.fill 0.02 : tensor<1023x8xf32>
  tc.materialize %0 into @uneven : tensor<1023x8xf32>
  %1 = tc.zeros : tensor<3x2xf32>
  tc.materialize %1 into @tiny : tensor<3x2xf32>
  %2 = tc.ones : tensor<f32>
  tc.materialize %2 into @scalar : tensor<f32>
  %3 = tc.zeros : tensor<8xf32>
  tc.materialize %3 into @stats : tensor<8xf32>
  return
}
func.func @forward() -> tensor<1023x8xf32> {
  %g = tc.use @uneven : tensor<1023x8xf32>
  %s = tc.use @scalar : tensor<f32>
  %a = tc.add %g, %s : tensor<1023x8xf32>, tensor<f32> -> tensor<1023x8xf32>
  %st = tc.use @stats : tensor<8xf32>
  %r = tc.add %a, %st : tensor<1023x8xf32>, tensor<8xf32> -> tensor<1023x8xf32>
  return %r : tensor<1023x8xf32>
}

// -----
// One generator feeding two parameters is split so each gets its own shard.

// N2-LABEL: tc.param @a : tensor<6xf32> device "cpu" sharded <world_size = 2, chunk_rows = 3>
// N2-LABEL: func.func @init()
// N2-NEXT:    %[[A:.*]] = tc.ones : tensor<3xf32> shard of tensor<6xf32>
// N2-NEXT:    tc.materialize %[[A]] into @a : tensor<3xf32>
// N2-NEXT:    %[[B:.*]] = tc.ones : tensor<3xf32> shard of tensor<6xf32>
// N2-NEXT:    tc.materialize %[[B]] into @b : tensor<3xf32>
tc.param @a : tensor<6xf32> device "cpu"
tc.param @b : tensor<6xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<6xf32>
  tc.materialize %0 into @a : tensor<6xf32>
  tc.materialize %0 into @b : tensor<6xf32>
  return
}

// -----
// A gathered parameter the function returns is not released.

// N2-LABEL: func.func @forward()
// N2-NEXT:    %[[G:.*]] = tc.all_gather [@w] unit "root" : tensor<4xf32>
// N2-NEXT:    return %[[G]]
tc.param @w : tensor<4xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<4xf32>
  tc.materialize %0 into @w : tensor<4xf32>
  return
}
func.func @forward() -> tensor<4xf32> {
  %0 = tc.use @w : tensor<4xf32>
  return %0 : tensor<4xf32>
}
