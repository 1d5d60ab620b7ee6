// RUN: shardc-opt %s -split-input-file -tc-expand-init -verify-diagnostics -o /dev/null

func.func @init() {
  // expected-error @+1 {{has a zero fan for 'tensor<0x4xf32>': the bounds would divide by zero}}
  %0 = tc.kaiming_uniform a 0.0 mode "fan_out" nonlinearity "relu" position 0 : tensor<0x4xf32>
  return
}
