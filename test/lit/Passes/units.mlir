// RUN: shardc-opt %s -tc-assign-units | FileCheck %s --check-prefix=DEFAULT
// RUN: shardc-opt %s -tc-assign-units="patterns=model\.layers\.[0-9]+\.mlp,model\.layers" | FileCheck %s --check-prefix=PATTERNS
// RUN: shardc-opt %s -tc-assign-units -tc-fsdp=world-size=2 | FileCheck %s --check-prefix=GATHER
// RUN: shardc-opt %s -tc-assign-units -tc-fsdp="world-size=2 prefetch=true" | FileCheck %s --check-prefix=PREFETCH
// RUN: not shardc-opt %s -tc-assign-units="patterns=decoder" 2>&1 | FileCheck %s --check-prefix=NOMATCH

// The layer list with the most numbered blocks; model.heads (one block) is
// not a list beside it (units-lists.mlir has the other rules).
// DEFAULT: tc.param @model.embed : tensor<10x4xf32> device "cpu" unit "root"
// DEFAULT: tc.param @model.layers.0.attn : tensor<4x4xf32> device "cpu" unit "model.layers.0"
// DEFAULT: tc.param @model.layers.0.mlp : tensor<4x4xf32> device "cpu" unit "model.layers.0"
// DEFAULT: tc.param @model.layers.1.attn : tensor<4x4xf32> device "cpu" unit "model.layers.1"
// DEFAULT: tc.param @model.layers.1.mlp : tensor<4x4xf32> device "cpu" unit "model.layers.1"
// DEFAULT: tc.param @model.heads.0 : tensor<4x4xf32> device "cpu" unit "root"
// An explicit unit is kept.
// DEFAULT: tc.param @model.norm : tensor<4xf32> device "cpu" unit "custom"

// PATTERNS: tc.param @model.embed : {{.*}} unit "root"
// PATTERNS: tc.param @model.layers.0.attn : {{.*}} unit "model.layers"
// PATTERNS: tc.param @model.layers.0.mlp : {{.*}} unit "model.layers.0.mlp"
// PATTERNS: tc.param @model.layers.1.mlp : {{.*}} unit "model.layers.1.mlp"
// PATTERNS: tc.param @model.norm : {{.*}} unit "root"

// A unit is gathered around each run of ops that use it, with one
// collective, and released after the run: the root unit (embedding at the
// start, head and tied embedding at the end) is gathered twice instead of
// being held across the model. A parameter used twice in a run is
// gathered once.
// GATHER-LABEL: func.func @forward(
// GATHER-NEXT:  %[[EMB:.*]] = tc.all_gather [@model.embed] unit "root"
// GATHER-NEXT:  %[[E:.*]] = tc.embedding %[[EMB]]
// GATHER-NEXT:  tc.release %[[EMB]]
// GATHER-NEXT:  %[[L0:.*]]:2 = tc.all_gather [@model.layers.0.attn, @model.layers.0.mlp] unit "model.layers.0"
// GATHER-NEXT:  %[[A0:.*]] = tc.linear %[[E]], %[[L0]]#0
// GATHER-NEXT:  %[[M0:.*]] = tc.linear %[[A0]], %[[L0]]#1
// GATHER-NEXT:  tc.release %[[L0]]#0, %[[L0]]#1
// GATHER-NEXT:  %[[L1:.*]]:2 = tc.all_gather [@model.layers.1.attn, @model.layers.1.mlp] unit "model.layers.1"
// GATHER-NEXT:  %[[A1:.*]] = tc.linear %[[M0]], %[[L1]]#0
// GATHER-NEXT:  %[[M1:.*]] = tc.linear %[[A1]], %[[L1]]#1
// GATHER-NEXT:  tc.release %[[L1]]#0, %[[L1]]#1
// GATHER-NEXT:  %[[HEAD:.*]] = tc.all_gather [@model.heads.0] unit "root"
// GATHER-NEXT:  %[[H:.*]] = tc.linear %[[M1]], %[[HEAD]]
// GATHER-NEXT:  tc.release %[[HEAD]]
// GATHER-NEXT:  %[[NORM:.*]] = tc.all_gather [@model.norm] unit "custom"
// GATHER-NEXT:  %[[N:.*]] = tc.mul %[[H]], %[[NORM]]
// GATHER-NEXT:  tc.release %[[NORM]]
// GATHER-NEXT:  %[[EMB2:.*]] = tc.all_gather [@model.embed] unit "root"
// GATHER-NEXT:  %[[LOGITS:.*]] = tc.linear %[[N]], %[[EMB2]]
// GATHER-NEXT:  tc.release %[[EMB2]]
// GATHER-NEXT:  return %[[LOGITS]]

