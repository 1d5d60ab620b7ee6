// RUN: shardc-opt %s -split-input-file -tc-print-plan -o /dev/null | FileCheck %s

// The lowering to the runtime Plan (compiler/LowerToPlan.cpp) on
// hand-written sharded IR (what tc-fsdp produces): buffer assignment,
// aliases into gathered buffers, and frees after the last use.

// The seed case at N = 2: the param's storage is the local 512-row shard;
// forward gathers it into a "gathered" buffer holding N * chunk_rows padded
// rows, reads it through an alias of the full shape, and frees the gathered
// buffer right after its only use. The output stays allocated.

// CHECK-LABEL: plan world_size=2
// CHECK-NEXT:  param @p1 float32 [1024, 1024] chunk_rows=512
// CHECK-LABEL: function @init() -> ()
// CHECK-NEXT:    %[[P:[0-9]+]] = param @p1 float32 [512, 1024] 2097152 bytes parameters
// CHECK-NEXT:    alloc %[[P]]
// CHECK-NEXT:    fill %[[P]] {value = 1}
// CHECK-LABEL: function @forward(
// CHECK-SAME:    %[[X:[0-9]+]]) -> (%[[Y:[0-9]+]])
// CHECK-DAG:     %[[X]] = buffer "x" float32 [1] 4 bytes io
// CHECK-DAG:     %[[G:[0-9]+]] = buffer "p1.gathered" float32 [1048576] 4194304 bytes gathered
// CHECK-DAG:     %[[FULL:[0-9]+]] = alias "p1" float32 [1024, 1024] of %[[G]] + 0
// CHECK-DAG:     %[[SHARD:[0-9]+]] = param @p1 float32 [512, 1024] 2097152 bytes parameters
// CHECK-DAG:     %[[Y]] = buffer "y" float32 [1024, 1024] 4194304 bytes activations
// CHECK:         alloc %[[G]]
// CHECK-NEXT:    all_gather %[[SHARD]] -> %[[G]] {offsets = [0]}
// CHECK-NEXT:    alloc %[[Y]]
// CHECK-NEXT:    add %[[FULL]], %[[X]] -> %[[Y]]
// CHECK-NEXT:    free %[[G]]
// CHECK-NOT:     free %[[Y]]
// CHECK-NOT:     free %[[SHARD]]
module attributes {tc.world_size = 2 : i64} {
  tc.param @p1 : tensor<1024x1024xf32> device "cpu" sharded <world_size = 2, chunk_rows = 512>
  func.func @init() {
    %0 = tc.ones : tensor<512x1024xf32> shard of tensor<1024x1024xf32>
    tc.materialize %0 into @p1 : tensor<512x1024xf32>
    return
  }
  func.func @forward(%arg0: tensor<1xf32> {tc.name = "x"}) -> (tensor<1024x1024xf32> {tc.name = "y"}) {
    %0 = tc.all_gather [@p1] unit "root" : tensor<1024x1024xf32>
    %1 = tc.add %0, %arg0 : tensor<1024x1024xf32>, tensor<1xf32> -> tensor<1024x1024xf32>
    tc.release %0 : tensor<1024x1024xf32>
    return %1 : tensor<1024x1024xf32>
  }
}


// -----

// One FSDP unit of two params: one gathered buffer, each param an alias at
// its offset (w: 2 ranks x 3 padded rows x 4 floats = 96 bytes, then b). The
// unit is freed after the linear, its last use; the linear's activation
// after the gelu; the reshaped output is an alias of the gelu's buffer,
// which is never freed.

// CHECK-LABEL: plan world_size=2
// CHECK-NEXT:  param @w float32 [5, 4] chunk_rows=3 unit="h.0"
// CHECK-NEXT:  param @b float32 [5] chunk_rows=3 unit="h.0"
// CHECK-LABEL: function @forward(
// CHECK-SAME:    %[[X:[0-9]+]]) -> (%[[OUT:[0-9]+]])
// CHECK-DAG:     %[[U:[0-9]+]] = buffer "unit h.0.gathered" float32 [30] 120 bytes gathered
// CHECK-DAG:     %[[W:[0-9]+]] = alias "w" float32 [5, 4] of %[[U]] + 0
// CHECK-DAG:     %[[B:[0-9]+]] = alias "b" float32 [5] of %[[U]] + 96
// CHECK-DAG:     %[[WS:[0-9]+]] = param @w float32 [3, 4] 48 bytes parameters
// CHECK-DAG:     %[[BS:[0-9]+]] = param @b float32 [3] 12 bytes parameters
// CHECK-DAG:     %[[H:[0-9]+]] = buffer "%0" float32 [2, 5] 40 bytes activations
// CHECK-DAG:     %[[G:[0-9]+]] = buffer "%1" float32 [2, 5] 40 bytes activations
// CHECK-DAG:     %[[OUT]] = alias "out" float32 [10] of %[[G]] + 0
// CHECK:         alloc %[[U]]
// CHECK-NEXT:    all_gather %[[WS]], %[[BS]] -> %[[U]] {offsets = [0, 96]}
// CHECK-NEXT:    alloc %[[H]]
// CHECK-NEXT:    linear %[[X]], %[[W]], %[[B]] -> %[[H]]
// CHECK-NEXT:    free %[[U]]
// CHECK-NEXT:    alloc %[[G]]
// CHECK-NEXT:    gelu %[[H]] -> %[[G]] {approximate = "none"}
// CHECK-NEXT:    free %[[H]]
// CHECK-NOT:     free

