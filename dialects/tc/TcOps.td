//===- TcOps.td - tc dialect operations --------------------*- tablegen -*-===//

#ifndef SHARDC_TC_OPS
#define SHARDC_TC_OPS

include "TcDialect.td"
include "TcAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Parameter proxies
//===----------------------------------------------------------------------===//

def Tc_ParamOp : Tc_Op<"param", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "A symbolic parameter proxy: name, type, original device";
  let description = [{
    Declares a model parameter (or, with `buffer`, non-parameter state such
    as running statistics). It owns no storage. `device` is the device the
    user meant the parameter to live on; it is kept whatever device the
    runtime uses. `unit` names the FSDP unit the parameter belongs to.
    After `tc-fsdp`, `sharded` records how each rank stores it.

    ```mlir
    tc.param @h.0.fc.weight : tensor<4096x1024xf32> device "cuda:0" unit "h.0"
    tc.param @p1 : tensor<1024x1024xf32> device "cuda:0"
        sharded <world_size = 2, chunk_rows = 512>
    ```

    Every parameter is materialized exactly once, in `func.func @init`.
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    TypeAttrOf<AnyRankedTensor>:$type,
    StrAttr:$device,
    OptionalAttr<StrAttr>:$unit,
    UnitAttr:$is_buffer,
    OptionalAttr<Tc_ShardAttr>:$shard
  );
  let assemblyFormat = [{
    $sym_name `:` $type `device` $device (`unit` $unit^)?
    (`buffer` $is_buffer^)? (`sharded` $shard^)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
    /// The type one rank stores: the shard type when sharded, else full.
    ::mlir::RankedTensorType getLocalType();
  }];
}

def Tc_UseOp : Tc_Op<"use", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Read a whole (unsharded) parameter in forward";
  let description = [{
    `%w = tc.use @p : tensor<...>` yields the full value of `@p`. A
    parameter sharded over more than one rank cannot be used directly: the
    sharding pass replaces its uses with `tc.all_gather`.
  }];
  let arguments = (ins FlatSymbolRefAttr:$param);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$param attr-dict `:` type($result)";
}

def Tc_MaterializeOp : Tc_Op<"materialize", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Give a parameter its (local) value; only in @init";
  let description = [{
    `tc.materialize %v into @p : tensor<...>` stores `%v` as the value of
    `@p` on this rank. The value's type is the parameter's type, or its
    local shard type once the parameter is sharded.
  }];
  let arguments = (ins AnyRankedTensor:$value, FlatSymbolRefAttr:$param);
  let assemblyFormat = "$value `into` $param attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def Tc_AllGatherOp : Tc_Op<"all_gather", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Gather the full value of a sharded parameter";
  let description = [{
    `%w = tc.all_gather @p : tensor<...>` collects every rank's shard of
    `@p` (a collective over all ranks) into a fresh buffer that holds the
    full parameter. Its lifetime ends at `tc.release`. Inserted by
    `tc-fsdp`.
  }];
  let arguments = (ins FlatSymbolRefAttr:$param);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$param attr-dict `:` type($result)";
}

def Tc_ReleaseOp : Tc_Op<"release"> {
  let summary = "End the lifetime of a gathered parameter";
  let description = [{
    `tc.release %w : tensor<...>` frees the buffer of a `tc.all_gather`
    after its last use; the value must not be used afterwards.
  }];
  let arguments = (ins AnyRankedTensor:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Init generators
//===----------------------------------------------------------------------===//

// A generator produces a parameter's initial value from nothing. Unsharded,
// its result is the whole tensor. Sharded (`shard of` the full type), it
// produces this rank's dim-0 shard of that full tensor: the element at local
// index i is the full tensor's element at rank * chunk_elements + i, and rows
// past the full tensor's dim 0 are zero.
class Tc_GeneratorOp<string mnemonic, list<Trait> traits = []>
    : Tc_Op<mnemonic, !listconcat(traits, [Pure])> {
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The full tensor this generator produces (a shard of).
    ::mlir::RankedTensorType getFullTensorType() {
      if (auto full = getFullType())
        return ::llvm::cast<::mlir::RankedTensorType>(*full);
      return ::llvm::cast<::mlir::RankedTensorType>(getResult().getType());
    }
  }];
}

def Tc_FillOp : Tc_GeneratorOp<"fill"> {
  let summary = "A tensor with every element equal to `value`";
  let arguments = (ins F64Attr:$value,
                       OptionalAttr<TypeAttrOf<AnyRankedTensor>>:$full_type);
  let assemblyFormat = [{
    $value attr-dict `:` type($result) (`shard` `of` $full_type^)?
  }];
}

def Tc_ZerosOp : Tc_GeneratorOp<"zeros"> {
  let summary = "A tensor of zeros";
  let arguments = (ins OptionalAttr<TypeAttrOf<AnyRankedTensor>>:$full_type);
  let assemblyFormat = "attr-dict `:` type($result) (`shard` `of` $full_type^)?";
}

def Tc_OnesOp : Tc_GeneratorOp<"ones"> {
  let summary = "A tensor of ones";
  let arguments = (ins OptionalAttr<TypeAttrOf<AnyRankedTensor>>:$full_type);
  let assemblyFormat = "attr-dict `:` type($result) (`shard` `of` $full_type^)?";
}

//===----------------------------------------------------------------------===//
// Model ops
//===----------------------------------------------------------------------===//

def Tc_AddOp : Tc_Op<"add", [Pure]> {
  let summary = "Elementwise addition with numpy broadcasting";
  let description = [{
    `%y = tc.add %a, %b : tensor<4x1xf32>, tensor<3xf32> -> tensor<4x3xf32>`.
    Shapes broadcast as in numpy: aligned from the right, each pair of dims
    equal or one of them 1. Element types must match.
  }];
  let arguments = (ins AnyRankedTensor:$lhs, AnyRankedTensor:$rhs);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // SHARDC_TC_OPS
