"""ATen capture: what Hugging Face models (and any model that builds masks,
position ids or rotary tables in forward) need beyond the op table of aten.py
(docs/exporter.md, "Constants built in forward").

A value that depends on no forward input and no parameter (aranges, `full`,
masks, position ids, rotary cos/sin tables, relative-position buckets; and
the non-persistent or integer buffers they read) is *folded*: the ATen op
runs on CPU at export time and the lowering carries a `Const` (a concrete
tensor) instead of a graph tensor. A Const becomes graph data only where a
graph op reads it, in one of these forms:

- an attention mask given to scaled_dot_product_attention: all-true (or
  all-zero additive) is no mask, the lower-triangular one is `causal`;
- ids given to an embedding: one repeated id is a row slice, consecutive ids
  (position ids) a row range;
- `cos`/`sin` tables multiplying q/k and their rotate-half, summed (HF's
  apply_rotary_pos_emb): the graph's `rotary_embedding` op, its `theta`
  read back from the table and checked against it; tables of another RoPE
  (Llama 3's rope_type "llama3", YaRN) as constant data, multiplied as
  torch does;
- a tensor whose elements are all equal: a `fill` buffer.

Anything else is refused, naming the op, module path and source line and
the constant's shape. Values the specialisation depends on (the shapes)
are recorded in the graph's "specialized" like every ATen capture.

RMSNorm modules (a class named *RMSNorm or T5LayerNorm whose ops are exactly
x * rsqrt(mean(x^2, -1) + eps) * w, or * (1 + w) as Gemma's) are lowered to
the graph's fused `rms_norm` op: one node instead of five with three
temporaries, as the fx capture does.
"""

import contextlib
import math

import torch
import torch.nn as nn

from .graph_emitter import G
from . import const_tables

aten = torch.ops.aten

# Kept out of torch's decompositions: the graph has these ops fused.
KEPT_WHOLE = (aten.silu.default,)

# Never folded (random, or with effects).
_NOT_FOLDED = {aten.rand.default, aten.randn.default, aten.randint.low,
               aten.bernoulli.p, aten.native_dropout.default}
# Creates a tensor from Python numbers only: folded though no operand is a Const.
_FACTORIES = {aten.arange.default, aten.arange.start, aten.arange.start_step,
              aten.full.default, aten.zeros.default, aten.ones.default,
              aten.scalar_tensor.default, aten.empty.memory_format,
              aten.empty_permuted.default, aten.tril_indices.default,
              aten.triu_indices.default}
# Elements a folded constant may have when it has to be kept whole (bounded data).
MAX_CONST_ELEMENTS = 1 << 24


class Const:
    """A concrete tensor (CPU) that depends on no input and no parameter."""

    def __init__(self, t):
        self.t = t

    @property
    def shape(self):
        return list(self.t.shape)


class Lazy:
    """A value whose graph nodes are emitted only if something reads it as a
    plain tensor (it may instead fold into a fused op)."""

    def materialize(self, low, node):
        raise NotImplementedError


class Neg(Lazy):
    def __init__(self, x, val):
        self.x, self.val = x, val

    def materialize(self, low, node):
        return low.emit(node, "mul", [self.x, low.const(-1.0, self.x)], self.val)


class RotateHalf(Lazy):
    """cat(-x[..., D/2:], x[..., :D/2], -1): HF's rotate_half(x)."""

    def __init__(self, x, neg_hi, lo, val):
        self.x, self.parts, self.val = x, (neg_hi, lo), val

    def materialize(self, low, node):
        hi = low.tensor(node, self.parts[0])
        return low.emit(node, "cat", [hi, self.parts[1]], self.val, dim=len(self.val.shape) - 1)


class RotTerm(Lazy):
    """x * table (a folded cos or sin table) waiting for its rotary partner."""

    def __init__(self, x, table, val):
        self.x, self.table, self.val = x, table, val

    def materialize(self, low, node, as_data=False):
        """Not a rotary pair after all: x * the table, the table as runs of
        fill buffers (const_tables.py) when it has few enough, else (or with
        `as_data`: a table of angles, all of whose elements differ) as
        constant data (const_data.py)."""
        x = low.tensor(node, self.x)
        t = self.table
        for d in range(t.dim()):
            if t.shape[d] > 1 and bool((t == t.narrow(d, 0, 1)).all()):
                # the same along d (the batch's copies of a rotary table): one,
                # broadcast by the mul
                t = t.narrow(d, 0, 1)
        table = None if as_data else const_tables.float_table(
            low, node, t, x.val.dtype,
            lambda v, shape: fill_buffer(low, v, shape, x.val.dtype))
        if table is None:
            # more runs than a table of fills may take: constant data beside
            # the graph (const_data.py), as for any other elementwise operand
            from .const_data import data_buffer
            table = data_buffer(low, t, x.val.dtype) if t.is_floating_point() else None
        if table is None:
            low.fail(node, "it multiplies by a constant table of shape %s built in forward "
                     "(not a rotary cos/sin pair the graph's rotary_embedding expresses) "
                     "that takes more than %d runs of equal values and is not floating-point "
                     "data of at most 2^20 elements" % (list(t.shape), const_tables.MAX_RUNS))
        from .aten import Expanded
        table = table.base if isinstance(table, Expanded) else table
        both = list(torch.broadcast_shapes(tuple(x.shape), tuple(table.shape)))
        if both != list(self.val.shape):
            low.fail(node, "x %s times a constant table %s does not give the result's shape"
                     % (x.shape, table.shape))
        return low.emit(node, "mul", [x, table], self.val)


