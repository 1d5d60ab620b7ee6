// RUN: shardc-opt %s -split-input-file -tc-recompute-activations | FileCheck %s
// RUN: shardc-opt %s -split-input-file -tc-recompute-activations -tc-fsdp=world-size=2 | FileCheck %s --check-prefix=N2
// RUN: shardc-opt %s -split-input-file -tc-fsdp=world-size=2 | FileCheck %s --check-prefix=KEEP

// A joint graph of two blocks (units b0 and b1: linear, relu, linear, and a
// residual add outside the unit's reads) and a head in the root unit, then
// each block's backward in reverse order, written by hand: the weight
// gradient of fc2 reads relu's output, the relu's gradient reads the
// pre-activation. Each backward reads clones of the values its forward
// computed, made right before the first read (b1's after the head, b0's
// after b1's backward), from the block's input (%x, the residual %r0)
// and the same parameter reads; the originals die in the forward.

// CHECK-LABEL: func.func @forward(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x4xf32>
// CHECK:         %[[W0:.*]] = tc.use @b0.fc1
// CHECK-NEXT:    %[[H0:.*]] = tc.linear %[[X]], %[[W0]]
// CHECK-NEXT:    %[[A0:.*]] = tc.relu %[[H0]]
// CHECK-NEXT:    %[[V0:.*]] = tc.use @b0.fc2
// CHECK-NEXT:    %[[Y0:.*]] = tc.linear %[[A0]], %[[V0]]
// CHECK-NEXT:    %[[R0:.*]] = tc.add %[[X]], %[[Y0]]
// CHECK-NEXT:    %[[W1:.*]] = tc.use @b1.fc1
// CHECK-NEXT:    %[[H1:.*]] = tc.linear %[[R0]], %[[W1]]
// CHECK:         %[[HW:.*]] = tc.use @head
// CHECK-NEXT:    %[[G:.*]] = tc.linear %{{.*}}, %[[HW]]
// CHECK-NEXT:    %[[GT1:.*]] = tc.transpose %[[G]], 0, 1
// CHECK-NEXT:    %[[H1C:.*]] = tc.linear %[[R0]], %[[W1]]
// CHECK-NEXT:    %[[A1C:.*]] = tc.relu %[[H1C]]
// CHECK-NEXT:    tc.matmul %[[GT1]], %[[A1C]]
// CHECK-NEXT:    %[[DA1:.*]] = tc.matmul %[[G]], %{{.*}}
// CHECK-NEXT:    tc.mul %[[DA1]], %[[H1C]]
// CHECK:         %[[GT0:.*]] = tc.transpose
// CHECK-NEXT:    %[[H0C:.*]] = tc.linear %[[X]], %[[W0]]
// CHECK-NEXT:    %[[A0C:.*]] = tc.relu %[[H0C]]
// CHECK-NEXT:    %[[DV0:.*]] = tc.matmul %[[GT0]], %[[A0C]]
// CHECK-NEXT:    %[[DA0:.*]] = tc.matmul %{{.*}}, %[[V0]]
// CHECK-NEXT:    tc.mul %[[DA0]], %[[H0C]]
// CHECK-NOT:     %[[H0]]
// CHECK:         return %[[DV0]]

// At N = 2 each backward is one gather of its whole unit: the clones read
// fc1, the backward fc2, both in the same run.
// N2-LABEL: func.func @forward(
// N2:         tc.all_gather [@b0.fc1, @b0.fc2] unit "b0"
// N2:         tc.all_gather [@b1.fc1, @b1.fc2] unit "b1"
// N2:         tc.all_gather [@head] unit "root"
// N2:         tc.all_gather [@b1.fc1, @b1.fc2] unit "b1"
// N2:         %[[B0:.*]]:2 = tc.all_gather [@b0.fc1, @b0.fc2] unit "b0"
// N2-NEXT:    %[[H0C:.*]] = tc.linear %{{.*}}, %[[B0]]#0
// N2-NEXT:    %[[A0C:.*]] = tc.relu %[[H0C]]
// N2-NEXT:    tc.matmul %{{.*}}, %[[A0C]]
// N2-NEXT:    tc.matmul %{{.*}}, %[[B0]]#1
// N2-NEXT:    tc.release %[[B0]]#0, %[[B0]]#1

