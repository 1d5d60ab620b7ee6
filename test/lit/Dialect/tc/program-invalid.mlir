// RUN: shardc-opt %s -split-input-file -tc-verify-program -verify-diagnostics
// RUN: shardc-opt %s -split-input-file -tc-fsdp=world-size=2 -verify-diagnostics

// The module-wide rules (every tc.param materialized exactly once, in func
// @init) are a verification pass's (-tc-verify-program), which every tc pass
// also runs first: an op verifier must not read ops that are not verified yet.

tc.param @p : tensor<4xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<4xf32>
  // expected-note @+1 {{first materialized here}}
  tc.materialize %0 into @p : tensor<4xf32>
  // expected-error @+1 {{materializes parameter @p a second time}}
  tc.materialize %0 into @p : tensor<4xf32>
  return
}

// -----

tc.param @p : tensor<4xf32> device "cpu"
// expected-error @+1 {{parameter @q is never materialized in func @init}}
tc.param @q : tensor<4xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<4xf32>
  tc.materialize %0 into @p : tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{parameter @p is never materialized: the module has no func @init}}
tc.param @p : tensor<4xf32> device "cpu"