// With prefetch, run k+1 is gathered when run k starts computing.
// PREFETCH-LABEL: func.func @forward(
// PREFETCH-NEXT:  tc.all_gather [@model.embed] unit "root"
// PREFETCH-NEXT:  tc.all_gather [@model.layers.0.attn, @model.layers.0.mlp] unit "model.layers.0"
// PREFETCH-NEXT:  tc.embedding
// PREFETCH-NEXT:  tc.release
// PREFETCH-NEXT:  tc.all_gather [@model.layers.1.attn, @model.layers.1.mlp] unit "model.layers.1"
// PREFETCH-NEXT:  tc.linear

// NOMATCH: error: unit pattern 'decoder' matches no parameter name

tc.param @model.embed : tensor<10x4xf32> device "cpu"
tc.param @model.layers.0.attn : tensor<4x4xf32> device "cpu"
tc.param @model.layers.0.mlp : tensor<4x4xf32> device "cpu"
tc.param @model.layers.1.attn : tensor<4x4xf32> device "cpu"
tc.param @model.layers.1.mlp : tensor<4x4xf32> device "cpu"
tc.param @model.heads.0 : tensor<4x4xf32> device "cpu"
tc.param @model.norm : tensor<4xf32> device "cpu" unit "custom"
func.func @init() {
  %0 = tc.normal mean 0.0 std 0.02 position 0 : tensor<10x4xf32>
  tc.materialize %0 into @model.embed : tensor<10x4xf32>
  %1 = tc.normal mean 0.0 std 0.02 position 0 : tensor<4x4xf32>
  tc.materialize %1 into @model.layers.0.attn : tensor<4x4xf32>
  %2 = tc.normal mean 0.0 std 0.02 position 0 : tensor<4x4xf32>
  tc.materialize %2 into @model.layers.0.mlp : tensor<4x4xf32>
  %3 = tc.normal mean 0.0 std 0.02 position 0 : tensor<4x4xf32>
  tc.materialize %3 into @model.layers.1.attn : tensor<4x4xf32>
  %4 = tc.normal mean 0.0 std 0.02 position 0 : tensor<4x4xf32>
  tc.materialize %4 into @model.layers.1.mlp : tensor<4x4xf32>
  %5 = tc.normal mean 0.0 std 0.02 position 0 : tensor<4x4xf32>
  tc.materialize %5 into @model.heads.0 : tensor<4x4xf32>
  %6 = tc.ones : tensor<4xf32>
  tc.materialize %6 into @model.norm : tensor<4xf32>
  return
}
func.func @forward(%ids: tensor<3xi64>) -> tensor<3x10xf32> {
  %embed = tc.use @model.embed : tensor<10x4xf32>
  %e = tc.embedding %embed, %ids : tensor<10x4xf32>, tensor<3xi64> -> tensor<3x4xf32>
  %w0 = tc.use @model.layers.0.attn : tensor<4x4xf32>
  %a0 = tc.linear %e, %w0 : tensor<3x4xf32>, tensor<4x4xf32> -> tensor<3x4xf32>
  %m0w = tc.use @model.layers.0.mlp : tensor<4x4xf32>
  %m0 = tc.linear %a0, %m0w : tensor<3x4xf32>, tensor<4x4xf32> -> tensor<3x4xf32>
  %w1 = tc.use @model.layers.1.attn : tensor<4x4xf32>
  %a1 = tc.linear %m0, %w1 : tensor<3x4xf32>, tensor<4x4xf32> -> tensor<3x4xf32>
  %m1w = tc.use @model.layers.1.mlp : tensor<4x4xf32>
  %m1 = tc.linear %a1, %m1w : tensor<3x4xf32>, tensor<4x4xf32> -> tensor<3x4xf32>
  %hw = tc.use @model.heads.0 : tensor<4x4xf32>
  %h = tc.linear %m1, %hw : tensor<3x4xf32>, tensor<4x4xf32> -> tensor<3x4xf32>
  %nw = tc.use @model.norm : tensor<4xf32>
  %n = tc.mul %h, %nw : tensor<3x4xf32>, tensor<4xf32> -> tensor<3x4xf32>
  %embed2 = tc.use @model.embed : tensor<10x4xf32>
  %logits = tc.linear %n, %embed2 : tensor<3x4xf32>, tensor<10x4xf32> -> tensor<3x10xf32>
  return %logits : tensor<3x10xf32>
}
