//===- TcOps.td - tc dialect operations --------------------*- tablegen -*-===//

#ifndef SHARDC_TC_OPS
#define SHARDC_TC_OPS

include "TcDialect.td"
include "TcAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"
include "TcInterfaces.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
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
    `non_persistent` marks a buffer that is not part of the model's state
    (torch's `register_buffer(..., persistent=False)`, exporter constants):
    checkpoints never save it. `tied` lists the other names the same
    parameter has in the model's state_dict (tied weights): a checkpoint
    saves it under each of them too.

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
    OptionalAttr<Tc_ShardAttr>:$shard,
    UnitAttr:$non_persistent,
    OptionalAttr<StrArrayAttr>:$tied_names
  );
  let assemblyFormat = [{
    $sym_name `:` $type `device` $device (`unit` $unit^)?
    (`buffer` $is_buffer^)? (`non_persistent` $non_persistent^)?
    (`tied` $tied_names^)? (`sharded` $shard^)? attr-dict
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

def Tc_UpdateBufferOp : Tc_Op<"update_buffer", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Overwrite a buffer with a value forward computed, in place";
  let description = [{
    `tc.update_buffer @bn.running_mean, %m : tensor<64xf32>` stores `%m`
    as the new value of buffer `@bn.running_mean` (a graph's `updates`,
    docs/graph-format.md): a training-mode batch norm's running statistics,
    which torch updates in forward. Buffers are replicated, so every rank
    writes its whole copy. Only in @forward, after the buffer's last read:
    the graph builder puts the updates just before the return.
  }];
  let arguments = (ins FlatSymbolRefAttr:$buffer, AnyRankedTensor:$value);
  let assemblyFormat = "$buffer `,` $value attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def Tc_AllGatherOp : Tc_Op<"all_gather", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Gather the full values of an FSDP unit's sharded parameters";
  let description = [{
    `%w, %b = tc.all_gather [@h.0.w, @h.0.b] unit "h.0" : tensor<...>, tensor<...>`
    collects every rank's shards of the listed parameters — one collective
    for the whole unit — into one fresh buffer holding their full values.
    The buffer lives until `tc.release` of all the results. Inserted by
    `tc-fsdp`.
  }];
  let arguments = (ins FlatSymbolRefArrayAttr:$params,
                       OptionalAttr<StrAttr>:$unit);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = "$params (`unit` $unit^)? attr-dict `:` type($results)";
  let hasVerifier = 1;
}

def Tc_ReleaseOp : Tc_Op<"release"> {
  let summary = "End the lifetime of an FSDP unit's gathered parameters";
  let description = [{
    `tc.release %w, %b : tensor<...>, tensor<...>` frees the buffer of a
    `tc.all_gather` after the last use of any of its results; it names all
    of them, and none may be used afterwards.
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Init generators
//===----------------------------------------------------------------------===//

// A generator produces a parameter's initial value from nothing. Unsharded,
// its result is the whole tensor. Sharded (`shard of` the full type), it
// produces this rank's dim-0 shard of that full tensor: the element at local
// index i is the full tensor's element at rank * chunk_elements + i, and rows
// past the full tensor's dim 0 are zero. With `from SOURCE map M` (views
// folded in by tc-fsdp), full index p takes the value the generator gives
// SOURCE's element M(p).
class Tc_GeneratorOp<string mnemonic, dag generatorArgs, string argsFormat,
                     list<Trait> traits = []>
    : Tc_Op<mnemonic, !listconcat(traits, [Pure,
        DeclareOpInterfaceMethods<Tc_GeneratorOpInterface>])> {
  let arguments = !con(generatorArgs, (ins
      OptionalAttr<TypeAttrOf<AnyRankedTensor>>:$full_type,
      OptionalAttr<TypeAttrOf<AnyRankedTensor>>:$source_type,
      OptionalAttr<AffineMapAttr>:$index_map));
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = argsFormat # [{ attr-dict `:` type($result)
      (`shard` `of` $full_type^)? (`from` $source_type^ `map` $index_map)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The full tensor this generator produces (a shard of).
    ::mlir::RankedTensorType getFullTensorType() {
      if (auto full = getFullType())
        return ::llvm::cast<::mlir::RankedTensorType>(*full);
      return ::llvm::cast<::mlir::RankedTensorType>(getResult().getType());
    }
    /// The tensor whose elements the generator defines (before views).
    ::mlir::RankedTensorType getSourceTensorType() {
      if (auto source = getSourceType())
        return ::llvm::cast<::mlir::RankedTensorType>(*source);
      return getFullTensorType();
    }
  }];
}

def Tc_FillOp : Tc_GeneratorOp<"fill", (ins F64Attr:$value), "$value"> {
  let summary = "A tensor with every element equal to `value`";
}

def Tc_ZerosOp : Tc_GeneratorOp<"zeros", (ins), ""> {
  let summary = "A tensor of zeros";
}

def Tc_OnesOp : Tc_GeneratorOp<"ones", (ins), ""> {
  let summary = "A tensor of ones";
}

def Tc_UniformOp : Tc_GeneratorOp<"uniform",
    (ins F64Attr:$low, F64Attr:$high, I64Attr:$position),
    "`low` $low `high` $high `position` $position"> {
  let summary = "Uniform in [low, high), counter-based (docs/rng.md)";
  let description = [{
    `%w = tc.uniform low -0.1 high 0.1 position 0 : tensor<8x4xf32>`: element i is
    a pure function of (seed, the parameter's name, `position` — the op's
    place in the parameter's init chain — and i).
  }];
}

def Tc_NormalOp : Tc_GeneratorOp<"normal",
    (ins F64Attr:$mean, F64Attr:$std, I64Attr:$position),
    "`mean` $mean `std` $std `position` $position"> {
  let summary = "Normal(mean, std), counter-based (docs/rng.md)";
}

def Tc_TruncNormalOp : Tc_GeneratorOp<"trunc_normal",
    (ins F64Attr:$mean, F64Attr:$std, F64Attr:$a, F64Attr:$b,
         I64Attr:$position),
    "`mean` $mean `std` $std `a` $a `b` $b `position` $position"> {
  let summary = "Normal(mean, std) truncated to [a, b], by inverse CDF";
}

def Tc_EyeOp : Tc_GeneratorOp<"eye", (ins), ""> {
  let summary = "The identity matrix (2-D): 1 where row == column";
}

def Tc_ArangeOp : Tc_GeneratorOp<"arange", (ins F64Attr:$start, F64Attr:$step),
    "`start` $start `step` $step"> {
  let summary = "Element i (row-major) is start + i * step";
}

def Tc_OrthogonalOp : Tc_GeneratorOp<"orthogonal",
    (ins F64Attr:$gain, I64Attr:$position),
    "`gain` $gain `position` $position"> {
  let summary = "A (semi-)orthogonal matrix, as torch.nn.init.orthogonal_";
  let description = [{
    Flattens to rows = d0, cols = numel / d0, draws Normal(0, 1) (stream and
    position as `tc.normal`), takes Q of its QR decomposition with the
    signs of diag(R), and scales by `gain`. Every element depends on the
    whole draw, so it is not shardable: tc-fsdp computes it on one owner
    rank and scatters it (`tc.scatter`).
  }];
}

def Tc_LoadOp : Tc_GeneratorOp<"load", (ins StrAttr:$file, StrAttr:$tensor),
    "`file` $file `tensor` $tensor"> {
  let summary = "A parameter's values from a tensor of a safetensors checkpoint";
  let description = [{
    `%w = tc.load file "model.safetensors" tensor "h.0.attn.weight" :
    tensor<768x768xf32>`: the tensor of that name in the file (or in the
    sharded set an `*.index.json` describes), converted to the result's
    element type. Sharded (`shard of FULL`), rank r reads only its rows
    [r*chunk, min((r+1)*chunk, d0)) — one contiguous byte range. Pointwise
    ops may follow it; views may not (no `from ... map`). The file's
    existence, dtype and shape are checked when the plan runs
    (docs/checkpoints.md).
  }];
}

def Tc_NormOfOp : Tc_GeneratorOp<"norm_of", (ins StrAttr:$source, DenseI64ArrayAttr:$dims),
    "`of` $source `dims` $dims"> {
  let summary = "The 2-norm of another parameter's initial values (a derived parameter)";
  let description = [{
    `%g = tc.norm_of of "conv.weight_v" dims [0, 1] : tensor<1x1x128xf32>`:
    sqrt of the sum of squares of the source parameter's initial values over
    `dims`, kept as size 1 (weight norm's `g = norm_except_dim(v, 2, dim)`).
    The runtime regenerates the source's generator and pointwise ops block
    by block (no rank holds the whole source) and sums in its row-major order
    in double, so every rank and every world size gets the same bytes.
    Sharded (`shard of FULL`), rank r writes only its rows. Pointwise ops may
    follow it; views may not.
  }];
}

// The torch.nn.init families, expanded by tc-expand-init into uniform and
// normal with bounds from torch's fan rules (docs/ir.md).
def Tc_KaimingUniformOp : Tc_GeneratorOp<"kaiming_uniform",
    (ins F64Attr:$a, StrAttr:$mode, StrAttr:$nonlinearity, I64Attr:$position),
    "`a` $a `mode` $mode `nonlinearity` $nonlinearity `position` $position"> {
  let summary = "torch.nn.init.kaiming_uniform_";
}

def Tc_KaimingNormalOp : Tc_GeneratorOp<"kaiming_normal",
    (ins F64Attr:$a, StrAttr:$mode, StrAttr:$nonlinearity, I64Attr:$position),
    "`a` $a `mode` $mode `nonlinearity` $nonlinearity `position` $position"> {
  let summary = "torch.nn.init.kaiming_normal_";
}

def Tc_XavierUniformOp : Tc_GeneratorOp<"xavier_uniform",
    (ins F64Attr:$gain, I64Attr:$position), "`gain` $gain `position` $position"> {
  let summary = "torch.nn.init.xavier_uniform_";
}

def Tc_XavierNormalOp : Tc_GeneratorOp<"xavier_normal",
    (ins F64Attr:$gain, I64Attr:$position), "`gain` $gain `position` $position"> {
  let summary = "torch.nn.init.xavier_normal_";
}

//===----------------------------------------------------------------------===//
// Pointwise init ops (scalar operands)
//===----------------------------------------------------------------------===//

class Tc_PointwiseOp<string mnemonic, dag scalarArgs, string argsFormat>
    : Tc_Op<mnemonic, [Pure, SameOperandsAndResultType,
        DeclareOpInterfaceMethods<Tc_PointwiseInitOpInterface>]> {
  let arguments = !con((ins AnyRankedTensor:$input), scalarArgs);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input " # argsFormat # " attr-dict `:` type($result)";
}

def Tc_MulScalarOp : Tc_PointwiseOp<"mul_scalar", (ins F64Attr:$value), "`,` $value"> {
  let summary = "Multiply every element by a scalar";
}
def Tc_AddScalarOp : Tc_PointwiseOp<"add_scalar", (ins F64Attr:$value), "`,` $value"> {
  let summary = "Add a scalar to every element";
}
def Tc_SubScalarOp : Tc_PointwiseOp<"sub_scalar", (ins F64Attr:$value), "`,` $value"> {
  let summary = "Subtract a scalar from every element";
}
def Tc_DivScalarOp : Tc_PointwiseOp<"div_scalar", (ins F64Attr:$value), "`,` $value"> {
  let summary = "Divide every element by a scalar";
}
def Tc_ClampOp : Tc_PointwiseOp<"clamp", (ins F64Attr:$min, F64Attr:$max),
    "`min` $min `max` $max"> {
  let summary = "Clamp every element to [min, max]";
  let hasVerifier = 1;
}
def Tc_ErfinvOp : Tc_PointwiseOp<"erfinv", (ins), ""> {
  let summary = "Inverse error function (docs/rng.md gives the implementation)";
}
def Tc_SqrtOp : Tc_PointwiseOp<"sqrt", (ins), ""> {
  let summary = "Square root";
}
def Tc_NegOp : Tc_PointwiseOp<"neg", (ins), ""> {
  let summary = "Negation";
}
def Tc_ExpOp : Tc_PointwiseOp<"exp", (ins), ""> {
  let summary = "e^x (docs/rng.md gives the implementation)";
}
def Tc_LogOp : Tc_PointwiseOp<"log", (ins), ""> {
  let summary = "Natural logarithm (NaN below 0, -inf at 0)";
}
def Tc_Expm1Op : Tc_PointwiseOp<"expm1", (ins), ""> {
  let summary = "e^x - 1, exact near 0";
}
def Tc_InverseSoftplusOp : Tc_PointwiseOp<"inverse_softplus", (ins), ""> {
  let summary = "x + log(-expm1(-x)): the value whose softplus is x";
  let description = [{
    torch's idiom for softplus's inverse, which Mamba, Mamba2 and their kin
    write for the bias of the time step `dt` at init. One op because the
    idiom reads x twice; init chains are linear.
  }];
}
// Row fill (nn.Embedding's padding_idx row zeroed at init).
def Tc_FillRowsOp : Tc_PointwiseOp<"fill_rows",
    (ins F64Attr:$value, I64Attr:$start, I64Attr:$end),
    "`value` $value `rows` $start `to` $end"> {
  let summary = "Rows [start, end) of dim 0 of the full tensor set to value";
  let description = [{
    The one init op that looks at an element's index: only the last ops of
    a chain (after every view; the graph reader checks), so the fused chain
    keeps it after the generator as written. Sharded, each rank sets the
    part of those rows it holds (the plan's `fill_rows` reads the shard's
    place in the full tensor).
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Views
//===----------------------------------------------------------------------===//

class Tc_ViewOp<string mnemonic, dag viewArgs, string argsFormat>
    : Tc_Op<mnemonic, [Pure,
        DeclareOpInterfaceMethods<Tc_ViewOpInterface, ["getIndexMap"]>]> {
  let arguments = !con((ins AnyRankedTensor:$input), viewArgs);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input " # argsFormat #
      " attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Tc_ReshapeOp : Tc_ViewOp<"reshape", (ins), ""> {
  let summary = "Same elements in row-major order, another shape";
}
def Tc_TransposeOp : Tc_ViewOp<"transpose", (ins I64Attr:$dim0, I64Attr:$dim1),
    "`,` $dim0 `,` $dim1"> {
  let summary = "Swap two dimensions";
}
def Tc_PermuteOp : Tc_ViewOp<"permute", (ins DenseI64ArrayAttr:$dims), "$dims"> {
  let summary = "Reorder dimensions: result dim k is input dim dims[k]";
}
def Tc_SliceOp : Tc_ViewOp<"slice",
    (ins I64Attr:$dim, I64Attr:$start, I64Attr:$end, I64Attr:$step),
    "`dim` $dim `start` $start `end` $end `step` $step"> {
  let summary = "Elements start, start+step, ... < end along one dimension";
}

//===----------------------------------------------------------------------===//
// Collectives inserted by tc-fsdp for non-shardable init
//===----------------------------------------------------------------------===//

def Tc_ScatterOp : Tc_Op<"scatter"> {
  let summary = "Scatter a full tensor from its owner rank into dim-0 shards";
  let description = [{
    `%s = tc.scatter %full from 2 : tensor<8x4xf32> -> tensor<2x4xf32>`:
    `%full` and everything computing it exist only on rank `owner`; every
    rank receives its rows (zero padding past d0). Inserted by tc-fsdp for
    parameters whose init chain is not shardable.
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$owner);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `from` $owner attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Model ops
//===----------------------------------------------------------------------===//

include "TcForwardOps.td"
include "TcTrainingOps.td"

#endif // SHARDC_TC_OPS