class Skipped:
    """An op inside a module lowered as one fused node (RMSNorm)."""

    def __init__(self, module):
        self.module = module


# ------------------------------------------------------------ concrete buffers

@contextlib.contextmanager
def parameters_on_meta():
    """Construct with every parameter moved to meta as it is registered, and
    buffers left on CPU: buffer values without parameter storage."""
    orig = nn.Module.register_parameter

    def register(self, name, param):
        if param is not None and param.device.type != "meta":
            param = nn.Parameter(param.detach().to("meta"), requires_grad=param.requires_grad)
        orig(self, name, param)
    setattr_orig = nn.Module.__setattr__

    def setattr_(self, name, value):
        if isinstance(value, nn.Parameter) and value.device.type != "meta":
            value = nn.Parameter(value.detach().to("meta"), requires_grad=value.requires_grad)
        setattr_orig(self, name, value)
    nn.Module.register_parameter = register
    nn.Module.__setattr__ = setattr_
    try:
        yield
    finally:
        nn.Module.register_parameter = orig
        nn.Module.__setattr__ = setattr_orig


# A model whose buffers come out on meta is built once more with real
# parameters, up to const_data.MAX_REBUILD_PARAM_BYTES.
from .const_data import MAX_REBUILD_PARAM_BYTES  # noqa: E402


def concrete_buffers(factory, kwargs, param_bytes):
    """name -> CPU tensor for every buffer of a fresh instance (parameters stay
    on meta, so this costs the buffers' memory only). A buffer computed on a
    parameter's device (timm's Swin builds its window mask on
    norm1.weight.device) is on meta too and has no values: then the model is
    built again with its parameters on the CPU, if they are small enough
    (param_bytes: the model's parameter bytes); so is a model whose
    construction mixes such a buffer with CPU tensors (timm's SwinV2-CR) and
    fails with its parameters on meta."""
    kw = dict(kwargs)
    if "device" in kw:
        kw["device"] = "cpu"
    torch.manual_seed(0)
    try:
        with parameters_on_meta():
            model = factory(**kw)
    except Exception as e:
        if param_bytes > MAX_REBUILD_PARAM_BYTES:
            raise
        why = "%s: %s" % (type(e).__name__, e)
    else:
        buffers = {n: b.detach() for n, b in model.named_buffers(remove_duplicate=False)}
        on_meta = [n for n, b in buffers.items() if b.device.type == "meta"]
        if not on_meta:
            return buffers
        why = "buffer %s is computed on a parameter's device" % on_meta[0]
        del model
    if param_bytes > MAX_REBUILD_PARAM_BYTES:
        raise RuntimeError(
            "%s, so its values need the parameters built (%d bytes, over the %d this "
            "exporter builds for it)" % (why, param_bytes, MAX_REBUILD_PARAM_BYTES))
    torch.manual_seed(0)
    model = factory(**kw)
    return {n: b.detach() for n, b in model.named_buffers(remove_duplicate=False)}


# ------------------------------------------------------------ folding

def _flat(v):
    if isinstance(v, (list, tuple)):
        for x in v:
            yield from _flat(x)
    else:
        yield v


