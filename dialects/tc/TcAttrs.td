//===- TcAttrs.td - tc dialect attributes ------------------*- tablegen -*-===//

#ifndef SHARDC_TC_ATTRS
#define SHARDC_TC_ATTRS

include "TcDialect.td"

def Tc_ShardAttr : Tc_Attr<"Shard", "shard"> {
  let summary = "FSDP dim-0 sharding of a parameter";
  let description = [{
    `#tc.shard<world_size = N, chunk_rows = C>`: the parameter is split on
    dim 0 over N ranks; every rank stores C = ceil(d0 / N) rows and rank r
    owns rows [r*C, min((r+1)*C, d0)). Rows past d0 are zero padding that no
    program can observe. The local (per-rank) type is the parameter's type
    with dim 0 replaced by C.
  }];
  let parameters = (ins "int64_t":$world_size, "int64_t":$chunk_rows);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The type each rank stores for a parameter of type `full`.
    ::mlir::RankedTensorType getLocalType(::mlir::RankedTensorType full) const;
    /// The sharding FSDP picks for `full` over `worldSize` ranks.
    static ShardAttr forWorldSize(::mlir::MLIRContext *context,
                                  ::mlir::RankedTensorType full,
                                  int64_t worldSize);
  }];
}

#endif // SHARDC_TC_ATTRS
