// RUN: shardc-opt %s | FileCheck %s
// RUN: shardc-opt %s | shardc-opt | FileCheck %s
// Round trip of the model (forward) ops.

// CHECK-LABEL: func.func @forward(
func.func @forward(%ids: tensor<2x8xi64>, %wte: tensor<101x32xf32>, %w: tensor<96x32xf32>,
                   %b: tensor<96xf32>, %g: tensor<32xf32>, %targets: tensor<16xi64>,
                   %h: tensor<2x8x32xbf16>, %pad: tensor<2x1x1x8xf32>,
                   %kv1: tensor<2x1x8x16xf32>) -> tensor<f32> {
  // CHECK: %[[E:.*]] = tc.embedding %{{.*}}, %{{.*}} : tensor<101x32xf32>, tensor<2x8xi64> -> tensor<2x8x32xf32>
  %e = tc.embedding %wte, %ids : tensor<101x32xf32>, tensor<2x8xi64> -> tensor<2x8x32xf32>
  // CHECK: tc.layer_norm %[[E]], %{{.*}}, %{{.*}} eps 1.000000e-05 : tensor<2x8x32xf32>, tensor<32xf32>, tensor<32xf32> -> tensor<2x8x32xf32>
  %n = tc.layer_norm %e, %g, %g eps 1.0e-5 : tensor<2x8x32xf32>, tensor<32xf32>, tensor<32xf32> -> tensor<2x8x32xf32>
  // CHECK: tc.rms_norm %{{.*}}, %{{.*}} eps 9.9999999999999995E-7 : tensor<2x8x32xf32>, tensor<32xf32> -> tensor<2x8x32xf32>
  %r = tc.rms_norm %n, %g eps 1.0e-6 : tensor<2x8x32xf32>, tensor<32xf32> -> tensor<2x8x32xf32>
  // CHECK: tc.linear %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x8x32xf32>, tensor<96x32xf32>, tensor<96xf32> -> tensor<2x8x96xf32>
  %qkv = tc.linear %r, %w, %b : tensor<2x8x32xf32>, tensor<96x32xf32>, tensor<96xf32> -> tensor<2x8x96xf32>
  // CHECK: tc.linear %{{.*}}, %{{.*}} : tensor<2x8x32xf32>, tensor<101x32xf32> -> tensor<2x8x101xf32>
  %logits = tc.linear %r, %wte : tensor<2x8x32xf32>, tensor<101x32xf32> -> tensor<2x8x101xf32>
  %q0 = tc.slice %qkv dim 2 start 0 end 32 step 1 : tensor<2x8x96xf32> -> tensor<2x8x32xf32>
  %q1 = tc.reshape %q0 : tensor<2x8x32xf32> -> tensor<2x8x2x16xf32>
  %q = tc.transpose %q1, 1, 2 : tensor<2x8x2x16xf32> -> tensor<2x2x8x16xf32>
  // CHECK: %[[ROPE:.*]] = tc.rope %{{.*}} theta 1.000000e+04 : tensor<2x2x8x16xf32>
  %qr = tc.rope %q theta 10000.0 : tensor<2x2x8x16xf32>
  // CHECK: tc.sdpa %[[ROPE]], %[[ROPE]], %[[ROPE]] causal scale 2.500000e-01 : tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32> -> tensor<2x2x8x16xf32>
  %att = tc.sdpa %qr, %qr, %qr causal scale 0.25 : tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32> -> tensor<2x2x8x16xf32>
  // CHECK: tc.sdpa %{{.*}}, %{{.*}}, %{{.*}} scale 1.000000e+00 :
  %att2 = tc.sdpa %qr, %qr, %qr scale 1.0 : tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32> -> tensor<2x2x8x16xf32>
  // A padding mask [B, 1, 1, S], broadcast over heads and queries.
  // CHECK: tc.sdpa %[[ROPE]], %[[ROPE]], %[[ROPE]] mask %{{.*}} causal scale 2.500000e-01 : tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x1x1x8xf32> -> tensor<2x2x8x16xf32>
  %att3 = tc.sdpa %qr, %qr, %qr mask %pad causal scale 0.25 : tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x1x1x8xf32> -> tensor<2x2x8x16xf32>
  // Grouped-query attention: both query heads read the one key / value head.
  // CHECK: tc.sdpa %[[ROPE]], %[[KV1:.*]], %[[KV1]] causal scale 2.500000e-01 : tensor<2x2x8x16xf32>, tensor<2x1x8x16xf32>, tensor<2x1x8x16xf32> -> tensor<2x2x8x16xf32>
  %att4 = tc.sdpa %qr, %kv1, %kv1 causal scale 0.25 : tensor<2x2x8x16xf32>, tensor<2x1x8x16xf32>, tensor<2x1x8x16xf32> -> tensor<2x2x8x16xf32>
  // CHECK: tc.matmul %{{.*}}, %{{.*}} : tensor<2x2x8x16xf32>, tensor<2x2x16x8xf32> -> tensor<2x2x8x8xf32>
  %kt = tc.permute %att [0, 1, 3, 2] : tensor<2x2x8x16xf32> -> tensor<2x2x16x8xf32>
  %s = tc.matmul %att2, %kt : tensor<2x2x8x16xf32>, tensor<2x2x16x8xf32> -> tensor<2x2x8x8xf32>
  // CHECK: tc.softmax %{{.*}} dim 3 : tensor<2x2x8x8xf32>
  %p = tc.softmax %s dim 3 : tensor<2x2x8x8xf32>
  // CHECK: tc.gelu %{{.*}} approximate "tanh" : tensor<2x8x96xf32>
  %ge = tc.gelu %qkv approximate "tanh" : tensor<2x8x96xf32>
  // CHECK: tc.silu %{{.*}} : tensor<2x8x96xf32>
  %si = tc.silu %ge : tensor<2x8x96xf32>
  // CHECK: tc.relu %{{.*}} : tensor<2x8x96xf32>
  %re = tc.relu %si : tensor<2x8x96xf32>
  // CHECK: tc.sub %{{.*}}, %{{.*}} : tensor<2x8x96xf32>, tensor<96xf32> -> tensor<2x8x96xf32>
  // CHECK: tc.mul %{{.*}}, %{{.*}} : tensor<2x8x96xf32>, tensor<2x8x96xf32> -> tensor<2x8x96xf32>
  // CHECK: tc.div %{{.*}}, %{{.*}} : tensor<2x8x96xf32>, tensor<96xf32> -> tensor<2x8x96xf32>
  %su = tc.sub %re, %b : tensor<2x8x96xf32>, tensor<96xf32> -> tensor<2x8x96xf32>
  %mu = tc.mul %su, %re : tensor<2x8x96xf32>, tensor<2x8x96xf32> -> tensor<2x8x96xf32>
  %di = tc.div %mu, %b : tensor<2x8x96xf32>, tensor<96xf32> -> tensor<2x8x96xf32>
  // CHECK: tc.cat %{{.*}}, %{{.*}} dim 2 : tensor<2x8x96xf32>, tensor<2x8x32xf32> -> tensor<2x8x128xf32>
  %c = tc.cat %di, %r dim 2 : tensor<2x8x96xf32>, tensor<2x8x32xf32> -> tensor<2x8x128xf32>
  %flat = tc.reshape %logits : tensor<2x8x101xf32> -> tensor<16x101xf32>
  // CHECK: tc.cross_entropy %{{.*}}, %{{.*}} : tensor<16x101xf32>, tensor<16xi64> -> tensor<f32>
  %loss = tc.cross_entropy %flat, %targets : tensor<16x101xf32>, tensor<16xi64> -> tensor<f32>
  // torch's ignore_index is printed only when it is not -100.
  // CHECK: tc.cross_entropy %{{.*}}, %{{.*}} {ignore_index = -1 : i64} : tensor<16x101xf32>
  %padded = tc.cross_entropy %flat, %targets {ignore_index = -1 : i64} : tensor<16x101xf32>, tensor<16xi64> -> tensor<f32>
  // CHECK-NOT: ignore_index = -100
  %default = tc.cross_entropy %flat, %targets {ignore_index = -100 : i64} : tensor<16x101xf32>, tensor<16xi64> -> tensor<f32>
  // CHECK: tc.gelu %{{.*}} approximate "none" : tensor<2x8x32xbf16>
  %hb = tc.gelu %h approximate "none" : tensor<2x8x32xbf16>
  return %loss : tensor<f32>
}