def try_fold(low, node, args, kwargs):
    """The op run on CPU when none of its operands is a graph value and at
    least one is a Const (or it is a factory); else None."""
    if node.target in _NOT_FOLDED or not callable(node.target):
        return None
    vals = list(_flat(args)) + list(_flat(list(kwargs.values())))
    if any(isinstance(v, (G, Lazy, Skipped)) or type(v).__name__ in
           ("Expanded", "Multi", "Unusable", "ComplexPair") for v in vals):
        return None
    if not any(isinstance(v, Const) for v in vals) and node.target not in _FACTORIES:
        return None

    def real(a):
        if isinstance(a, Const):
            return a.t
        if isinstance(a, (list, tuple)):
            return type(a)(real(x) for x in a)
        return a
    kw = {k: real(v) for k, v in kwargs.items()}
    if "device" in kw:
        kw["device"] = torch.device("cpu")
    try:
        out = node.target(*[real(a) for a in args], **kw)
    except Exception as e:
        low.fail(node, "folding this constant (it depends on no input) failed: %s: %s"
                 % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
    if isinstance(out, torch.Tensor):
        return Const(out)
    if isinstance(out, (tuple, list)):
        return ConstTuple([Const(o) if isinstance(o, torch.Tensor) else o for o in out])
    return Const(torch.tensor(0)) if out is None else out


class ConstTuple:
    def __init__(self, items):
        self.items = items


def materialize(low, node, c, like=None, broadcast=False):
    """A Const read as a graph tensor (_materialize), its value remembered
    under the tensor's name (GraphEmitter.const_values); for a broadcast
    base (size 1 where the value repeats) that base's part of it."""
    g = _materialize(low, node, c, like, broadcast)
    t = c.t
    if isinstance(g, G) and len(g.shape) == t.dim():
        for d, (have, full) in enumerate(zip(g.shape, t.shape)):
            if have == 1 and full != 1:  # broadcast base: the value repeats on d
                t = t.narrow(d, 0, 1)
        if list(t.shape) == g.shape:
            low.const_values[g.name] = t.to(g.val.dtype)
    return g


def _materialize(low, node, c, like=None, broadcast=False):
    """A Const read as a graph tensor: a fill buffer when all its elements are
    equal, runs of them (const_tables.py) when they are few; otherwise
    refused (the graph format holds no tensor data). broadcast: the reader
    broadcasts (an elementwise operand), so leading dims over which the
    table repeats may stay size 1."""
    t = c.t
    dtype = like.val.dtype if like is not None else t.dtype
    if not t.is_floating_point() and dtype.is_floating_point:
        # a bool or integer constant beside a floating tensor (HF BEiT adds its
        # all-true mask to the position bias): torch promotes it to that dtype
        t = t.to(dtype)
    if t.numel() > 0 and bool((t == t.reshape(-1)[0]).all()) and \
            (t.is_floating_point() or abs(int(t.reshape(-1)[0])) < 2 ** 53):
        # all equal: a fill (an integer one exact as the fill's float value)
        return fill_buffer(low, float(t.reshape(-1)[0]), list(t.shape), dtype)
    if t.is_floating_point() and t.numel() > 0:
        # copies of a block along dim 0 (Swin's window mask, one per image):
        # the block, then `cat` of its copies (const_data.leading_period)
        from .const_data import leading_period
        block, copies = leading_period(t)
        if copies > 1:
            g = materialize(low, node, Const(block.to(dtype)))
            return low.emit(node, "cat", [g] * copies,
                            torch.empty(list(t.shape), dtype=dtype, device="meta"), dim=0)
    if t.is_floating_point() and t.numel() > 0:
        # an additive causal mask, a table in a few runs (const_tables.py):
        # pure graph ops, no data file
        table = const_tables.float_table(
            low, node, t, dtype, lambda v, shape: fill_buffer(low, v, shape, dtype))
        if table is not None:
            from .aten import Expanded
            if isinstance(table, Expanded):
                return table.base if broadcast else materialize_expand(low, node, table)
            return table
    if not t.is_floating_point() and t.numel() > 0 and t.long().abs().max() < 2 ** 24:
        # a bool or integer table (a causal mask beside a computed padding
        # mask): its values as a float32 table, exact below 2^24, then
        # converted back (aten_values.cast_to: `ne 0` for bool, else `cast`)
        from .aten_values import cast_to
        f = materialize(low, node, Const(t.to(torch.float32)), broadcast=broadcast)
        from .aten import Expanded
        if isinstance(f, Expanded):
            return Expanded(cast_to(low, node, f.base, t.dtype), f.shape)
        return cast_to(low, node, f, t.dtype)
    # other values: bounded constant data beside the graph (const_data.py)
    from .const_data import data_buffer
    if t.is_floating_point():
        g = data_buffer(low, t, dtype)
        if g is not None:
            return g
    low.fail(node, "its operand is a constant of shape %s and dtype %s built in forward "
             "(it depends on no input) whose values are not expressible as graph data "
             "(all-equal values, masks, position ids, rotary tables, tables of at most %d "
             "runs of equal values and floating-point constants of at most 2^20 elements "
             "are)" % (list(t.shape), t.dtype, const_tables.MAX_RUNS))


def fill_buffer(low, value, shape, dtype):
    """A non-persistent buffer of `shape` filled with `value`."""
    from .graph_emitter import json_float, value_dtype
    if not shape:
        return low.const(value, G("", torch.empty((), dtype=dtype, device="meta")))
    name = low.fresh("const.%s.%s" % (json_float(value), "x".join(str(s) for s in shape)))
    low.graph_buffers[name] = {"name": name, "shape": shape, "dtype": value_dtype(dtype),
                               "device": low.device,
                               "init": [{"op": "fill", "value": json_float(value)}]}
    return G(name, torch.empty(shape, dtype=dtype, device="meta"))


# ------------------------------------------------------------ HF-specific rules

def _rotary_theta(cos, sin, T, D):
    """theta if cos/sin (broadcastable to [T, D]) are the rotate-half RoPE
    tables for positions 0..T-1 (the runtime's rotary_embedding), else None."""
    try:
        c = cos.float().expand(*cos.shape[:-2], T, D)
        s = sin.float().expand(*sin.shape[:-2], T, D)
    except RuntimeError:
        return None
    c, s = c.reshape(-1, T, D), s.reshape(-1, T, D)
    if not (bool((c == c[:1]).all()) and bool((s == s[:1]).all())) or D % 2 or T < 2:
        return None
    # Tables rounded to bfloat16 / float16 (a model traced with 16-bit
    # parameters, --param-dtype: HF converts them to q's dtype) match within
    # one unit in the last place of that dtype; the graph's rotary_embedding
    # then computes with exact tables and rounds once (docs/exporter.md).
    rounding = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}.get(cos.dtype, 0.0)
    c, s = c[0].double(), s[0].double()
    half = D // 2
    candidates = [10000.0]
    if half > 1:
        inv1 = math.atan2(float(s[1, 1]), float(c[1, 1]))
        if inv1 > 0:
            est = inv1 ** (-D / 2.0)
            candidates = [float(round(est)), est, 10000.0]
    if rounding and half > 1:
        # 16-bit tables: the angle of the slowest frequency at the last
        # position estimates theta far better than position 1 does, and
        # thetas a few digits apart give the same rounded tables, so round
        # numbers come first (Mixtral's 1e6, Llama 3's 500000).
        last = half - 1
        angle = math.atan2(float(s[T - 1, last]), float(c[T - 1, last])) / (T - 1)
        if angle > 0:
            est = angle ** (-D / (2.0 * last))
            digits = math.floor(math.log10(est))
            candidates += [round(est, -(digits - k)) for k in range(4)]
        candidates += [500000.0, 1000000.0]
    for theta in candidates:
        inv = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
        ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None]
        emb = torch.cat([ang, ang], -1)
        # torch's float32 angles t * inv_freq are off by up to ~t ulps
        tol = 1e-5 * max(1.0, T / 64.0) + rounding
        if (emb.cos() - c).abs().max() <= tol and (emb.sin() - s).abs().max() <= tol:
            return theta
    return None


