//===- TcForwardOps.td - tc model (forward) ops ------------*- tablegen -*-===//
//
// The ops a transformer's forward needs. Types are explicit in the
// assembly; each verifier checks its operands the way torch would reject
// them, so a graph that verifies cannot fail on shapes at run time.
// Views (reshape, transpose, permute, slice) are shared with init chains.
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_TC_FORWARD_OPS
#define SHARDC_TC_FORWARD_OPS

class Tc_BroadcastBinaryOp<string mnemonic, string what>
    : Tc_Op<mnemonic, [Pure]> {
  let summary = "Elementwise " # what # " with numpy broadcasting";
  let description = [{
    `%y = tc.}] # mnemonic # [{ %a, %b : tensor<4x1xf32>, tensor<3xf32> -> tensor<4x3xf32>`.
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

def Tc_AddOp : Tc_BroadcastBinaryOp<"add", "addition">;
def Tc_SubOp : Tc_BroadcastBinaryOp<"sub", "subtraction">;
def Tc_MulOp : Tc_BroadcastBinaryOp<"mul", "multiplication">;
def Tc_DivOp : Tc_BroadcastBinaryOp<"div", "division">;

def Tc_EmbeddingOp : Tc_Op<"embedding", [Pure]> {
  let summary = "Rows of a [V, D] table picked by int64 ids";
  let arguments = (ins AnyRankedTensor:$weight, AnyRankedTensor:$ids);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $weight `,` $ids attr-dict `:` type($weight) `,` type($ids) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tc_LinearOp : Tc_Op<"linear", [Pure]> {
  let summary = "x Wᵀ + b, as nn.Linear";
  let arguments = (ins AnyRankedTensor:$input, AnyRankedTensor:$weight,
                       Optional<AnyRankedTensor>:$bias);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` type($input) `,`
    type($weight) (`,` type($bias)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tc_MatmulOp : Tc_Op<"matmul", [Pure]> {
  let summary = "Batched matrix product [..., M, K] x [..., K, N]";
  let arguments = (ins AnyRankedTensor:$lhs, AnyRankedTensor:$rhs);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

class Tc_UnaryFloatOp<string mnemonic, string what, dag extraArgs = (ins),
                      string argsFormat = "">
    : Tc_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = what;
  let arguments = !con((ins AnyRankedTensor:$input), extraArgs);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input " # argsFormat # " attr-dict `:` type($result)";
}

def Tc_GeluOp : Tc_UnaryFloatOp<"gelu", "GELU, exact (\"none\") or \"tanh\"",
    (ins StrAttr:$approximate), "`approximate` $approximate"> {
  let hasVerifier = 1;
}
def Tc_SiluOp : Tc_UnaryFloatOp<"silu", "x * sigmoid(x)">;
def Tc_ReluOp : Tc_UnaryFloatOp<"relu", "max(x, 0)">;
def Tc_SoftmaxOp : Tc_UnaryFloatOp<"softmax", "Softmax along `dim`",
    (ins I64Attr:$dim), "`dim` $dim"> {
  let hasVerifier = 1;
}
def Tc_RopeOp : Tc_UnaryFloatOp<"rope",
    "Rotary position embedding (rotate-half) of [B, H, T, D] at positions 0..T-1",
    (ins F64Attr:$theta), "`theta` $theta"> {
  let hasVerifier = 1;
}

def Tc_LayerNormOp : Tc_Op<"layer_norm", [Pure]> {
  let summary = "LayerNorm over the last dim, with weight and bias";
  let arguments = (ins AnyRankedTensor:$input, AnyRankedTensor:$weight,
                       AnyRankedTensor:$bias, F64Attr:$eps);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias `eps` $eps attr-dict `:` type($input) `,`
    type($weight) `,` type($bias) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tc_RmsNormOp : Tc_Op<"rms_norm", [Pure]> {
  let summary = "RMSNorm over the last dim: x / sqrt(mean(x^2) + eps) * weight";
  let arguments = (ins AnyRankedTensor:$input, AnyRankedTensor:$weight,
                       F64Attr:$eps);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `eps` $eps attr-dict `:` type($input) `,` type($weight)
    `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tc_SdpaOp : Tc_Op<"sdpa", [Pure]> {
  let summary = "Scaled dot-product attention, optionally causal or masked";
  let description = [{
    `%o = tc.sdpa %q, %k, %v mask %m causal scale 0.125 : ...` with
    q [B, H, T, E], k [B, Hkv, S, E], v [B, Hkv, S, Ev] and o [B, H, T, Ev];
    H a multiple of Hkv: grouped-query attention, query head h reads key /
    value head h / (H / Hkv) (torch's `enable_gqa`, without repeating k and
    v). causal is torch's `is_causal` (query t sees keys s <= t). The optional
    mask is torch's float `attn_mask`: q's element type, 4 dims, each 1 or
    the scores' [B, H, T, S], added to the scaled scores before softmax
    (-inf excludes a key); a query row with no key left gives zeros. The
    scores are never a tensor of the program: a padded batch's attention
    costs the memory of an unpadded one.
  }];
  let arguments = (ins AnyRankedTensor:$query, AnyRankedTensor:$key,
                       AnyRankedTensor:$value,
                       Optional<AnyRankedTensor>:$mask, UnitAttr:$causal,
                       F64Attr:$scale);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` $mask^)? (`causal` $causal^)?
    `scale` $scale attr-dict
    `:` type($query) `,` type($key) `,` type($value) (`,` type($mask)^)?
    `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tc_CatOp : Tc_Op<"cat", [Pure]> {
  let summary = "Concatenation along `dim`";
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs, I64Attr:$dim);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $inputs `dim` $dim attr-dict `:` type($inputs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tc_CrossEntropyOp : Tc_Op<"cross_entropy", [Pure]> {
  let summary = "Mean of -log softmax(logits)[target] (torch's default)";
  let description = [{
    The mean over the targets other than `ignore_index` (torch's, default
    -100; printed only when it differs) of -log softmax(logits)[target].
  }];
  let arguments = (ins AnyRankedTensor:$logits, AnyRankedTensor:$targets,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $logits `,` $targets attr-dict `:` type($logits) `,` type($targets) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Tc_TableOp : Tc_Op<"op", [Pure]> {
  let summary = "A family op of the runtime's op table, named by a string";
  let description = [{
    One generic op for every SHARDC_FAMILY_OP of runtime/OpTable.def
    (convolution, pooling, batch/group norm, reductions, the unary family):

    ```mlir
    %y = tc.op "conv"(%x, %w) {stride = [2, 2], padding = [1, 1],
                                dilation = [1, 1], groups = 1}
        : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x4x4xf32>
    ```

    The verifier asks the runtime's table (the same code the graph reader
    and the executor run): the name is a family op, the operand count is in
    its range, every attribute is one of its attributes with the table's kind
    (integer: i64, float: f64, string, integer list: `[i64, ...]`), the
    required ones are present, and the family's shape and dtype rule gives
    exactly the declared result type. The lowering copies the attributes
    into the plan instruction of the same name.
  }];
  let arguments = (ins StrAttr:$op_name, Variadic<AnyRankedTensor>:$inputs);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $op_name `(` $inputs `)` attr-dict `:` functional-type($inputs, $result)
  }];
  let hasVerifier = 1;
}

#endif // SHARDC_TC_FORWARD_OPS
