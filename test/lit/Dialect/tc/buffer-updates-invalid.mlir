// RUN: shardc-opt %s -split-input-file -verify-diagnostics

tc.param @w : tensor<4xf32> device "cpu"
func.func @forward(%v: tensor<4xf32>) {
  // expected-error @+1 {{@w is a parameter, not a buffer (the optimizer steps update parameters)}}
  tc.update_buffer @w, %v : tensor<4xf32>
  return
}

// -----

tc.param @stats : tensor<4xf32> device "cpu" buffer
func.func @forward(%v: tensor<2xf32>) {
  // expected-error @+1 {{value type 'tensor<2xf32>' differs from the type of buffer @stats ('tensor<4xf32>')}}
  tc.update_buffer @stats, %v : tensor<2xf32>
  return
}

// -----

tc.param @stats : tensor<4xf32> device "cpu" buffer
func.func @init() {
  %0 = tc.zeros : tensor<4xf32>
  // expected-error @+1 {{must be inside func @forward}}
  tc.update_buffer @stats, %0 : tensor<4xf32>
  return
}

// -----

func.func @forward(%v: tensor<4xf32>) {
  // expected-error @+1 {{references undefined parameter @missing}}
  tc.update_buffer @missing, %v : tensor<4xf32>
  return
}