def hf_mul(low, node, a, b):
    # x * cos_table / rotate_half(x) * sin_table: deferred (rotary)
    for x, t in ((a, b), (b, a)):
        if isinstance(t, Const) and isinstance(x, (G, RotateHalf)) and t.t.is_floating_point() \
                and t.t.dim() >= 2 and t.t.numel() > 1 and \
                not bool((t.t == t.t.reshape(-1)[0]).all()):
            return RotTerm(x, t.t, node.meta["val"])
    return None


def hf_add(low, node, a, b, alpha=1):
    if isinstance(a, RotTerm) and isinstance(b, RotTerm) and alpha == 1:
        plain, rot = (a, b) if isinstance(b.x, RotateHalf) else (b, a)
        if isinstance(plain.x, G) and isinstance(rot.x, RotateHalf) and rot.x.x is plain.x:
            x = plain.x
            T, D = x.shape[-2], x.shape[-1]
            theta = _rotary_theta(plain.table, rot.table, T, D) if len(x.shape) == 4 else None
            if theta is None:
                # tables of another RoPE (Llama 3's rope_type "llama3", YaRN,
                # linear or dynamic scaling, an attention factor): written as
                # torch computes it, with the tables as constant data (shared
                # by every layer: equal constants share a buffer)
                return low.emit(node, "add", [plain.materialize(low, node, as_data=True),
                                              rot.materialize(low, node, as_data=True)],
                                node.meta["val"])
            return low.emit(node, "rotary_embedding", [x], node.meta["val"], theta=theta)
    return None


def hf_neg(low, node, x):
    if isinstance(x, G):
        return Neg(x, node.meta["val"])
    return None


