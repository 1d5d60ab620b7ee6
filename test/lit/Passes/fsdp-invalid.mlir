// RUN: shardc-opt %s -split-input-file -tc-fsdp=world-size=2 -verify-diagnostics
// RUN: not shardc-opt %s -split-input-file -tc-fsdp=world-size=0 2>&1 | FileCheck %s --check-prefix=ZERO

// ZERO: tc-fsdp: world-size must be at least 1, got 0

tc.param @p : tensor<4xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<4xf32>
  tc.materialize %0 into @p : tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{is already sharded; tc-fsdp runs once}}
tc.param @p : tensor<4xf32> device "cpu" sharded <world_size = 2, chunk_rows = 2>
func.func @init() {
  %0 = tc.ones : tensor<2xf32> shard of tensor<4xf32>
  tc.materialize %0 into @p : tensor<2xf32>
  return
}

// -----

tc.param @p : tensor<4xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<4xf32>
  %1 = tc.add %0, %0 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  // expected-error @+1 {{init chain of parameter @p reaches tc.add; an init chain is a generator followed by views and pointwise ops}}
  tc.materialize %1 into @p : tensor<4xf32>
  return
}

// -----

tc.param @p : tensor<8x4xf32> device "cpu"
func.func @init() {
  %0 = tc.orthogonal gain 1.0 position 0 : tensor<4x8xf32>
  %1 = tc.transpose %0, 0, 1 : tensor<4x8xf32> -> tensor<8x4xf32>
  // expected-error @+1 {{init chain of parameter @p applies views to a non-shardable tc.orthogonal; only pointwise ops may follow it}}
  tc.materialize %1 into @p : tensor<8x4xf32>
  return
}

// -----

tc.param @p : tensor<8x4xf32> device "cpu"
func.func @init() {
  // expected-error @+1 {{must be expanded by tc-expand-init before tc-fsdp}}
  %0 = tc.xavier_uniform gain 1.0 position 0 : tensor<8x4xf32>
  tc.materialize %0 into @p : tensor<8x4xf32>
  return
}