module attributes {tc.world_size = 2 : i64} {
  tc.param @w : tensor<5x4xf32> device "cpu" unit "h.0" sharded <world_size = 2, chunk_rows = 3>
  tc.param @b : tensor<5xf32> device "cpu" unit "h.0" sharded <world_size = 2, chunk_rows = 3>
  func.func @init() {
    %0 = tc.zeros : tensor<3x4xf32> shard of tensor<5x4xf32>
    tc.materialize %0 into @w : tensor<3x4xf32>
    %1 = tc.zeros : tensor<3xf32> shard of tensor<5xf32>
    tc.materialize %1 into @b : tensor<3xf32>
    return
  }
  func.func @forward(%arg0: tensor<2x4xf32> {tc.name = "x"}) -> (tensor<10xf32> {tc.name = "out"}) {
    %0:2 = tc.all_gather [@w, @b] unit "h.0" : tensor<5x4xf32>, tensor<5xf32>
    %1 = tc.linear %arg0, %0#0, %0#1 : tensor<2x4xf32>, tensor<5x4xf32>, tensor<5xf32> -> tensor<2x5xf32>
    tc.release %0#0, %0#1 : tensor<5x4xf32>, tensor<5xf32>
    %2 = tc.gelu %1 approximate "none" : tensor<2x5xf32>
    %3 = tc.reshape %2 : tensor<2x5xf32> -> tensor<10xf32>
    return %3 : tensor<10xf32>
  }
}

// -----

// Master weights (docs/graph-format.md): @w is stored in float32 and read
// in bfloat16. At N = 2 its gathered buffer holds bfloat16 rows (half the
// bytes of a float32 gather): the all_gather converts each rank's shard as
// it gathers it. The replicated @s (0-d) read in bfloat16 is a cast into a
// fresh buffer, freed after its last use.

// CHECK-LABEL: plan world_size=2
// CHECK-NEXT:  param @w float32 [4, 8] chunk_rows=2
// CHECK-LABEL: function @forward(
// CHECK-DAG:     %[[G:[0-9]+]] = buffer "w.gathered" bfloat16 [32] 64 bytes gathered
// CHECK-DAG:     %[[FULL:[0-9]+]] = alias "w" bfloat16 [4, 8] of %[[G]] + 0
// CHECK-DAG:     %[[SHARD:[0-9]+]] = param @w float32 [2, 8] 64 bytes parameters
// CHECK-DAG:     %[[S:[0-9]+]] = param @s float32 [] 4 bytes parameters
// CHECK:         alloc %[[G]]
// CHECK-NEXT:    all_gather %[[SHARD]] -> %[[G]] {convert = 1, offsets = [0]}
// CHECK:         cast %[[S]] -> %[[SB:[0-9]+]] {dtype = "bfloat16"}
// CHECK:         free %[[SB]]
module attributes {tc.world_size = 2 : i64} {
  tc.param @w : tensor<4x8xf32> device "cpu" sharded <world_size = 2, chunk_rows = 2>
  tc.param @s : tensor<f32> device "cpu"
  func.func @init() {
    %0 = tc.ones : tensor<2x8xf32> shard of tensor<4x8xf32>
    tc.materialize %0 into @w : tensor<2x8xf32>
    %1 = tc.ones : tensor<f32>
    tc.materialize %1 into @s : tensor<f32>
    return
  }
  func.func @forward(%x: tensor<3x8xbf16> {tc.name = "x"}) -> (tensor<3x4xbf16> {tc.name = "y"}) {
    %w = tc.all_gather [@w] unit "root" : tensor<4x8xbf16>
    %y = tc.linear %x, %w : tensor<3x8xbf16>, tensor<4x8xbf16> -> tensor<3x4xbf16>
    tc.release %w : tensor<4x8xbf16>
    %s = tc.use @s : tensor<bf16>
    %z = tc.mul %y, %s : tensor<3x4xbf16>, tensor<bf16> -> tensor<3x4xbf16>
    return %z : tensor<3x4xbf16>
  }
}
