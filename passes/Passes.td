//===- Passes.td - tc dialect passes -----------------------*- tablegen -*-===//

#ifndef SHARDC_TC_PASSES
#define SHARDC_TC_PASSES

include "mlir/Pass/PassBase.td"

def TcFsdp : Pass<"tc-fsdp", "::mlir::ModuleOp"> {
  let summary = "Shard parameters on dim 0 over a world of ranks (FSDP)";
  let description = [{
    Gives every parameter of rank >= 1 a `#tc.shard` with
    chunk_rows = ceil(d0 / world-size); 0-d parameters, parameters with no
    rows and `buffer`s stay replicated.

    Init is rewritten so that each rank generates only its own shard: the
    generator feeding a parameter's `tc.materialize` produces the local type,
    `shard of` the full type. Nothing produces the full tensor.

    Forward is rewritten so that full parameters exist only while used: each
    `tc.use` of a parameter sharded over more than one rank becomes a
    `tc.all_gather`, followed by a `tc.release` after the gathered value's
    last use (unless the function returns it).
  }];
  let options = [
    Option<"worldSize", "world-size", "int64_t", /*default=*/"1",
           "Number of ranks to shard over (>= 1)">
  ];
  let dependentDialects = ["::mlir::tc::TcDialect"];
}

def TcExpandInit : Pass<"tc-expand-init", "::mlir::ModuleOp"> {
  let summary = "Expand the kaiming/xavier families into uniform and normal";
  let description = [{
    Computes fan_in and fan_out exactly as torch.nn.init does (fan_in =
    size(1) * prod(size[2:]), fan_out = size(0) * prod(size[2:])) and the
    gain of `calculate_gain`, then replaces

      kaiming_uniform -> uniform [-b, b) with b = gain * sqrt(3 / fan)
      kaiming_normal  -> normal mean 0 std gain / sqrt(fan)
      xavier_uniform  -> uniform [-b, b) with b = gain * sqrt(6 / (fan_in + fan_out))
      xavier_normal   -> normal mean 0 std gain * sqrt(2 / (fan_in + fan_out))

    keeping the op's chain position, so the values are those of the
    expanded op.
  }];
  let dependentDialects = ["::mlir::tc::TcDialect"];
}

#endif // SHARDC_TC_PASSES