// Without the pass b0's backward reads only fc2: the forward's values
// live across b1, the head and b1's backward instead.
// KEEP-LABEL: func.func @forward(
// KEEP:         tc.all_gather [@b1.fc2, @b1.fc1] unit "b1"
// KEEP:         %[[B0:.*]] = tc.all_gather [@b0.fc2] unit "b0"
// KEEP-NEXT:    tc.matmul %{{.*}}, %[[B0]]
// KEEP-NEXT:    tc.release %[[B0]]
tc.param @b0.fc1 : tensor<4x4xf32> device "cpu" unit "b0"
tc.param @b0.fc2 : tensor<4x4xf32> device "cpu" unit "b0"
tc.param @b1.fc1 : tensor<4x4xf32> device "cpu" unit "b1"
tc.param @b1.fc2 : tensor<4x4xf32> device "cpu" unit "b1"
tc.param @head : tensor<4x4xf32> device "cpu" unit "root"
func.func @init() {
  %0 = tc.ones : tensor<4x4xf32>
  tc.materialize %0 into @b0.fc1 : tensor<4x4xf32>
  %1 = tc.ones : tensor<4x4xf32>
  tc.materialize %1 into @b0.fc2 : tensor<4x4xf32>
  %2 = tc.ones : tensor<4x4xf32>
  tc.materialize %2 into @b1.fc1 : tensor<4x4xf32>
  %3 = tc.ones : tensor<4x4xf32>
  tc.materialize %3 into @b1.fc2 : tensor<4x4xf32>
  %4 = tc.ones : tensor<4x4xf32>
  tc.materialize %4 into @head : tensor<4x4xf32>
  return
}
func.func @forward(%x: tensor<2x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %w0 = tc.use @b0.fc1 : tensor<4x4xf32>
  %h0 = tc.linear %x, %w0 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %a0 = tc.relu %h0 : tensor<2x4xf32>
  %v0 = tc.use @b0.fc2 : tensor<4x4xf32>
  %y0 = tc.linear %a0, %v0 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %r0 = tc.add %x, %y0 : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %w1 = tc.use @b1.fc1 : tensor<4x4xf32>
  %h1 = tc.linear %r0, %w1 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %a1 = tc.relu %h1 : tensor<2x4xf32>
  %v1 = tc.use @b1.fc2 : tensor<4x4xf32>
  %y1 = tc.linear %a1, %v1 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %r1 = tc.add %r0, %y1 : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %hw = tc.use @head : tensor<4x4xf32>
  %g = tc.linear %r1, %hw : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %gt1 = tc.transpose %g, 0, 1 : tensor<2x4xf32> -> tensor<4x2xf32>
  %dv1 = tc.matmul %gt1, %a1 : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
  %da1 = tc.matmul %g, %v1 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %dh1 = tc.mul %da1, %h1 : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %dr0 = tc.matmul %dh1, %w1 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %gt0 = tc.transpose %dr0, 0, 1 : tensor<2x4xf32> -> tensor<4x2xf32>
  %dv0 = tc.matmul %gt0, %a0 : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
  %da0 = tc.matmul %dr0, %v0 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %dh0 = tc.mul %da0, %h0 : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %ht0 = tc.transpose %dh0, 0, 1 : tensor<2x4xf32> -> tensor<4x2xf32>
  %dw0 = tc.matmul %ht0, %x : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
  return %dv0, %dw0 : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----
// A value read after its run by something other than its unit's later run
// stays alive anyway and is not recomputed: %a0 is also a result of the
// function, and %h0 feeds b1's forward (a skip connection). b0's
// backward reads the originals; nothing is cloned.

// CHECK-LABEL: func.func @forward(
// CHECK-COUNT-1: tc.linear %arg0
// CHECK-COUNT-1: tc.relu
// CHECK-NOT:     tc.relu
// CHECK:         return
tc.param @b0.fc1 : tensor<4x4xf32> device "cpu" unit "b0"
tc.param @b0.fc2 : tensor<4x4xf32> device "cpu" unit "b0"
tc.param @b1.fc1 : tensor<4x4xf32> device "cpu" unit "b1"
func.func @init() {
  %0 = tc.ones : tensor<4x4xf32>
  tc.materialize %0 into @b0.fc1 : tensor<4x4xf32>
  %1 = tc.ones : tensor<4x4xf32>
  tc.materialize %1 into @b0.fc2 : tensor<4x4xf32>
  %2 = tc.ones : tensor<4x4xf32>
  tc.materialize %2 into @b1.fc1 : tensor<4x4xf32>
  return
}
func.func @forward(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %w0 = tc.use @b0.fc1 : tensor<4x4xf32>
  %h0 = tc.linear %x, %w0 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %a0 = tc.relu %h0 : tensor<2x4xf32>
  %v0 = tc.use @b0.fc2 : tensor<4x4xf32>
  %y0 = tc.linear %a0, %v0 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %w1 = tc.use @b1.fc1 : tensor<4x4xf32>
  %h1 = tc.linear %y0, %w1 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %s1 = tc.add %h1, %h0 : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %da0 = tc.matmul %s1, %v0 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %dh0 = tc.mul %da0, %h0 : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %dx = tc.mul %dh0, %a0 : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  return %dx, %a0 : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----
// A forward alone reads each unit once: nothing to recompute.

// CHECK-LABEL: func.func @forward(
// CHECK-NEXT:    tc.use @b0.fc1
// CHECK-NEXT:    tc.linear
// CHECK-NEXT:    tc.use @b1.fc1
// CHECK-NEXT:    tc.linear
// CHECK-NEXT:    return
tc.param @b0.fc1 : tensor<4x4xf32> device "cpu" unit "b0"
tc.param @b1.fc1 : tensor<4x4xf32> device "cpu" unit "b1"
func.func @init() {
  %0 = tc.ones : tensor<4x4xf32>
  tc.materialize %0 into @b0.fc1 : tensor<4x4xf32>
  %1 = tc.ones : tensor<4x4xf32>
  tc.materialize %1 into @b1.fc1 : tensor<4x4xf32>
  return
}
func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w0 = tc.use @b0.fc1 : tensor<4x4xf32>
  %h0 = tc.linear %x, %w0 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %w1 = tc.use @b1.fc1 : tensor<4x4xf32>
  %h1 = tc.linear %h0, %w1 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  return %h1 : tensor<2x4xf32>
}

// -----
// Two micro-steps of gradient accumulation, each embedding its input with
// the root's @head, then b0 (fc1, relu, fc2), the head, and b0's backward
// (fc1's weight gradient reads the block's input %e). Each backward
// recomputes its own micro-step's activations from that input. Micro-step
// 2's backward (b0's fourth run) adds micro-step 1's weight gradients to
// its own; those are not recomputed there: that would read micro-step 1's
// incoming gradient %g1 and activations again, keeping them alive across
// micro-step 2's forward.

// CHECK-LABEL: func.func @forward(
// CHECK:         %[[E1:.*]] = tc.linear %arg0
// CHECK:         %[[G1:.*]] = tc.linear %{{.*}}, %[[HW:.*]] :
// CHECK:         %[[H1C:.*]] = tc.linear %[[E1]]
// CHECK-NEXT:    %[[A1C:.*]] = tc.relu %[[H1C]]
// CHECK:         %[[DV1:.*]] = tc.matmul %{{.*}}, %[[A1C]]
// CHECK:         %[[DW1:.*]] = tc.matmul %{{.*}}, %[[E1]]
// CHECK:         %[[E2:.*]] = tc.linear %arg1
// CHECK:         %[[G2:.*]] = tc.linear %{{.*}}, %[[HW]] :
// CHECK:         %[[H2C:.*]] = tc.linear %[[E2]]
// CHECK-NEXT:    %[[A2C:.*]] = tc.relu %[[H2C]]
// CHECK:         %[[DV2:.*]] = tc.matmul %{{.*}}, %[[A2C]]
// CHECK-NEXT:    %[[SUMV:.*]] = tc.add %[[DV1]], %[[DV2]]
// CHECK:         %[[DW2:.*]] = tc.matmul %{{.*}}, %[[E2]]
// CHECK-NEXT:    %[[SUMW:.*]] = tc.add %[[DW1]], %[[DW2]]
// CHECK-NOT:     tc.relu
// CHECK:         return %[[SUMV]], %[[SUMW]]
tc.param @b0.fc1 : tensor<4x4xf32> device "cpu" unit "b0"
tc.param @b0.fc2 : tensor<4x4xf32> device "cpu" unit "b0"
tc.param @head : tensor<4x4xf32> device "cpu" unit "root"
func.func @init() {
  %0 = tc.ones : tensor<4x4xf32>
  tc.materialize %0 into @b0.fc1 : tensor<4x4xf32>
  %1 = tc.ones : tensor<4x4xf32>
  tc.materialize %1 into @b0.fc2 : tensor<4x4xf32>
  %2 = tc.ones : tensor<4x4xf32>
  tc.materialize %2 into @head : tensor<4x4xf32>
  return
}
func.func @forward(%x1: tensor<2x4xf32>, %x2: tensor<2x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %hw = tc.use @head : tensor<4x4xf32>
  %w0 = tc.use @b0.fc1 : tensor<4x4xf32>
  %v0 = tc.use @b0.fc2 : tensor<4x4xf32>
  %e1 = tc.linear %x1, %hw : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %h1 = tc.linear %e1, %w0 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %a1 = tc.relu %h1 : tensor<2x4xf32>
  %y1 = tc.linear %a1, %v0 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %g1 = tc.linear %y1, %hw : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %da1 = tc.matmul %g1, %v0 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %gt1 = tc.transpose %g1, 0, 1 : tensor<2x4xf32> -> tensor<4x2xf32>
  %dv1 = tc.matmul %gt1, %a1 : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
  %dh1 = tc.mul %da1, %h1 : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %dht1 = tc.transpose %dh1, 0, 1 : tensor<2x4xf32> -> tensor<4x2xf32>
  %dw1 = tc.matmul %dht1, %e1 : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
  %dx1 = tc.matmul %dh1, %w0 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %e2 = tc.linear %x2, %hw : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %h2 = tc.linear %e2, %w0 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %a2 = tc.relu %h2 : tensor<2x4xf32>
  %y2 = tc.linear %a2, %v0 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %g2 = tc.linear %y2, %hw : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %da2 = tc.matmul %g2, %v0 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %gt2 = tc.transpose %g2, 0, 1 : tensor<2x4xf32> -> tensor<4x2xf32>
  %dv2 = tc.matmul %gt2, %a2 : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
  %sumv = tc.add %dv1, %dv2 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %dh2 = tc.mul %da2, %h2 : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %dht2 = tc.transpose %dh2, 0, 1 : tensor<2x4xf32> -> tensor<4x2xf32>
  %dw2 = tc.matmul %dht2, %e2 : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
  %sumw = tc.add %dw1, %dw2 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  return %sumv, %sumw : tensor<4x4xf32>, tensor<4x4xf32>
}
