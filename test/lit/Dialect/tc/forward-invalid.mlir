// RUN: shardc-opt %s -split-input-file -verify-diagnostics

func.func @f(%w: tensor<10x4xf32>, %ids: tensor<3xf32>) {
  // expected-error @+1 {{ids must be an int64 tensor, got 'tensor<3xf32>'}}
  %0 = tc.embedding %w, %ids : tensor<10x4xf32>, tensor<3xf32> -> tensor<3x4xf32>
  return
}

// -----

func.func @f(%w: tensor<10x4xf32>, %ids: tensor<3xi64>) {
  // expected-error @+1 {{result type 'tensor<3x5xf32>' does not have the expected shape [3, 4]}}
  %0 = tc.embedding %w, %ids : tensor<10x4xf32>, tensor<3xi64> -> tensor<3x5xf32>
  return
}

// -----

func.func @f(%x: tensor<2x5xf32>, %w: tensor<3x4xf32>) {
  // expected-error @+1 {{in_features differ: x 'tensor<2x5xf32>' has K = 5, weight 'tensor<3x4xf32>' has 4}}
  %0 = tc.linear %x, %w : tensor<2x5xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>, %w: tensor<3x4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{bias must be [3], got 'tensor<4xf32>'}}
  %0 = tc.linear %x, %w, %b : tensor<2x4xf32>, tensor<3x4xf32>, tensor<4xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>, %w: tensor<3x4xbf16>) {
  // expected-error @+1 {{element types differ}}
  %0 = tc.linear %x, %w : tensor<2x4xf32>, tensor<3x4xbf16> -> tensor<2x3xf32>
  return
}

// -----

func.func @f(%a: tensor<2x3x4xf32>, %b: tensor<5x6xf32>) {
  // expected-error @+1 {{inner dims differ}}
  %0 = tc.matmul %a, %b : tensor<2x3x4xf32>, tensor<5x6xf32> -> tensor<2x3x6xf32>
  return
}

// -----

func.func @f(%a: tensor<2x3x4xf32>, %b: tensor<3x4x6xf32>) {
  // expected-error @+1 {{batch dims of 'tensor<2x3x4xf32>' and 'tensor<3x4x6xf32>' do not broadcast}}
  %0 = tc.matmul %a, %b : tensor<2x3x4xf32>, tensor<3x4x6xf32> -> tensor<2x3x6xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{approximate must be "none" or "tanh", got "fast"}}
  %0 = tc.gelu %x approximate "fast" : tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<4xi64>) {
  // expected-error @+1 {{input must be a floating-point tensor}}
  %0 = tc.gelu %x approximate "none" : tensor<4xi64>
  return
}

// -----

func.func @f(%x: tensor<4x3xf32>) {
  // expected-error @+1 {{dim 2 out of range for rank 2}}
  %0 = tc.softmax %x dim 2 : tensor<4x3xf32>
  return
}

// -----

func.func @f(%x: tensor<1x2x3x5xf32>) {
  // expected-error @+1 {{expects [B, H, T, D] with D even}}
  %0 = tc.rope %x theta 10000.0 : tensor<1x2x3x5xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<4xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{weight and bias must be [8], got 'tensor<4xf32>'}}
  %0 = tc.layer_norm %x, %w, %b eps 1.0e-5 : tensor<2x8xf32>, tensor<4xf32>, tensor<8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{weight must be [8], got 'tensor<4xf32>'}}
  %0 = tc.rms_norm %x, %w eps 1.0e-6 : tensor<2x8xf32>, tensor<4xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x5x8xf32>) {
  // expected-error @+1 {{causal attention needs as many queries as keys}}
  %0 = tc.sdpa %q, %k, %k causal scale 1.0 : tensor<1x2x4x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32> -> tensor<1x2x4x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x2x4x8xf32>, %m: tensor<1x1x4x8xf32>) {
  // expected-error @+1 {{mask 'tensor<1x1x4x8xf32>' does not broadcast to the scores [1, 2, 4, 4]}}
  %0 = tc.sdpa %q, %q, %q mask %m scale 1.0 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<1x2x4x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x2x4x8xf32>, %m: tensor<1x1x4x4xbf16>) {
  // expected-error @+1 {{element types differ}}
  %0 = tc.sdpa %q, %q, %q mask %m scale 1.0 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x4x4xbf16> -> tensor<1x2x4x8xf32>
  return
}

// -----

func.func @f(%q: tensor<1x2x4x8xf32>, %k: tensor<1x3x4x8xf32>) {
  // expected-error @+1 {{shapes do not fit attention}}
  %0 = tc.sdpa %q, %k, %k scale 1.0 : tensor<1x2x4x8xf32>, tensor<1x3x4x8xf32>, tensor<1x3x4x8xf32> -> tensor<1x2x4x8xf32>
  return
}

// -----

// Grouped-query attention: 6 query heads cannot share 4 key / value heads.
func.func @f(%q: tensor<1x6x4x8xf32>, %k: tensor<1x4x4x8xf32>) {
  // expected-error @+1 {{H a multiple of Hkv): q 'tensor<1x6x4x8xf32>', k 'tensor<1x4x4x8xf32>'}}
  %0 = tc.sdpa %q, %k, %k scale 1.0 : tensor<1x6x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32> -> tensor<1x6x4x8xf32>
  return
}

// -----

// k and v must have the same heads.
func.func @f(%q: tensor<1x6x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x3x4x8xf32>) {
  // expected-error @+1 {{shapes do not fit attention}}
  %0 = tc.sdpa %q, %k, %v scale 1.0 : tensor<1x6x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x3x4x8xf32> -> tensor<1x6x4x8xf32>
  return
}

// -----

func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) {
  // expected-error @+1 {{inputs differ outside dim 1}}
  %0 = tc.cat %a, %b dim 1 : tensor<2x3xf32>, tensor<3x3xf32> -> tensor<2x6xf32>
  return
}

// -----

func.func @f(%l: tensor<4x10xf32>, %t: tensor<5xi64>) {
  // expected-error @+1 {{expects logits [N, C] and targets [N], got 'tensor<4x10xf32>' and 'tensor<5xi64>'}}
  %0 = tc.cross_entropy %l, %t : tensor<4x10xf32>, tensor<5xi64> -> tensor<f32>
  return
}

// -----

func.func @f(%a: tensor<4x3xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{shapes 'tensor<4x3xf32>' and 'tensor<2xf32>' do not broadcast}}
  %0 = tc.mul %a, %b : tensor<4x3xf32>, tensor<2xf32> -> tensor<4x3xf32>
  return
}

// -----

func.func @f(%a: tensor<4xi64>) {
  // expected-error @+1 {{operands must be floating point (cast int64 first), got 'tensor<4xi64>'}}
  %0 = tc.div %a, %a : tensor<4xi64>, tensor<4xi64> -> tensor<4xi64>
  return
}
