// RUN: shardc-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{device "gpu:0" does not parse: expected cpu, meta, cuda, cpu:N or cuda:N}}
tc.param @p : tensor<4xf32> device "gpu:0"
func.func @init() {
  %0 = tc.ones : tensor<4xf32>
  tc.materialize %0 into @p : tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{device "cuda:x" does not parse}}
tc.param @p : tensor<4xf32> device "cuda:x"
func.func @init() {
  %0 = tc.ones : tensor<4xf32>
  tc.materialize %0 into @p : tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{device "meta:0" does not parse}}
tc.param @p : tensor<4xf32> device "meta:0"
func.func @init() {
  %0 = tc.ones : tensor<4xf32>
  tc.materialize %0 into @p : tensor<4xf32>
  return
}

// -----

tc.param @p : tensor<4x4xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<4x3xf32>
  // expected-error @+1 {{value type 'tensor<4x3xf32>' differs from the type of parameter @p ('tensor<4x4xf32>')}}
  tc.materialize %0 into @p : tensor<4x3xf32>
  return
}

// -----

tc.param @p : tensor<4x4xf32> device "cpu" sharded <world_size = 2, chunk_rows = 2>
func.func @init() {
  %0 = tc.ones : tensor<4x4xf32>
  // expected-error @+1 {{value type 'tensor<4x4xf32>' differs from the local shard type of parameter @p ('tensor<2x4xf32>')}}
  tc.materialize %0 into @p : tensor<4x4xf32>
  return
}

// -----

tc.param @p : tensor<4xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<4xf32>
  tc.materialize %0 into @p : tensor<4xf32>
  // expected-error @+1 {{references undefined parameter @q}}
  tc.materialize %0 into @q : tensor<4xf32>
  return
}

// -----

tc.param @p : tensor<4xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<4xf32>
  tc.materialize %0 into @p : tensor<4xf32>
  return
}
func.func @forward() -> tensor<4xf32> {
  // expected-error @+1 {{references undefined parameter @q}}
  %0 = tc.use @q : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

tc.param @p : tensor<4xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<4xf32>
  tc.materialize %0 into @p : tensor<4xf32>
  return
}
func.func @forward() -> tensor<2xf32> {
  // expected-error @+1 {{result type 'tensor<2xf32>' is neither the type of parameter @p ('tensor<4xf32>') nor its shape in another float type}}
  %0 = tc.use @p : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// A tc.materialize in generic form without its symbol: its own verifier
// reports it (the program-wide check used to read it from tc.param's
// verifier before it was verified, and crashed).
tc.param @p : tensor<4xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<4xf32>
  // expected-error @+1 {{requires attribute 'param'}}
  "tc.materialize"(%0) : (tensor<4xf32>) -> ()
  return
}

// -----

tc.param @p : tensor<4xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<4xf32>
  tc.materialize %0 into @p : tensor<4xf32>
  return
}
func.func @forward() {
  %0 = tc.ones : tensor<4xf32>
  // expected-error @+1 {{must be inside func @init}}
  tc.materialize %0 into @p : tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{chunk_rows 3 is not ceil(4 / 2) = 2}}
tc.param @p : tensor<4xf32> device "cpu" sharded <world_size = 2, chunk_rows = 3>

// -----

// expected-error @+1 {{a 0-d parameter is replicated, not sharded}}
tc.param @p : tensor<f32> device "cpu" sharded <world_size = 2, chunk_rows = 1>

// -----

// expected-error @+1 {{world_size must be at least 1, got 0}}
tc.param @p : tensor<4xf32> device "cpu" sharded <world_size = 0, chunk_rows = 1>

// -----

// expected-error @+1 {{parameter type 'tensor<?xf32>' must have a static shape}}
tc.param @p : tensor<?xf32> device "cpu"

// -----

