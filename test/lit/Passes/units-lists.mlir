// RUN: shardc-opt %s -split-input-file -tc-assign-units | FileCheck %s

// Default FSDP units: each block of each layer list (docs/graph-format.md,
// "FSDP units").

// Two layer lists (an encoder's and a decoder's): each block of both is a
// unit. A list with one block beside them is not a list.
// CHECK-LABEL: tc.param @encoder.layers.0.w : tensor<2xf32> device "cpu" unit "encoder.layers.0"
// CHECK-NEXT: tc.param @encoder.layers.1.w : tensor<2xf32> device "cpu" unit "encoder.layers.1"
// CHECK-NEXT: tc.param @decoder.layers.0.w : tensor<2xf32> device "cpu" unit "decoder.layers.0"
// CHECK-NEXT: tc.param @decoder.layers.1.w : tensor<2xf32> device "cpu" unit "decoder.layers.1"
// CHECK-NEXT: tc.param @head.0.w : tensor<2xf32> device "cpu" unit "root"
// CHECK-NEXT: tc.param @norm.w : tensor<2xf32> device "cpu" unit "root"
tc.param @encoder.layers.0.w : tensor<2xf32> device "cpu"
tc.param @encoder.layers.1.w : tensor<2xf32> device "cpu"
tc.param @decoder.layers.0.w : tensor<2xf32> device "cpu"
tc.param @decoder.layers.1.w : tensor<2xf32> device "cpu"
tc.param @head.0.w : tensor<2xf32> device "cpu"
tc.param @norm.w : tensor<2xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<2xf32>
  tc.materialize %0 into @encoder.layers.0.w : tensor<2xf32>
  %1 = tc.ones : tensor<2xf32>
  tc.materialize %1 into @encoder.layers.1.w : tensor<2xf32>
  %2 = tc.ones : tensor<2xf32>
  tc.materialize %2 into @decoder.layers.0.w : tensor<2xf32>
  %3 = tc.ones : tensor<2xf32>
  tc.materialize %3 into @decoder.layers.1.w : tensor<2xf32>
  %4 = tc.ones : tensor<2xf32>
  tc.materialize %4 into @head.0.w : tensor<2xf32>
  %5 = tc.ones : tensor<2xf32>
  tc.materialize %5 into @norm.w : tensor<2xf32>
  return
}
func.func @forward(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}

// -----

// Blocks named with trailing digits (torchvision's ViT, DenseNet, RegNet);
// a name's block is its outermost one.
// CHECK-LABEL: tc.param @encoder.layers.encoder_layer_0.ln_1.w : tensor<2xf32> device "cpu" unit "encoder.layers.encoder_layer_0"
// CHECK-NEXT: tc.param @encoder.layers.encoder_layer_0.mlp.0.w : tensor<2xf32> device "cpu" unit "encoder.layers.encoder_layer_0"
// CHECK-NEXT: tc.param @encoder.layers.encoder_layer_1.ln_1.w : tensor<2xf32> device "cpu" unit "encoder.layers.encoder_layer_1"
// CHECK-NEXT: tc.param @features.denseblock1.denselayer1.w : tensor<2xf32> device "cpu" unit "features.denseblock1"
// CHECK-NEXT: tc.param @features.denseblock2.denselayer1.w : tensor<2xf32> device "cpu" unit "features.denseblock2"
// CHECK-NEXT: tc.param @conv_proj.w : tensor<2xf32> device "cpu" unit "root"
// CHECK-NEXT: tc.param @encoder.ln.w : tensor<2xf32> device "cpu" unit "root"
tc.param @encoder.layers.encoder_layer_0.ln_1.w : tensor<2xf32> device "cpu"
tc.param @encoder.layers.encoder_layer_0.mlp.0.w : tensor<2xf32> device "cpu"
tc.param @encoder.layers.encoder_layer_1.ln_1.w : tensor<2xf32> device "cpu"
tc.param @features.denseblock1.denselayer1.w : tensor<2xf32> device "cpu"
tc.param @features.denseblock2.denselayer1.w : tensor<2xf32> device "cpu"
tc.param @conv_proj.w : tensor<2xf32> device "cpu"
tc.param @encoder.ln.w : tensor<2xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<2xf32>
  tc.materialize %0 into @encoder.layers.encoder_layer_0.ln_1.w : tensor<2xf32>
  %1 = tc.ones : tensor<2xf32>
  tc.materialize %1 into @encoder.layers.encoder_layer_0.mlp.0.w : tensor<2xf32>
  %2 = tc.ones : tensor<2xf32>
  tc.materialize %2 into @encoder.layers.encoder_layer_1.ln_1.w : tensor<2xf32>
  %3 = tc.ones : tensor<2xf32>
  tc.materialize %3 into @features.denseblock1.denselayer1.w : tensor<2xf32>
  %4 = tc.ones : tensor<2xf32>
  tc.materialize %4 into @features.denseblock2.denselayer1.w : tensor<2xf32>
  %5 = tc.ones : tensor<2xf32>
  tc.materialize %5 into @conv_proj.w : tensor<2xf32>
  %6 = tc.ones : tensor<2xf32>
  tc.materialize %6 into @encoder.ln.w : tensor<2xf32>
  return
}
func.func @forward(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}

// -----

// The prefix with the most blocks is a list even with one block.
// CHECK-LABEL: tc.param @model.heads.0.w : tensor<2xf32> device "cpu" unit "model.heads.0"
// CHECK-NEXT: tc.param @model.norm : tensor<2xf32> device "cpu" unit "root"
tc.param @model.heads.0.w : tensor<2xf32> device "cpu"
tc.param @model.norm : tensor<2xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<2xf32>
  tc.materialize %0 into @model.heads.0.w : tensor<2xf32>
  %1 = tc.ones : tensor<2xf32>
  tc.materialize %1 into @model.norm : tensor<2xf32>
  return
}
func.func @forward(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}

// -----

// Nested lists: the outermost is the unit (Swin's stages).
// CHECK-LABEL: tc.param @features.0.0.w : tensor<2xf32> device "cpu" unit "features.0"
// CHECK-NEXT: tc.param @features.1.0.norm1.w : tensor<2xf32> device "cpu" unit "features.1"
// CHECK-NEXT: tc.param @features.1.1.norm1.w : tensor<2xf32> device "cpu" unit "features.1"
// CHECK-NEXT: tc.param @features.2.reduction.w : tensor<2xf32> device "cpu" unit "features.2"
// CHECK-NEXT: tc.param @head.w : tensor<2xf32> device "cpu" unit "root"
tc.param @features.0.0.w : tensor<2xf32> device "cpu"
tc.param @features.1.0.norm1.w : tensor<2xf32> device "cpu"
tc.param @features.1.1.norm1.w : tensor<2xf32> device "cpu"
tc.param @features.2.reduction.w : tensor<2xf32> device "cpu"
tc.param @head.w : tensor<2xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<2xf32>
  tc.materialize %0 into @features.0.0.w : tensor<2xf32>
  %1 = tc.ones : tensor<2xf32>
  tc.materialize %1 into @features.1.0.norm1.w : tensor<2xf32>
  %2 = tc.ones : tensor<2xf32>
  tc.materialize %2 into @features.1.1.norm1.w : tensor<2xf32>
  %3 = tc.ones : tensor<2xf32>
  tc.materialize %3 into @features.2.reduction.w : tensor<2xf32>
  %4 = tc.ones : tensor<2xf32>
  tc.materialize %4 into @head.w : tensor<2xf32>
  return
}
func.func @forward(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}
