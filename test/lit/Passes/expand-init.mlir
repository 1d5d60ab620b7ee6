// RUN: shardc-opt %s -split-input-file -tc-expand-init | FileCheck %s
// Fans and gains follow torch.nn.init exactly; the expanded op keeps its
// chain position (so its values are the original op's).

// nn.Linear(in=1024, out=4096).weight: kaiming_uniform_(a=sqrt(5)):
// gain = sqrt(2 / (1 + 5)), bound = sqrt(3) * gain / sqrt(1024), which is
// 0.031249999999999997 in double, exactly as torch computes it.
// CHECK-LABEL: func.func @init()
// CHECK: tc.uniform low -0.03124999999999999{{[0-9]*}} high 0.03124999999999999{{[0-9]*}} position 2 : tensor<4096x1024xf32>
// nn.Conv2d(3, 64, 7).weight: fan_in = 3 * 7 * 7 = 147, bound = 1/sqrt(147).
// CHECK: tc.uniform low -0.08247860988423{{[0-9]*}} high 0.08247860988423{{[0-9]*}} position 0 : tensor<64x3x7x7xf32>
// kaiming_normal_(mode="fan_out", nonlinearity="relu") on [64, 3, 7, 7]:
// fan_out = 64 * 49 = 3136, std = sqrt(2) / sqrt(3136) = 0.025253813613805
// CHECK: tc.normal mean 0.000000e+00 std 0.02525381361380{{[0-9]*}} position 0 : tensor<64x3x7x7xf32>
// tanh gain 5/3 with fan_in = 16: std = (5/3) / 4 = 0.41666...
// CHECK: tc.normal mean 0.000000e+00 std 0.41666666666666{{[0-9]*}} position 0 : tensor<8x16xf32>
// xavier_uniform_(gain=1) on [30, 10]: bound = sqrt(6 / 40) = 0.3872983346207417
// CHECK: tc.uniform low -0.38729833462074{{[0-9]*}} high 0.38729833462074{{[0-9]*}} position 0 : tensor<30x10xf32>
// xavier_normal_(gain=2) on [30, 10]: std = 2 * sqrt(2 / 40) = 0.4472135954999579
// CHECK: tc.normal mean 0.000000e+00 std 0.44721359549995{{[0-9]*}} position 1 : tensor<30x10xf32>
// CHECK-NOT: kaiming
// CHECK-NOT: xavier
func.func @init() {
  %0 = tc.kaiming_uniform a 2.2360679774997898 mode "fan_in" nonlinearity "leaky_relu" position 2 : tensor<4096x1024xf32>
  %1 = tc.kaiming_uniform a 2.2360679774997898 mode "fan_in" nonlinearity "leaky_relu" position 0 : tensor<64x3x7x7xf32>
  %2 = tc.kaiming_normal a 0.0 mode "fan_out" nonlinearity "relu" position 0 : tensor<64x3x7x7xf32>
  %3 = tc.kaiming_normal a 0.0 mode "fan_in" nonlinearity "tanh" position 0 : tensor<8x16xf32>
  %4 = tc.xavier_uniform gain 1.0 position 0 : tensor<30x10xf32>
  %5 = tc.xavier_normal gain 2.0 position 1 : tensor<30x10xf32>
  return
}

