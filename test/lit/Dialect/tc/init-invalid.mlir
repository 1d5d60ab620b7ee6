// RUN: shardc-opt %s -split-input-file -verify-diagnostics

func.func @init() {
  // expected-error @+1 {{low 1.000000e+00 exceeds high 0.000000e+00}}
  %0 = tc.uniform low 1.0 high 0.0 position 0 : tensor<4xf32>
  return
}

// -----

func.func @init() {
  // expected-error @+1 {{std must be non-negative, got -1.000000e+00}}
  %0 = tc.normal mean 0.0 std -1.0 position 0 : tensor<4xf32>
  return
}

// -----

func.func @init() {
  // expected-error @+1 {{std must be positive, got 0.000000e+00}}
  %0 = tc.trunc_normal mean 0.0 std 0.0 a -2.0 b 2.0 position 0 : tensor<4xf32>
  return
}

// -----

func.func @init() {
  // expected-error @+1 {{truncation bounds [2.000000e+00, -2.000000e+00] are empty}}
  %0 = tc.trunc_normal mean 0.0 std 1.0 a 2.0 b -2.0 position 0 : tensor<4xf32>
  return
}

// -----

func.func @init() {
  // expected-error @+1 {{needs a 2-D tensor, got 'tensor<4xf32>'}}
  %0 = tc.eye : tensor<4xf32>
  return
}

// -----

func.func @init() {
  // expected-error @+1 {{needs a tensor of at least 2 dims, got 'tensor<4xf32>'}}
  %0 = tc.orthogonal gain 1.0 position 0 : tensor<4xf32>
  return
}

// -----

func.func @init() {
  // expected-error @+1 {{is not shardable: it cannot produce a shard}}
  %0 = tc.orthogonal gain 1.0 position 0 : tensor<2x4xf32> shard of tensor<4x4xf32>
  return
}

// -----

func.func @init() {
  // expected-error @+1 {{mode must be "fan_in" or "fan_out", got "fan_avg"}}
  %0 = tc.kaiming_uniform a 0.0 mode "fan_avg" nonlinearity "relu" position 0 : tensor<4x4xf32>
  return
}

// -----

func.func @init() {
  // expected-error @+1 {{unsupported nonlinearity "swish"}}
  %0 = tc.kaiming_normal a 0.0 mode "fan_in" nonlinearity "swish" position 0 : tensor<4x4xf32>
  return
}

// -----

func.func @init() {
  // expected-error @+1 {{needs a tensor of at least 2 dims to compute fan in and fan out, got 'tensor<4xf32>'}}
  %0 = tc.xavier_uniform gain 1.0 position 0 : tensor<4xf32>
  return
}

// -----

func.func @init() {
  // expected-error @+1 {{index map affine_map<(d0) -> (d0)> must take 2 indices of 'tensor<3x5xf32>' to 2 indices of 'tensor<5x3xf32>'}}
  %0 = tc.uniform low 0.0 high 1.0 position 0 : tensor<3x5xf32> from tensor<5x3xf32> map affine_map<(d0) -> (d0)>
  return
}

// -----

func.func @init() {
  %0 = tc.ones : tensor<4xf32>
  // expected-error @+1 {{min 2.000000e+00 exceeds max 1.000000e+00}}
  %1 = tc.clamp %0 min 2.0 max 1.0 : tensor<4xf32>
  return
}

// -----

func.func @init() {
  %0 = tc.ones : tensor<4x3xf32>
  // expected-error @+1 {{cannot reshape 'tensor<4x3xf32>' (12 elements) to 'tensor<5xf32>' (5 elements)}}
  %1 = tc.reshape %0 : tensor<4x3xf32> -> tensor<5xf32>
  return
}

// -----

func.func @init() {
  %0 = tc.ones : tensor<4x3xf32>
  // expected-error @+1 {{dims 0, 2 out of range for rank 2}}
  %1 = tc.transpose %0, 0, 2 : tensor<4x3xf32> -> tensor<3x4xf32>
  return
}

// -----

func.func @init() {
  %0 = tc.ones : tensor<4x3xf32>
  // expected-error @+1 {{result type 'tensor<4x3xf32>' is not the transpose of 'tensor<4x3xf32>'}}
  %1 = tc.transpose %0, 0, 1 : tensor<4x3xf32> -> tensor<4x3xf32>
  return
}

// -----

func.func @init() {
  %0 = tc.ones : tensor<4x3xf32>
  // expected-error @+1 {{dims must be a permutation of 0..1}}
  %1 = tc.permute %0 [0, 0] : tensor<4x3xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @init() {
  %0 = tc.ones : tensor<4x3xf32>
  // expected-error @+1 {{slice [1:5:1] is not within dim 0 of size 4 with a positive step}}
  %1 = tc.slice %0 dim 0 start 1 end 5 step 1 : tensor<4x3xf32> -> tensor<4x3xf32>
  return
}

// -----

func.func @init() {
  %0 = tc.ones : tensor<4x3xf32>
  // expected-error @+1 {{result type 'tensor<3x3xf32>' does not match the slice of 'tensor<4x3xf32>'}}
  %1 = tc.slice %0 dim 0 start 0 end 4 step 2 : tensor<4x3xf32> -> tensor<3x3xf32>
  return
}

// -----

func.func @init() {
  %0 = tc.ones : tensor<4x3xf32>
  // expected-error @+1 {{changes the element type}}
  %1 = tc.reshape %0 : tensor<4x3xf32> -> tensor<12xf64>
  return
}

// -----

func.func @init() {
  %0 = tc.ones : tensor<4x3xf32>
  // expected-error @+1 {{result type 'tensor<2x4xf32>' is not a dim-0 shard of 'tensor<4x3xf32>'}}
  %1 = tc.scatter %0 from 0 : tensor<4x3xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @init() {
  // expected-error @+1 {{dim 2 is out of range for 'tensor<1x4xf32>'}}
  %0 = tc.norm_of of "v" dims [2] : tensor<1x4xf32>
  return
}

// -----

// tc.fill_rows: rows [start, end) need 0 <= start <= end.
func.func @init() {
  %0 = tc.ones : tensor<4x3xf32>
  // expected-error @+1 {{rows [3, 1) need 0 <= start <= end}}
  %1 = tc.fill_rows %0 value 0.0 rows 3 to 1 : tensor<4x3xf32>
  return
}
