// RUN: shardc-opt %s -split-input-file -verify-diagnostics
// Each error of tc.op's verifier, which asks the runtime's op table.

func.func @f(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{unknown op "conv2d"; tc.op takes the op table's family ops: conv, conv_weight_grad, max_pool}}
  %0 = tc.op "conv2d"(%x) : (tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{"add" is not a family op of the op table (it has its own tc op or is not a forward op)}}
  %0 = tc.op "add"(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{"sigmoid" has no attribute 'alpha' (it takes none)}}
  %0 = tc.op "sigmoid"(%x) {alpha = 1.0 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{attribute 'stride' must be a list of i64 integers, got 2 : i64}}
  %0 = tc.op "max_pool"(%x) {kernel = [2, 2], stride = 2, padding = [0, 0]} : (tensor<2x3x8x8xf32>) -> tensor<2x3x4x4xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'exponent' must be an f64 float, got 2 : i64}}
  %0 = tc.op "pow_scalar"(%x) {exponent = 2} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{"max_pool" needs attribute 'padding' (a list of i64 integers)}}
  %0 = tc.op "max_pool"(%x) {kernel = [2, 2], stride = [2, 2]} : (tensor<2x3x8x8xf32>) -> tensor<2x3x4x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{conv: takes 2 to 3 operands, got 1}}
  %0 = tc.op "conv"(%x) {stride = [1, 1], padding = [0, 0], dilation = [1, 1], groups = 1} : (tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{max_pool: stride needs 2 entries (one per spatial dim), got 1}}
  %0 = tc.op "max_pool"(%x) {kernel = [2, 2], stride = [2], padding = [0, 0]} : (tensor<2x3x8x8xf32>) -> tensor<2x3x4x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xi64>) {
  // expected-error @+1 {{sigmoid: operand 0 is int64; expects float32, float64, bfloat16 or float16}}
  %0 = tc.op "sigmoid"(%x) : (tensor<2x4xi64>) -> tensor<2x4xi64>
  return
}

// -----

func.func @f(%x: tensor<2x4xi32>) {
  // expected-error @+1 {{element type 'i32' has no runtime dtype}}
  %0 = tc.op "sigmoid"(%x) : (tensor<2x4xi32>) -> tensor<2x4xi32>
  return
}

// -----

func.func @f(%x: tensor<2x4x6xf32>) {
  // expected-error @+1 {{result type 'tensor<2x6xf32>' differs from the op table rule's [2x4] float32}}
  %0 = tc.op "sum"(%x) {dims = [2]} : (tensor<2x4x6xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{result type 'tensor<2xf32>' differs from the op table rule's [2] int64}}
  %0 = tc.op "argmax"(%x) {dims = [1]} : (tensor<2x4xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{keepdim must be 0 or 1, got 2}}
  %0 = tc.op "sum"(%x) {dims = [1], keepdim = 2} : (tensor<2x4xf32>) -> tensor<2xf32>
  return
}

// -----

// The family's shape rule (runtime/OpFamilies.cpp) speaks through the verifier.
func.func @f(%x: tensor<2x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+1 {{convolution: Given groups=1, weight of size [4, 2, 3, 3], expected input[2, 3, 8, 8] to have 2 channels, but got 3 channels instead}}
  %0 = tc.op "conv"(%x, %w) {stride = [1, 1], padding = [0, 0], dilation = [1, 1], groups = 1} : (tensor<2x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<2x4x6x6xf32>
  return
}

// -----

// conv_weight_grad's gradient must be the convolution's output for the
// kernel (here a 3x3 kernel at stride 1 gives 6x6, not 8x8).
func.func @f(%x: tensor<2x3x8x8xf32>, %g: tensor<2x4x8x8xf32>) {
  // expected-error @+1 {{conv_weight_grad: gradient [2, 4, 8, 8] is not the convolution's output [2, 4, 6, 6] for input [2, 3, 8, 8] and weight [4, 3, 3, 3]}}
  %0 = tc.op "conv_weight_grad"(%x, %g) {stride = [1, 1], padding = [0, 0], dilation = [1, 1], groups = 1, kernel = [3, 3]} : (tensor<2x3x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<4x3x3x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6x5xf32>) {
  // expected-error @+1 {{group_norm: Expected number of channels in input to be divisible by num_groups}}
  %0 = tc.op "group_norm"(%x) {groups = 4, eps = 1.0e-5 : f64} : (tensor<2x6x5xf32>) -> tensor<2x6x5xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4x6xf32>, %m: tensor<4xf32>) {
  // expected-error @+1 {{batch_norm: takes weight and bias together (5 operands) or neither (3)}}
  %0 = tc.op "batch_norm"(%x, %m, %m, %m) {eps = 1.0e-5 : f64} : (tensor<2x4x6xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x6xf32>
  return
}

// -----

func.func @f(%x: tensor<4xi64>) {
  // expected-error @+1 {{ne: compares one operand with `value`, which is missing}}
  %0 = tc.op "ne"(%x) : (tensor<4xi64>) -> tensor<4xi64>
  return
}

// -----

func.func @f(%x: tensor<4xi64>, %y: tensor<4xf32>) {
  // expected-error @+1 {{eq: operands differ in dtype: int64 and float32}}
  %0 = tc.op "eq"(%x, %y) : (tensor<4xi64>, tensor<4xf32>) -> tensor<4xi64>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{cast: dtype must be float32, float64, bfloat16, float16 or int64, got "int32"}}
  %0 = tc.op "cast"(%x) {dtype = "int32"} : (tensor<4xf32>) -> tensor<4xi64>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{cumsum: Dimension out of range (expected to be in range of [-1, 0], but got 1)}}
  %0 = tc.op "cumsum"(%x) {dim = 1} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%c: tensor<4xf32>, %x: tensor<4xf32>) {
  // expected-error @+1 {{where: cond (operand 0) is float32; expects int64 (a comparison's 1/0)}}
  %0 = tc.op "where"(%c, %x, %x) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x5x5xf32>, %g: tensor<2x4x4x3xf32>) {
  // expected-error @+1 {{grid_sample: grid must be [N, Ho, Wo, 2] with x's N = 2, got [2, 4, 4, 3]}}
  %0 = tc.op "grid_sample"(%x, %g) : (tensor<2x3x5x5xf32>, tensor<2x4x4x3xf32>) -> tensor<2x3x4x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x5x5xf32>, %g: tensor<2x4x4x2xf32>) {
  // expected-error @+1 {{grid_sample: mode must be "bilinear" or "nearest", got "bicubic" (bicubic has no kernel)}}
  %0 = tc.op "grid_sample"(%x, %g) {mode = "bicubic"} : (tensor<2x3x5x5xf32>, tensor<2x4x4x2xf32>) -> tensor<2x3x4x4xf32>
  return
}

// -----

func.func @f(%ids: tensor<4xi64>) {
  // expected-error @+1 {{all_reduce_sum: operand 0 is int64; expects float32, float64, bfloat16 or float16}}
  %0 = tc.op "all_reduce_sum"(%ids) : (tensor<4xi64>) -> tensor<4xi64>
  return
}
