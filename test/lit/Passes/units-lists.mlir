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

// Nested lists: the outermost is the unit while it holds at most a quarter
// of the model's parameters (Swin's early stages).
// CHECK-LABEL: tc.param @features.0.0.w : tensor<2xf32> device "cpu" unit "features.0"
// CHECK-NEXT: tc.param @features.1.0.norm1.w : tensor<2xf32> device "cpu" unit "features.1"
// CHECK-NEXT: tc.param @features.1.1.norm1.w : tensor<2xf32> device "cpu" unit "features.1"
// CHECK-NEXT: tc.param @features.2.reduction.w : tensor<2xf32> device "cpu" unit "features.2"
// CHECK-NEXT: tc.param @head.w : tensor<64xf32> device "cpu" unit "root"
tc.param @features.0.0.w : tensor<2xf32> device "cpu"
tc.param @features.1.0.norm1.w : tensor<2xf32> device "cpu"
tc.param @features.1.1.norm1.w : tensor<2xf32> device "cpu"
tc.param @features.2.reduction.w : tensor<2xf32> device "cpu"
tc.param @head.w : tensor<64xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<2xf32>
  tc.materialize %0 into @features.0.0.w : tensor<2xf32>
  %1 = tc.ones : tensor<2xf32>
  tc.materialize %1 into @features.1.0.norm1.w : tensor<2xf32>
  %2 = tc.ones : tensor<2xf32>
  tc.materialize %2 into @features.1.1.norm1.w : tensor<2xf32>
  %3 = tc.ones : tensor<2xf32>
  tc.materialize %3 into @features.2.reduction.w : tensor<2xf32>
  %4 = tc.ones : tensor<64xf32>
  tc.materialize %4 into @head.w : tensor<64xf32>
  return
}
func.func @forward(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}

// -----

// A block over a quarter of the model (features.3: 192 of 232 elements) is
// split into the blocks of its nested list; its parameters outside that list
// stay in it. features.3.0 is still over a quarter, but its nested list holds
// single layers (mlp.0, mlp.3), the inside of one block: it stays whole.
// CHECK-LABEL: tc.param @features.0.0.w : tensor<8xf32> device "cpu" unit "features.0"
// CHECK-NEXT: tc.param @features.1.0.norm1.w : tensor<8xf32> device "cpu" unit "features.1"
// CHECK-NEXT: tc.param @features.1.1.norm1.w : tensor<8xf32> device "cpu" unit "features.1"
// CHECK-NEXT: tc.param @features.3.0.attn.w : tensor<32xf32> device "cpu" unit "features.3.0"
// CHECK-NEXT: tc.param @features.3.0.mlp.0.w : tensor<32xf32> device "cpu" unit "features.3.0"
// CHECK-NEXT: tc.param @features.3.0.mlp.3.w : tensor<32xf32> device "cpu" unit "features.3.0"
// CHECK-NEXT: tc.param @features.3.1.attn.w : tensor<32xf32> device "cpu" unit "features.3.1"
// CHECK-NEXT: tc.param @features.3.1.mlp.0.w : tensor<32xf32> device "cpu" unit "features.3.1"
// CHECK-NEXT: tc.param @features.3.1.mlp.3.w : tensor<32xf32> device "cpu" unit "features.3.1"
// CHECK-NEXT: tc.param @features.3.scale : tensor<8xf32> device "cpu" unit "features.3"
// CHECK-NEXT: tc.param @head.w : tensor<8xf32> device "cpu" unit "root"
tc.param @features.0.0.w : tensor<8xf32> device "cpu"
tc.param @features.1.0.norm1.w : tensor<8xf32> device "cpu"
tc.param @features.1.1.norm1.w : tensor<8xf32> device "cpu"
tc.param @features.3.0.attn.w : tensor<32xf32> device "cpu"
tc.param @features.3.0.mlp.0.w : tensor<32xf32> device "cpu"
tc.param @features.3.0.mlp.3.w : tensor<32xf32> device "cpu"
tc.param @features.3.1.attn.w : tensor<32xf32> device "cpu"
tc.param @features.3.1.mlp.0.w : tensor<32xf32> device "cpu"
tc.param @features.3.1.mlp.3.w : tensor<32xf32> device "cpu"
tc.param @features.3.scale : tensor<8xf32> device "cpu"
tc.param @head.w : tensor<8xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<8xf32>
  tc.materialize %0 into @features.0.0.w : tensor<8xf32>
  %1 = tc.ones : tensor<8xf32>
  tc.materialize %1 into @features.1.0.norm1.w : tensor<8xf32>
  %2 = tc.ones : tensor<8xf32>
  tc.materialize %2 into @features.1.1.norm1.w : tensor<8xf32>
  %3 = tc.ones : tensor<32xf32>
  tc.materialize %3 into @features.3.0.attn.w : tensor<32xf32>
  %4 = tc.ones : tensor<32xf32>
  tc.materialize %4 into @features.3.0.mlp.0.w : tensor<32xf32>
  %5 = tc.ones : tensor<32xf32>
  tc.materialize %5 into @features.3.0.mlp.3.w : tensor<32xf32>
  %6 = tc.ones : tensor<32xf32>
  tc.materialize %6 into @features.3.1.attn.w : tensor<32xf32>
  %7 = tc.ones : tensor<32xf32>
  tc.materialize %7 into @features.3.1.mlp.0.w : tensor<32xf32>
  %8 = tc.ones : tensor<32xf32>
  tc.materialize %8 into @features.3.1.mlp.3.w : tensor<32xf32>
  %9 = tc.ones : tensor<8xf32>
  tc.materialize %9 into @features.3.scale : tensor<8xf32>
  %10 = tc.ones : tensor<8xf32>
  tc.materialize %10 into @head.w : tensor<8xf32>
  return
}
func.func @forward(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}