tc.param @p : tensor<4x4xf32> device "cpu" sharded <world_size = 2, chunk_rows = 2>
func.func @init() {
  %0 = tc.ones : tensor<2x4xf32> shard of tensor<4x4xf32>
  tc.materialize %0 into @p : tensor<2x4xf32>
  return
}
func.func @forward() -> tensor<4x4xf32> {
  // expected-error @+1 {{parameter @p is sharded over 2 ranks; read it with tc.all_gather}}
  %0 = tc.use @p : tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

tc.param @p : tensor<4xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<4xf32>
  tc.materialize %0 into @p : tensor<4xf32>
  return
}
func.func @forward() -> tensor<4xf32> {
  // expected-error @+1 {{parameter @p is not sharded; read it with tc.use}}
  %0 = tc.all_gather [@p] : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

tc.param @p : tensor<4x4xf32> device "cpu" sharded <world_size = 2, chunk_rows = 2>
func.func @init() {
  %0 = tc.ones : tensor<2x4xf32> shard of tensor<4x4xf32>
  tc.materialize %0 into @p : tensor<2x4xf32>
  return
}
func.func @forward() -> tensor<2x4xf32> {
  // expected-error @+1 {{result type 'tensor<2x4xf32>' is neither the type of parameter @p ('tensor<4x4xf32>') nor its shape in another float type}}
  %0 = tc.all_gather [@p] : tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// A read in another dtype (master weights, tc-fold-param-casts) converts
// floats only.
tc.param @p : tensor<4xf32> device "cpu"
func.func @init() {
  %0 = tc.ones : tensor<4xf32>
  tc.materialize %0 into @p : tensor<4xf32>
  return
}
func.func @forward() -> tensor<4xi64> {
  // expected-error @+1 {{result type 'tensor<4xi64>' is neither the type of parameter @p ('tensor<4xf32>') nor its shape in another float type}}
  %0 = tc.use @p : tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

// One gathered buffer holds one dtype: a unit read in two is two gathers.
tc.param @p : tensor<4x4xf32> device "cpu" sharded <world_size = 2, chunk_rows = 2>
tc.param @q : tensor<4xf32> device "cpu" sharded <world_size = 2, chunk_rows = 2>
func.func @init() {
  %0 = tc.ones : tensor<2x4xf32> shard of tensor<4x4xf32>
  tc.materialize %0 into @p : tensor<2x4xf32>
  %1 = tc.ones : tensor<2xf32> shard of tensor<4xf32>
  tc.materialize %1 into @q : tensor<2xf32>
  return
}
func.func @forward() -> tensor<4x4xbf16> {
  // expected-error @+1 {{results must share one element type, got 'tensor<4x4xbf16>' and 'tensor<4xf32>'}}
  %0:2 = tc.all_gather [@p, @q] : tensor<4x4xbf16>, tensor<4xf32>
  return %0#0 : tensor<4x4xbf16>
}

// -----

func.func @forward(%x: tensor<4xf32>) {
  // expected-error @+1 {{can only release the results of tc.all_gather}}
  tc.release %x : tensor<4xf32>
  return
}

// -----

func.func @init() {
  // expected-error @+1 {{result type 'tensor<3x4xf32>' is not a dim-0 shard of 'tensor<4x5xf32>'}}
  %0 = tc.ones : tensor<3x4xf32> shard of tensor<4x5xf32>
  return
}

// -----

func.func @init() {
  // expected-error @+1 {{result type 'tensor<5x4xf32>' is not a dim-0 shard of 'tensor<4x4xf32>'}}
  %0 = tc.zeros : tensor<5x4xf32> shard of tensor<4x4xf32>
  return
}

// -----

func.func @init() {
  // expected-error @+1 {{result type 'tensor<2x4xf16>' is not a dim-0 shard of 'tensor<4x4xf32>'}}
  %0 = tc.fill 1.0 : tensor<2x4xf16> shard of tensor<4x4xf32>
  return
}

// -----

func.func @init() {
  // expected-error @+1 {{result type 'tensor<?x4xf32>' must have a static shape}}
  %0 = tc.fill 1.0 : tensor<?x4xf32>
  return
}

// -----

func.func @forward(%a: tensor<4x3xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{shapes 'tensor<4x3xf32>' and 'tensor<2xf32>' do not broadcast}}
  %0 = tc.add %a, %b : tensor<4x3xf32>, tensor<2xf32> -> tensor<4x3xf32>
  return
}

// -----

func.func @forward(%a: tensor<4x1xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{result type 'tensor<4x1xf32>' is not the broadcast shape of 'tensor<4x1xf32>' and 'tensor<3xf32>'}}
  %0 = tc.add %a, %b : tensor<4x1xf32>, tensor<3xf32> -> tensor<4x1xf32>
  return
}

// -----

func.func @forward(%a: tensor<4xf32>, %b: tensor<4xf64>) {
  // expected-error @+1 {{element types differ}}
  %0 = tc.add %a, %b : tensor<4xf32>, tensor<4xf64> -> tensor<4xf32>
  return
}

// -----

tc.param @p : tensor<4x4xf32> device "cpu" sharded <world_size = 2, chunk_rows = 2>
tc.param @q : tensor<4x4xf32> device "cpu" sharded <world_size = 2, chunk_rows = 2>
func.func @init() {
  %0 = tc.ones : tensor<2x4xf32> shard of tensor<4x4xf32>
  tc.materialize %0 into @p : tensor<2x4xf32>
  %1 = tc.ones : tensor<2x4xf32> shard of tensor<4x4xf32>
  tc.materialize %1 into @q : tensor<2x4xf32>
  return
}
func.func @forward() {
  %0:2 = tc.all_gather [@p, @q] : tensor<4x4xf32>, tensor<4x4xf32>
  // expected-error @+1 {{must release all 2 results of its tc.all_gather, in order}}
  tc.release %0#0 : tensor<4x4xf32>
  return
}

// -----

func.func @forward() {
  // expected-error @+1 {{gathers 2 parameters into 1 results}}
  %0 = tc.all_gather [@p, @q] : tensor<4x4xf32>
  return
}

// -----

func.func @forward() {
  // expected-error @+1 {{gathers @p twice}}
  %0:2 = tc.all_gather [@p, @p] : tensor<4x4xf32>, tensor<4x4xf32>
  return
}

// -----

// expected-error @+1 {{non_persistent applies to buffers and to optimizer state (@optim.*) only; a parameter is always part of the model's state}}
tc.param @p : tensor<4xf32> device "cpu" non_persistent
func.func @init() {
  %0 = tc.ones : tensor<4xf32>
  tc.materialize %0 into @p : tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{tied names apply to parameters, not buffers}}
tc.param @p : tensor<4xf32> device "cpu" buffer tied ["q"]
func.func @init() {
  %0 = tc.ones : tensor<4xf32>
  tc.materialize %0 into @p : tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{tied name "p" must be non-empty and not the parameter's own name}}
tc.param @p : tensor<4xf32> device "cpu" tied ["p"]
func.func @init() {
  %0 = tc.ones : tensor<4xf32>
  tc.materialize %0 into @p : tensor<4xf32>
  return
}