def hf_cat(low, node, tensors, dim=0):
    if len(tensors) != 2 or not isinstance(tensors[0], Neg):
        return hf_cat_expanded(low, node, tensors, dim)
    if isinstance(tensors[1], G):
        hi, lo = tensors[0].x, tensors[1]
        src_hi, src_lo = low.slice_of.get(hi.name), low.slice_of.get(lo.name)
        rank = len(lo.shape)
        if src_hi and src_lo and src_hi[0] is src_lo[0] and dim % rank == rank - 1:
            x = src_hi[0]
            D = x.shape[-1]
            if src_lo[1:] == (rank - 1, 0, D // 2) and src_hi[1:] == (rank - 1, D // 2, D):
                return RotateHalf(x, tensors[0], lo, node.meta["val"])
    return None


def hf_sdpa(low, node, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
            enable_gqa=False):
    if attn_mask is not None and not isinstance(attn_mask, Const):
        return attention_with_bias(low, node, q, k, v, attn_mask, dropout_p, is_causal,
                                   scale, enable_gqa)
    if not isinstance(attn_mask, Const):
        return None
    m = attn_mask.t
    T, S = node.meta["val"].shape[-2], (k.shape[-2] if hasattr(k, "shape") else None)
    if m.dtype == torch.bool:
        allowed = m
    elif m.is_floating_point():
        # finite nonzero entries (a position bias): no all-true / causal form,
        # added to the scores below
        allowed = additive_allowed(m)
    else:
        allowed = None
    causal = None if allowed is None or S is None else mask_form(allowed, T, S)
    if causal is None:
        # any other constant mask (a padding mask from specialised lengths,
        # torchaudio's Conformer): torch's additive form, 0 where allowed and
        # -inf elsewhere, the attention op's mask operand
        dt = q.val.dtype if isinstance(q, G) else torch.float32
        if m.dtype == torch.bool:
            bias = torch.zeros(m.shape, dtype=dt).masked_fill(~m, -math.inf)
        elif m.is_floating_point():
            bias = m.to(dt)
        else:
            low.fail(node, "its attention mask is a constant of dtype %s (bool or floating "
                     "point expected)" % m.dtype)
        return attention_with_bias(low, node, q, k, v,
                                   materialize(low, node, Const(bias), broadcast=True),
                                   dropout_p, is_causal, scale, enable_gqa)
    from .aten import sdpa
    return sdpa(low, node, q, k, v, None, dropout_p, bool(is_causal) or causal, scale,
                enable_gqa)


def additive_allowed(m):
    """The (query, key) pairs an additive float mask allows (its zeros) when
    every other entry masks (-inf, or a dtype's lowest value: below -1e30,
    nothing a score outweighs), else None (a position bias, NaN)."""
    if bool((m > -1e30).logical_and(m != 0).any()) or bool(m.isnan().any()):
        return None
    return m == 0


def mask_form(allowed, T, S):
    """What a constant mask of allowed (query, key) pairs broadcasting to
    [..., T, S] is: False when it allows every pair (no mask), True when it
    is the top-left causal one (torch's is_causal: query t sees keys s <= t),
    None when it is neither."""
    try:
        full = allowed.expand(*allowed.shape[:-2], T, S)
    except RuntimeError:
        return None
    if bool(full.all()):
        return False
    if T == S and bool((full == torch.ones(T, S, dtype=torch.bool).tril()).all()):
        return True
    return None


def attention_with_bias(low, node, q, k, v, bias, dropout_p, is_causal, scale, enable_gqa):
    """scaled_dot_product_attention whose attn_mask is a graph tensor (a
    padding mask computed from the inputs, T5's learned position bias): the
    graph's attention op with its additive mask operand, so the scores are
    never a tensor of the graph. A bool mask becomes torch's own float form,
    0 where allowed and -inf elsewhere; a query row with no allowed key gives
    zeros in both (torch's safe softmax: left padding's rows)."""
    from .aten import Expanded, attention_kv, attention_with_dropout
    if dropout_p:  # written out with the mask added to the scores
        mask = bias.base if isinstance(bias, Expanded) else low.tensor(node, bias)
        qg = low.tensor(node, q)
        if mask.val.dtype == torch.bool:
            mask = low.emit(node, "where", [mask, low.const(0.0, qg), low.const(-math.inf, qg)],
                            torch.empty(list(mask.shape), dtype=qg.val.dtype, device="meta"))
        return attention_with_dropout(low, node, q, k, v, mask, dropout_p, is_causal, scale)
    q, k, v = (low.tensor(node, t) for t in (q, k, v))
    k, v = attention_kv(low, node, q, k, v, enable_gqa)
    rank = len(q.shape)
    if rank != 4 or len(k.shape) != 4 or len(v.shape) != 4:
        low.fail(node, "scaled_dot_product_attention with an attn_mask on %d-d tensors "
                 "(expects [B, H, T, E])" % rank)
    if is_causal and q.shape[2] != k.shape[2]:
        low.fail(node, "scaled_dot_product_attention: is_causal with %d queries and %d keys "
                 "(the graph's causal mask is square)" % (q.shape[2], k.shape[2]))
    dt = q.val.dtype
    bias = bias.base if isinstance(bias, Expanded) else low.tensor(node, bias)
    s_shape = q.shape[:3] + [k.shape[2]]
    T, S = s_shape[2], s_shape[3]
    anded = low.__dict__.get("and_with_const", {}).get(bias.name)
    if anded is not None:
        # a computed mask and'ed with a constant one (transformers' padded
        # batches: an all-true one for encoders, the causal one for decoders):
        # the computed mask alone, [B, 1, 1, S] where the and was [B, 1, T, S],
        # with the causal flag for the causal constant; the same allowed keys,
        # so the same rows without any (zeros). The and is left unread.
        const, computed = anded
        if bool(const.all()):
            bias = computed
        elif not is_causal and T == S and const.numel() == T * S and const.dim() >= 2 and \
                tuple(const.shape[-2:]) == (T, S) and \
                bool((const.reshape(T, S) == torch.ones(T, S, dtype=torch.bool).tril()).all()):
            bias, is_causal = computed, True
    if len(bias.shape) > 4 or \
            list(torch.broadcast_shapes(tuple(s_shape), tuple(bias.shape))) != s_shape:
        low.fail(node, "its attn_mask of shape %s does not broadcast to the scores %s"
                 % (bias.shape, s_shape))
    # One additive form per mask and dtype: every layer of a model reads the
    # mask its forward built once, so the bool mask (8 bytes an element as
    # int64) dies after the first layer and only the float form stays live.
    converted = low.__dict__.setdefault("_sdpa_masks", {})
    key = (bias.name, dt)
    if key in converted:
        bias = converted[key]
    else:
        if bias.val.dtype == torch.bool:
            from .aten_values import where_of
            bias = where_of(low, node, bias, 0.0, -math.inf, dt)
        elif bias.val.dtype != dt:
            if not bias.val.dtype.is_floating_point:
                low.fail(node, "its attn_mask is %s (bool or q's dtype %s expected)"
                         % (bias.val.dtype, dt))
            from .aten_values import cast_to
            bias = cast_to(low, node, bias, dt)
        if len(bias.shape) < 4:
            # the mask broadcasts from the right, as torch's does
            four = [1] * (4 - len(bias.shape)) + list(bias.shape)
            bias = low.emit(node, "reshape", [bias], torch.empty(four, dtype=dt, device="meta"),
                            shape=four)
        converted[key] = bias
    attrs = {"causal": bool(is_causal)}
    if scale is not None:
        attrs["scale"] = float(scale)
    return low.emit(node, "scaled_dot_product_attention", [q, k, v, bias], node.meta["val"],
                    **attrs)


def hf_where(low, node, cond, a, b):
    """where(constant mask, x, -inf or the dtype's lowest value) (HF's
    position-bias mask under causality): x + a constant additive mask of 0
    and that value. Equal to where's result for every finite x of float32
    or bfloat16 storage with |x| < 2^103 (x + lowest rounds to lowest); the
    other operand order likewise."""
    if not isinstance(cond, Const) or cond.t.dtype != torch.bool:
        return None
    for x, other, keep_x in ((a, b, True), (b, a, False)):
        from .aten import Expanded
        if not isinstance(x, (G, Expanded)):
            continue
        base = x.base if isinstance(x, Expanded) else x
        dt = base.val.dtype
        if isinstance(other, Const) and other.t.numel() == 1:
            other = float(other.t.reshape(-1)[0])
        if not isinstance(other, (int, float)) or dt not in (torch.float32, torch.bfloat16):
            continue
        if not (other == -math.inf or other == torch.finfo(dt).min):
            continue
        out = list(node.meta["val"].shape)
        picked = cond.t if keep_x else ~cond.t
        if bool(picked.all()):
            # every element is x (T5's encoder: an all-true padding mask)
            return x if list(base.shape) == out else Expanded(base, out)
        zero = torch.zeros((), dtype=dt)
        low_val = torch.tensor(other, dtype=dt)
        mask = torch.where(cond.t, zero, low_val) if keep_x else torch.where(cond.t, low_val,
                                                                             zero)
        m = materialize(low, node, Const(mask), like=base, broadcast=True)
        both = list(torch.broadcast_shapes(tuple(base.shape), tuple(m.shape)))
        summed = low.emit(node, "add", [base, m], torch.empty(both, dtype=dt, device="meta"))
        # a condition broadcast over the batch: the sum stays lazy (an expand)
        return summed if both == out else Expanded(summed, out)
    # any other where: the op table's mapping, if there is one
    return None


def hf_embedding(low, node, weight, ids, padding_idx=-1, *rest):
    if not isinstance(ids, Const):
        return None
    weight = low.tensor(node, weight)
    ids = ids.t
    flat = ids.reshape(-1, ids.shape[-1]) if ids.dim() else ids.reshape(1, 1)
    out_val = node.meta["val"]
    row = flat[0] if flat.numel() else None
    if row is None or not bool((flat == flat[:1]).all()):
        # T5's relative-position buckets and other tables of ids: runs of rows
        return const_tables.embedding_of_const_ids(low, node, weight, ids)
    if bool((row == row[0]).all()):
        start, n = int(row[0]), 1
    elif bool((row[1:] - row[:-1] == 1).all()):
        start, n = int(row[0]), row.numel()
    else:
        return const_tables.embedding_of_const_ids(low, node, weight, ids)
    rows = low.emit(node, "slice", [weight], torch.empty(n, weight.shape[1], device="meta",
                                                        dtype=weight.val.dtype),
                    dim=0, start=start, end=start + n, step=1)
    from .aten import Expanded
    # [n, C] rows -> the ids' rank (leading 1s), then broadcast to the result
    shape = [weight.shape[1]] if ids.dim() == 0 else \
        [1] * (ids.dim() - 1) + [n, weight.shape[1]]
    if list(rows.shape) != shape:
        rows = low.emit(node, "reshape", [rows], torch.empty(shape, device="meta",
                                                             dtype=weight.val.dtype),
                        shape=shape)
    if shape == list(out_val.shape):
        return rows
    return Expanded(rows, list(out_val.shape))


def materialize_expand(low, node, e):
    """An expand read as a plain tensor (cat's operand: ViT's class token
    broadcast over the batch): copies along each broadcast dim with cat."""
    x = e.base
    shape = list(e.shape)
    if len(x.shape) < len(shape):
        lead = [1] * (len(shape) - len(x.shape)) + x.shape
        x = low.emit(node, "reshape", [x], torch.empty(lead, dtype=x.val.dtype, device="meta"),
                     shape=lead)
    for d, n in enumerate(shape):
        if x.shape[d] == 1 and n > 1:
            out = x.shape[:d] + [n] + x.shape[d + 1:]
            x = low.emit(node, "cat", [x] * n, torch.empty(out, dtype=x.val.dtype,
                                                          device="meta"), dim=d)
    return x


def hf_cat_expanded(low, node, tensors, dim=0):
    from .aten import Expanded
    if not any(isinstance(t, Expanded) for t in tensors):
        return None
    ts = [materialize_expand(low, node, t) if isinstance(t, Expanded) else low.tensor(node, t)
          for t in tensors]
    return low.emit(node, "cat", ts, node.meta["val"], dim=dim % len(ts[0].shape))


def hf_view_expanded(low, node, x, *rest, **kw):
    """A reshape of an expand (HF's repeat_kv for grouped-query attention:
    [B, kv, 1, T, D] expanded to [B, kv, n, T, D], viewed as [B, kv*n, T, D]):
    the expand copied with cat, then reshaped. A repeat of heads is recorded
    (low.repeated_heads: the result's name to the unrepeated base), so an
    attention op reading it reads the base instead (aten.attention_kv)."""
    from .aten import Expanded
    out = list(node.meta["val"].shape)
    if not isinstance(x, Expanded) or out == x.shape:
        return None
    y = low.reshape(node, materialize_expand(low, node, x), out)
    b, e = list(x.base.shape), x.shape
    heads_repeated = (isinstance(x.base, G) and len(b) >= 4 and len(b) == len(e) and
                      b[-3] == 1 and b[:-3] == e[:-3] and b[-2:] == e[-2:] and
                      out == e[:-4] + [e[-4] * e[-3]] + e[-2:])
    if heads_repeated:
        # the copies are left unread (removed as dead code) if nothing but
        # attention reads them
        low.__dict__.setdefault("repeated_heads", {})[y.name] = x.base
    return y


HF_RULES = {
    aten.mul.Tensor: hf_mul,
    aten.add.Tensor: hf_add,
    aten.neg.default: hf_neg,
    aten.cat.default: hf_cat,
    aten.scaled_dot_product_attention.default: hf_sdpa,
    aten.embedding.default: hf_embedding,
    aten.where.self: hf_where,
    aten.view.default: hf_view_expanded,
    aten._unsafe_view.default: hf_view_expanded,
    aten.reshape.default: hf_view_expanded,
}
# Ops of a mixture of experts whose results' shapes or placement depend on
# the router's values (which tokens an expert gets, how many). The router's
# topk itself is static (graph ops topk and gather); so is Hugging Face's
# "batched_mm" experts forward, which the exporter selects (aten.py).
_ROUTING_OPS = ("sort", "argsort", "nonzero", "histc", "bincount", "index_put",
                "index_add", "grouped_mm", "_grouped_mm", "scatter_add")
_MOE_CLASS_WORDS = ("moe", "expert", "router", "topk")


def _op_name(node):
    return getattr(node.target, "__name__", str(node.target)).split(".")[0]


def mixture_of_experts(node):
    """The reason to give for an unmapped op inside a mixture-of-experts block
    (a module whose class names experts, a router or MoE) that routes tokens
    by value: the op itself, or a later op of the same block, is a routing op.
    Else None."""
    stack = node.meta.get("nn_module_stack") or {}
    classes = [(path, c.__name__ if isinstance(c, type) else str(c).rsplit(".", 1)[-1])
               for path, c in stack.values()]
    moe = [(p, c) for p, c in classes if any(w in c.lower() for w in _MOE_CLASS_WORDS)]
    if not moe:
        return None
    path, cls = moe[0]
    routing = node if _op_name(node) in _ROUTING_OPS else None
    later = node.next
    while routing is None and later is not None and later.op != "output":
        later_stack = later.meta.get("nn_module_stack") or {}
        if later.op == "call_function" and _op_name(later) in _ROUTING_OPS and \
                any(p == path for p, _ in later_stack.values()):
            routing = later
        later = later.next
    if routing is None:
        return None
    return ("value-dependent routing of a mixture of experts (%s at %s): %s sends each "
            "token to the experts its router's values pick, so how many tokens an expert "
            "gets is data, which shardc's static graph does not express (no graph op for "
            "%s); Hugging Face experts are exported through their static \"batched_mm\" "
            "forward (docs/exporter.md), a hand-written loop over experts is not "
            "supported" % (cls, path or "<root>", _op_name(routing), routing.target))


# Ops with no value: checks torch.export leaves in the graph.
NO_VALUE = {aten._assert_tensor_metadata.default}


# ------------------------------------------------------------ RMSNorm modules

_RMS_OPS = {aten.pow.Tensor_Scalar, aten.mean.dim, aten.add.Tensor, aten.rsqrt.default,
            aten.mul.Tensor, aten._to_copy.default, aten._assert_tensor_metadata.default}


def _module_of(node):
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return None, None
    path, cls = list(stack.values())[-1]
    name = cls.__name__ if isinstance(cls, type) else str(cls).rsplit(".", 1)[-1]
    return path, name


def rms_norm_groups(ep, param_of):
    """Nodes of RMSNorm modules: {node: ("skip", path) | ("out", x, weight, eps,
    plus_one)} for each module call whose ATen ops are exactly RMSNorm's."""
    groups = {}
    for n in ep.graph.nodes:
        if n.op != "call_function":
            continue
        path, cls = _module_of(n)
        if path is not None and (cls.endswith("RMSNorm") or cls == "T5LayerNorm"):
            groups.setdefault(path, []).append(n)
    out = {}
    for path, nodes in groups.items():
        # one call per module path in HF models (each norm is called once)
        ops = [n for n in nodes if n.target is not aten._assert_tensor_metadata.default]
        if any(n.target not in _RMS_OPS for n in ops):
            continue
        pows = [n for n in ops if n.target is aten.pow.Tensor_Scalar]
        means = [n for n in ops if n.target is aten.mean.dim]
        rs = [n for n in ops if n.target is aten.rsqrt.default]
        if len(pows) != 1 or len(means) != 1 or len(rs) != 1 or pows[0].args[1] != 2:
            continue
        if list(means[0].args[1]) not in ([-1], [len(means[0].args[0].meta["val"].shape) - 1]):
            continue
        x = pows[0].args[0]
        if x in nodes:
            # The norm computes in another dtype than its input (bfloat16
            # parameters, --param-dtype: HF upcasts to float32, rounds the
            # normalized value back, then multiplies by the weight): the
            # graph's rms_norm rounds once, so these go op by op, exactly.
            continue
        adds = [n for n in ops if n.target is aten.add.Tensor]
        eps_add = [n for n in adds if n.args[0] is means[0] and
                   isinstance(n.args[1], (int, float))]
        w_adds = [n for n in adds if n not in eps_add]
        weights = [a for n in ops for a in n.args if isinstance(a, torch.fx.Node) and
                   a.op == "placeholder" and param_of(a) is not None]
        if len(eps_add) != 1 or len(set(weights)) != 1 or len(w_adds) > 1:
            continue
        plus_one = False
        if w_adds:
            wa = w_adds[0]
            if not (wa.args[0] is weights[0] and wa.args[1] == 1) and \
                    not (wa.args[1] is weights[0] and wa.args[0] == 1):
                continue
            plus_one = True
        last = ops[-1]
        for n in nodes:
            out[n] = ("skip", path)
        out[last] = ("out", x, weights[0], float(eps_add[0].args[1]), plus_one)
    return out


# transformers.activations classes that write gelu's tanh form out by hand
# (NewGELUActivation: GPT-2, Phi; GELUTanh; FastGELUActivation with the
# constant rounded to 0.7978845608, within 1e-9 of sqrt(2/pi)).
_GELU_TANH_CLASSES = ("NewGELUActivation", "GELUTanh", "FastGELUActivation")
_GELU_OPS = {aten.mul.Tensor, aten.pow.Tensor_Scalar, aten.add.Tensor, aten.tanh.default}


def gelu_tanh_groups(ep):
    """{node: ("skip", path) | ("gelu", x)} for each call of a tanh-GELU
    module whose ATen ops are only mul / pow / add / tanh on one input."""
    groups = {}
    for n in ep.graph.nodes:
        if n.op != "call_function":
            continue
        path, cls = _module_of(n)
        if path is not None and cls in _GELU_TANH_CLASSES:
            groups.setdefault(path, []).append(n)
    out = {}
    for path, nodes in groups.items():
        inside = set(nodes)
        if any(n.target not in _GELU_OPS for n in nodes) or \
                sum(n.target is aten.tanh.default for n in nodes) != 1:
            continue
        outer = {a for n in nodes for a in n.args
                 if isinstance(a, torch.fx.Node) and a not in inside}
        last = nodes[-1]
        if len(outer) != 1 or any(u not in inside for n in nodes[:-1] for u in n.users):
            continue
        for n in nodes:
            out[n] = ("skip", path)
        out[last] = ("gelu", outer.pop())
    return out


def lower_fused(low, node, spec):
    """The last node of a fused module call: its one graph node."""
    if spec[0] == "gelu":
        x = low.tensor(node, low.vals[spec[1]])
        return low.emit(node, "gelu", [x], node.meta["val"], approximate="tanh")
    return lower_rms(low, node, spec)


def fused_modules(ep, param_of):
    """Every module call lowered as one fused graph node (RMSNorm, tanh-GELU)."""
    out = rms_norm_groups(ep, param_of)
    out.update(gelu_tanh_groups(ep))
    return out


def lower_rms(low, node, spec):
    _, x, w, eps, plus_one = spec
    xv, wv = low.tensor(node, low.vals[x]), low.tensor(node, low.vals[w])
    if plus_one:
        wv = low.emit(node, "add", [wv, low.const(1.0, wv)], wv.val)
    return low.emit(node, "rms_norm", [xv, wv], node.meta["val"], eps=eps)
