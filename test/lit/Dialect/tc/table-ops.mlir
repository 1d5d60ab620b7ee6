// RUN: shardc-opt %s | FileCheck %s
// RUN: shardc-opt %s | shardc-opt | FileCheck %s
// Round trip of tc.op, the generic op of the op table's family ops: the
// name, the operands, the attributes in the table's kinds and the result
// type the family's rule gives.

// CHECK-LABEL: func.func @convnet(
func.func @convnet(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>,
                   %m: tensor<4xf32>, %v: tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2xi64>) {
  // CHECK: %[[C:.*]] = tc.op "conv"(%{{.*}}, %{{.*}}, %{{.*}}) {dilation = [1, 1], groups = 1 : i64, padding = [1, 1], stride = [2, 2]} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x4x4xf32>
  %c = tc.op "conv"(%x, %w, %b) {stride = [2, 2], padding = [1, 1], dilation = [1, 1], groups = 1}
      : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: %[[N:.*]] = tc.op "batch_norm"(%[[C]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {eps = 1.000000e-05 : f64}
  %n = tc.op "batch_norm"(%c, %m, %v, %m, %v) {eps = 1.0e-5 : f64}
      : (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: %[[H:.*]] = tc.op "hardswish"(%[[N]]) : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %h = tc.op "hardswish"(%n) : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: %[[K:.*]] = tc.op "clamp_out"(%[[H]]) {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64}
  %k = tc.op "clamp_out"(%h) {min = 0.0 : f64, max = 6.0 : f64} : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: %[[P:.*]] = tc.op "max_pool"(%[[K]]) {kernel = [3, 3], padding = [1, 1], stride = [2, 2]} : (tensor<2x4x4x4xf32>) -> tensor<2x4x2x2xf32>
  %p = tc.op "max_pool"(%k) {kernel = [3, 3], stride = [2, 2], padding = [1, 1]}
      : (tensor<2x4x4x4xf32>) -> tensor<2x4x2x2xf32>
  // CHECK: %[[A:.*]] = tc.op "adaptive_avg_pool"(%[[P]]) {output_size = [1, 1]} : (tensor<2x4x2x2xf32>) -> tensor<2x4x1x1xf32>
  %a = tc.op "adaptive_avg_pool"(%p) {output_size = [1, 1]} : (tensor<2x4x2x2xf32>) -> tensor<2x4x1x1xf32>
  // CHECK: %[[M:.*]] = tc.op "mean"(%[[A]]) {dims = [-1, -2]} : (tensor<2x4x1x1xf32>) -> tensor<2x4xf32>
  %mean = tc.op "mean"(%a) {dims = [-1, -2]} : (tensor<2x4x1x1xf32>) -> tensor<2x4xf32>
  // CHECK: tc.op "argmax"(%[[M]]) {dims = [1]} : (tensor<2x4xf32>) -> tensor<2xi64>
  %i = tc.op "argmax"(%mean) {dims = [1]} : (tensor<2x4xf32>) -> tensor<2xi64>
  // CHECK: return %[[M]], %{{.*}} : tensor<2x4xf32>, tensor<2xi64>
  return %mean, %i : tensor<2x4xf32>, tensor<2xi64>
}

// The weight gradient of @convnet's conv: input and output gradient in,
// the weight's shape out (docs/training.md).
// CHECK-LABEL: func.func @conv_weight_grad(
func.func @conv_weight_grad(%x: tensor<2x3x8x8xf32>, %g: tensor<2x4x4x4xf32>) -> tensor<4x3x3x3xf32> {
  // CHECK: tc.op "conv_weight_grad"(%{{.*}}, %{{.*}}) {dilation = [1, 1], groups = 1 : i64, kernel = [3, 3], padding = [1, 1], stride = [2, 2]} : (tensor<2x3x8x8xf32>, tensor<2x4x4x4xf32>) -> tensor<4x3x3x3xf32>
  %dw = tc.op "conv_weight_grad"(%x, %g) {stride = [2, 2], padding = [1, 1], dilation = [1, 1], groups = 1, kernel = [3, 3]}
      : (tensor<2x3x8x8xf32>, tensor<2x4x4x4xf32>) -> tensor<4x3x3x3xf32>
  return %dw : tensor<4x3x3x3xf32>
}

// CHECK-LABEL: func.func @norms_and_reductions(
func.func @norms_and_reductions(%x: tensor<2x8x5xbf16>, %g: tensor<8xbf16>) -> tensor<2x1x5xbf16> {
  // CHECK: %[[G:.*]] = tc.op "group_norm"(%{{.*}}, %{{.*}}, %{{.*}}) {eps = 1.000000e-05 : f64, groups = 4 : i64} : (tensor<2x8x5xbf16>, tensor<8xbf16>, tensor<8xbf16>) -> tensor<2x8x5xbf16>
  %n = tc.op "group_norm"(%x, %g, %g) {groups = 4, eps = 1.0e-5 : f64}
      : (tensor<2x8x5xbf16>, tensor<8xbf16>, tensor<8xbf16>) -> tensor<2x8x5xbf16>
  // CHECK: tc.op "var"(%[[G]]) {correction = 0 : i64, dims = [1], keepdim = 1 : i64} : (tensor<2x8x5xbf16>) -> tensor<2x1x5xbf16>
  %v = tc.op "var"(%n) {dims = [1], keepdim = 1, correction = 0} : (tensor<2x8x5xbf16>) -> tensor<2x1x5xbf16>
  return %v : tensor<2x1x5xbf16>
}

// RoBERTa's position ids from its token ids: comparisons give int64 1/0,
// cumsum and int64 add/mul keep int64, cast changes the dtype.
// CHECK-LABEL: func.func @position_ids(
func.func @position_ids(%ids: tensor<2x6xi64>, %one: tensor<i64>) -> (tensor<2x6xi64>, tensor<2x6xf32>) {
  // CHECK: %[[MASK:.*]] = tc.op "ne"(%{{.*}}) {value = 1.000000e+00 : f64} : (tensor<2x6xi64>) -> tensor<2x6xi64>
  %mask = tc.op "ne"(%ids) {value = 1.0 : f64} : (tensor<2x6xi64>) -> tensor<2x6xi64>
  // CHECK: %[[SUM:.*]] = tc.op "cumsum"(%[[MASK]]) {dim = 1 : i64} : (tensor<2x6xi64>) -> tensor<2x6xi64>
  %sum = tc.op "cumsum"(%mask) {dim = 1} : (tensor<2x6xi64>) -> tensor<2x6xi64>
  // CHECK: %[[M:.*]] = tc.mul %[[SUM]], %[[MASK]] : tensor<2x6xi64>, tensor<2x6xi64> -> tensor<2x6xi64>
  %m = tc.mul %sum, %mask : tensor<2x6xi64>, tensor<2x6xi64> -> tensor<2x6xi64>
  // CHECK: %[[P:.*]] = tc.add %[[M]], %{{.*}} : tensor<2x6xi64>, tensor<i64> -> tensor<2x6xi64>
  %p = tc.add %m, %one : tensor<2x6xi64>, tensor<i64> -> tensor<2x6xi64>
  // CHECK: %[[GE:.*]] = tc.op "ge"(%[[P]], %[[SUM]]) : (tensor<2x6xi64>, tensor<2x6xi64>) -> tensor<2x6xi64>
  %ge = tc.op "ge"(%p, %sum) : (tensor<2x6xi64>, tensor<2x6xi64>) -> tensor<2x6xi64>
  // CHECK: %[[F:.*]] = tc.op "cast"(%[[GE]]) {dtype = "float32"} : (tensor<2x6xi64>) -> tensor<2x6xf32>
  %f = tc.op "cast"(%ge) {dtype = "float32"} : (tensor<2x6xi64>) -> tensor<2x6xf32>
  // CHECK: tc.op "where"(%[[MASK]], %[[F]], %{{.*}}) : (tensor<2x6xi64>, tensor<2x6xf32>, tensor<f32>) -> tensor<2x6xf32>
  %zero = tc.op "cast"(%one) {dtype = "float32"} : (tensor<i64>) -> tensor<f32>
  %w = tc.op "where"(%mask, %f, %zero) : (tensor<2x6xi64>, tensor<2x6xf32>, tensor<f32>) -> tensor<2x6xf32>
  return %p, %w : tensor<2x6xi64>, tensor<2x6xf32>
}

// RAFT's correlation lookup: x read at a grid of normalized positions.
// CHECK-LABEL: func.func @lookup(
func.func @lookup(%corr: tensor<4x1x8x8xf32>, %grid: tensor<4x9x9x2xf32>) -> tensor<4x1x9x9xf32> {
  // CHECK: tc.op "grid_sample"(%{{.*}}, %{{.*}}) {align_corners = 1 : i64} : (tensor<4x1x8x8xf32>, tensor<4x9x9x2xf32>) -> tensor<4x1x9x9xf32>
  %s = tc.op "grid_sample"(%corr, %grid) {align_corners = 1} : (tensor<4x1x8x8xf32>, tensor<4x9x9x2xf32>) -> tensor<4x1x9x9xf32>
  // CHECK: tc.op "grid_sample"(%{{.*}}, %{{.*}}) {mode = "nearest", padding_mode = "border"}
  %n = tc.op "grid_sample"(%corr, %grid) {mode = "nearest", padding_mode = "border"} : (tensor<4x1x8x8xf32>, tensor<4x9x9x2xf32>) -> tensor<4x1x9x9xf32>
  return %s : tensor<4x1x9x9xf32>
}

// A data-parallel batch norm's per-channel sums, added over the ranks.
// CHECK-LABEL: func.func @rank_sums(
func.func @rank_sums(%sums: tensor<1x4x1xf32>) -> tensor<1x4x1xf32> {
  // CHECK: %[[ALL:.*]] = tc.op "all_reduce_sum"(%{{.*}}) : (tensor<1x4x1xf32>) -> tensor<1x4x1xf32>
  %all = tc.op "all_reduce_sum"(%sums) : (tensor<1x4x1xf32>) -> tensor<1x4x1xf32>
  // CHECK: return %[[ALL]]
  return %all : tensor<1x4x1xf32>
}