// -----

// Not split: a block of exactly a quarter (layers.0: 64 of 256 parameter
// elements); a block over it only with its buffer, which is never gathered
// (layers.2); a unit given in the input (layers.1: 128).
// CHECK-LABEL: tc.param @layers.0.w : tensor<16xf32> device "cpu" unit "layers.0"
// CHECK-NEXT: tc.param @layers.0.sub.0.inner.w : tensor<16xf32> device "cpu" unit "layers.0"
// CHECK-NEXT: tc.param @layers.0.sub.1.inner.w : tensor<32xf32> device "cpu" unit "layers.0"
// CHECK-NEXT: tc.param @layers.1.w : tensor<16xf32> device "cpu" unit "layers.1"
// CHECK-NEXT: tc.param @layers.1.sub.0.inner.w : tensor<56xf32> device "cpu" unit "layers.1"
// CHECK-NEXT: tc.param @layers.1.sub.1.inner.w : tensor<56xf32> device "cpu" unit "layers.1"
// CHECK-NEXT: tc.param @layers.2.w : tensor<32xf32> device "cpu" unit "layers.2"
// CHECK-NEXT: tc.param @layers.2.stats : tensor<4096xf32> device "cpu" unit "layers.2" buffer
// CHECK-NEXT: tc.param @layers.2.sub.0.inner.w : tensor<16xf32> device "cpu" unit "layers.2"
// CHECK-NEXT: tc.param @layers.2.sub.1.inner.w : tensor<16xf32> device "cpu" unit "layers.2"
tc.param @layers.0.w : tensor<16xf32> device "cpu"
tc.param @layers.0.sub.0.inner.w : tensor<16xf32> device "cpu"
tc.param @layers.0.sub.1.inner.w : tensor<32xf32> device "cpu"
tc.param @layers.1.w : tensor<16xf32> device "cpu" unit "layers.1"
tc.param @layers.1.sub.0.inner.w : tensor<56xf32> device "cpu" unit "layers.1"
tc.param @layers.1.sub.1.inner.w : tensor<56xf32> device "cpu" unit "layers.1"
tc.param @layers.2.w : tensor<32xf32> device "cpu"
tc.param @layers.2.stats : tensor<4096xf32> device "cpu" buffer
tc.param @layers.2.sub.0.inner.w : tensor<16xf32> device "cpu"
tc.param @layers.2.sub.1.inner.w : tensor<16xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<16xf32>
  tc.materialize %0 into @layers.0.w : tensor<16xf32>
  %1 = tc.ones : tensor<16xf32>
  tc.materialize %1 into @layers.0.sub.0.inner.w : tensor<16xf32>
  %2 = tc.ones : tensor<32xf32>
  tc.materialize %2 into @layers.0.sub.1.inner.w : tensor<32xf32>
  %3 = tc.ones : tensor<16xf32>
  tc.materialize %3 into @layers.1.w : tensor<16xf32>
  %4 = tc.ones : tensor<56xf32>
  tc.materialize %4 into @layers.1.sub.0.inner.w : tensor<56xf32>
  %5 = tc.ones : tensor<56xf32>
  tc.materialize %5 into @layers.1.sub.1.inner.w : tensor<56xf32>
  %6 = tc.ones : tensor<32xf32>
  tc.materialize %6 into @layers.2.w : tensor<32xf32>
  %7 = tc.ones : tensor<4096xf32>
  tc.materialize %7 into @layers.2.stats : tensor<4096xf32>
  %8 = tc.ones : tensor<16xf32>
  tc.materialize %8 into @layers.2.sub.0.inner.w : tensor<16xf32>
  %9 = tc.ones : tensor<16xf32>
  tc.materialize %9 into @layers.2.sub.1.inner.w : tensor<16xf32>
  return
}
func.func @forward(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}
