"""ATen rules for integer values, comparisons and dtype conversion: the graph
ops eq/ne/lt/le/gt/ge, cast and cumsum (docs/ops.md, "Integer values").

torch's bool and narrower integer values are carried as int64 with the same
values (graph_emitter.value_dtype), so a conversion between them is no op; a
conversion to bool is `ne 0`; any other changes the graph dtype with `cast`.
RoBERTa's position ids (`input_ids.ne(pad).int()`, `cumsum`, `* mask`,
`.long() + pad`) and mixed-precision upcasts (`x.float()`, `.to(dtype)`) go
through here."""

import torch

from . import aten_consts as hf
from .graph_emitter import G, value_dtype


def _meta(shape, dtype):
    return torch.empty(list(shape), dtype=dtype, device="meta")


def cast_to(low, node, x, dtype):
    """Graph tensor x as a value of torch dtype `dtype`: x itself when the
    graph dtype is already the same, `ne 0` for bool (torch: nonzero and NaN
    are True), else a cast."""
    want = value_dtype(dtype)
    if want is None:
        low.fail(node, "dtype %s has no graph dtype" % dtype)
    if dtype == torch.bool and x.val.dtype != torch.bool:
        return low.emit(node, "ne", [x], _meta(x.shape, dtype), value=0.0)
    if value_dtype(x.val.dtype) == want:
        return x if x.val.dtype == dtype else G(x.name, _meta(x.shape, dtype))
    return low.emit(node, "cast", [x], _meta(x.shape, dtype), dtype=want)


def _lazy_base(low, node, v):
    """(graph tensor, shape to re-expand to or None): an Expanded view's base
    (elementwise ops commute with the expand), a Lazy materialized."""
    from .aten import Expanded
    if isinstance(v, hf.Lazy):
        v = v.materialize(low, node)
    if isinstance(v, Expanded):
        return v.base, v.shape
    return low.tensor(node, v), None


def _reexpand(g, shape):
    from .aten import Expanded
    return g if shape is None or list(g.shape) == list(shape) else Expanded(g, shape)


def to_copy(low, node, x, dtype=None, layout=None, device=None, pin_memory=None,
            non_blocking=False, memory_format=None):
    """x.to(dtype) (also .float(), .long(), .type_as(), .bool())."""
    base, shape = _lazy_base(low, node, x)
    dtype = node.meta["val"].dtype
    if shape is None and list(base.shape) != low.out_shape(node):
        low.fail(node, "expected the shape to be kept")
    return _reexpand(cast_to(low, node, base, dtype), shape)


def _scalar(v):
    return isinstance(v, (bool, int, float))


def compare(op):
    """eq/ne/lt/le/gt/ge, .Scalar and .Tensor: one graph tensor against a
    Python number (the op's `value`), or two of one dtype (torch's promotion:
    both cast to the promoted dtype)."""
    def rule(low, node, a, b):
        out = node.meta["val"]
        if _scalar(b) or (isinstance(b, hf.Const) and b.t.numel() == 1 and b.t.dim() == 0):
            value = b if _scalar(b) else b.t.item()
            base, shape = _lazy_base(low, node, a)
            y = low.emit(node, op, [base], _meta(base.shape, out.dtype), value=float(value))
            return _reexpand(y, shape)
        from .aten import Expanded, operand
        bases = [_lazy_base(low, node, v)[0] if isinstance(v, (G, Expanded, hf.Lazy)) else None
                 for v in (a, b)]
        like = bases[0] if bases[0] is not None else bases[1]
        if like is None:
            low.fail(node, "both operands are constants")
        a_base, b_base = (g if g is not None else operand(low, node, v, like)
                          for g, v in zip(bases, (a, b)))
        common = torch.promote_types(a_base.val.dtype, b_base.val.dtype)
        a_base, b_base = (cast_to(low, node, v, common) for v in (a_base, b_base))
        both = list(torch.broadcast_shapes(tuple(a_base.shape), tuple(b_base.shape)))
        y = low.emit(node, op, [a_base, b_base], _meta(both, out.dtype))
        return _reexpand(y, list(out.shape))
    return rule


def sign(low, node, x):
    """torch.sign (LPPool's and softshrink's decompositions): (x > 0) - (x < 0)
    in x's dtype. A NaN gives 0 where torch gives NaN (both comparisons are
    false). The comparisons carry no gradient, as sign's is zero."""
    base, shape = _lazy_base(low, node, x)
    out = node.meta["val"]
    up, down = (cast_to(low, node, low.emit(node, op, [base], _meta(base.shape, torch.int64),
                                             value=0.0), out.dtype)
                for op in ("gt", "lt"))
    return _reexpand(low.emit(node, "sub", [up, down], _meta(base.shape, out.dtype)), shape)


def clamp_tensor(low, node, x, min=None, max=None):
    """torch.clamp with tensor bounds (cosine_similarity's eps floor):
    where(x < min, min, x), then where(y > max, max, y). x's gradient passes
    where min <= x <= max, a bound's where it is the result, as torch's; a
    NaN in x stays NaN (both comparisons are false). A bound given as a
    number goes through as one."""
    out = node.meta["val"]
    y = _lazy_base(low, node, x)[0]
    for bound, op in ((min, "lt"), (max, "gt")):
        if bound is None:
            continue
        b = _operand_or_number(low, node, bound)
        if _scalar(b):
            cond = low.emit(node, op, [y], _meta(y.shape, torch.int64), value=float(b))
        else:
            b = cast_to(low, node, b, out.dtype)
            both = list(torch.broadcast_shapes(tuple(y.shape), tuple(b.shape)))
            cond = low.emit(node, op, [y, b], _meta(both, torch.int64))
        y = where_of(low, node, cond, b, y, out.dtype)
    return _reexpand(y, list(out.shape))


def cumsum(low, node, x, dim, dtype=None):
    x = low.tensor(node, x)
    out = node.meta["val"]
    x = cast_to(low, node, x, out.dtype)
    return low.emit(node, "cumsum", [x], out, dim=int(dim))


def _bool_only(rule):
    """bitwise_* on bool only: on other integers they are bit operations."""
    def checked(low, node, *args):
        if node.meta["val"].dtype != torch.bool:
            low.fail(node, "bitwise operations on %s have no graph op (on bool they are "
                     "logical)" % node.meta["val"].dtype)
        return rule(low, node, *args)
    return checked


def logical_not(low, node, x):
    """~mask, logical_not(x): x == 0 (on bool as int64 1/0, and on any x as torch)."""
    base, shape = _lazy_base(low, node, x)
    return _reexpand(low.emit(node, "eq", [base], _meta(base.shape, torch.bool), value=0.0),
                     shape)


def isnan(low, node, x):
    """torch.isnan(x): x != x, true only for NaN (F.kl_div's xlogy and
    nan_to_num reach it)."""
    base, shape = _lazy_base(low, node, x)
    return _reexpand(low.emit(node, "ne", [base, base], _meta(base.shape, torch.bool)), shape)


def any_or_all(reduce):
    """x.any(dims) / x.all(dims) (F.one_hot checks its classes with them):
    amax / amin of x as bool (int64 1/0) over the dims, through the
    reduction rule (an integer reduction goes through float64 and back)."""
    def rule(low, node, x, dim=None, keepdim=False):
        from .aten import reduction
        as_bool = cast_to(low, node, _lazy_base(low, node, x)[0], torch.bool)
        return reduction(reduce)(low, node, as_bool, dim, keepdim)
    return rule


def extremum(take_b_if):
    """torch.maximum / minimum (nn.BCELoss clamps its logs with
    maximum(log p, -100)): where(a <op> b, b, a), `take_b_if` "lt" for
    maximum, "gt" for minimum. A NaN in a is kept (the comparison is false);
    a NaN in b is not (torch keeps both); at a tie the gradient goes to a
    (torch splits it)."""
    flipped = {"lt": "gt", "gt": "lt"}[take_b_if]

    def rule(low, node, a, b):
        out = node.meta["val"]
        a, b = (_operand_or_number(low, node, v) for v in (a, b))
        if _scalar(a) and _scalar(b):
            low.fail(node, "both operands are numbers")
        if _scalar(b):
            cond = low.emit(node, take_b_if, [a], _meta(a.shape, torch.bool), value=float(b))
        elif _scalar(a):
            cond = low.emit(node, flipped, [b], _meta(b.shape, torch.bool), value=float(a))
        else:
            both = list(torch.broadcast_shapes(tuple(a.shape), tuple(b.shape)))
            a, b = (cast_to(low, node, v, out.dtype) for v in (a, b))
            cond = low.emit(node, take_b_if, [a, b], _meta(both, torch.bool))
        return _reexpand(where_of(low, node, cond, b, a, out.dtype), list(out.shape))
    return rule


def assert_async(low, node, *args, **kwargs):
    """torch._assert_async(cond, msg) (F.one_hot's class range, a
    torch._check on values): a check of values at run time, which the graph
    has no op for; left out, so out-of-range input is not reported there."""
    return None


def _bool_operands(low, node, a, b):
    """Two mask operands as bool graph tensors (an expand's base: the ops
    broadcast) and their broadcast shape."""
    a, b = (cast_to(low, node, _lazy_base(low, node, v)[0], torch.bool) for v in (a, b))
    return a, b, list(torch.broadcast_shapes(tuple(a.shape), tuple(b.shape)))


def logical_and(low, node, a, b):
    """mask & mask: the product of two 1/0 values. The and of a computed mask
    with a constant one (transformers' padding & causal masks) is recorded,
    so that attention can take the constant part as its causal flag
    (aten_consts.attention_with_bias) and leave this product unread."""
    const_first = isinstance(a, hf.Const) and not isinstance(b, hf.Const)
    const_second = isinstance(b, hf.Const) and not isinstance(a, hf.Const)
    const = a if const_first else b if const_second else None
    ga, gb, both = _bool_operands(low, node, a, b)
    y = low.emit(node, "mul", [ga, gb], _meta(both, torch.bool))
    if const is not None:
        # (the constant, the computed operand as a bool graph tensor)
        low.__dict__.setdefault("and_with_const", {})[y.name] = (
            const.t.bool(), gb if const_first else ga)
    return _reexpand(y, list(node.meta["val"].shape))


def logical_or(low, node, a, b):
    """mask | mask: (a + b) != 0 on 1/0 values."""
    a, b, both = _bool_operands(low, node, a, b)
    s = low.emit(node, "add", [a, b], _meta(both, torch.int64))
    y = low.emit(node, "ne", [s], _meta(both, torch.bool), value=0.0)
    return _reexpand(y, list(node.meta["val"].shape))


def where_of(low, node, cond, a, b, dtype):
    """where(cond, a, b) as a graph tensor of torch dtype `dtype`: cond a
    graph tensor (cast to bool), a and b graph tensors or Python numbers
    (0-d fills); the result has the broadcast shape of the three."""
    like = G("", _meta([], dtype))
    cond = cast_to(low, node, low.tensor(node, cond), torch.bool)
    a, b = (low.const(v, like) if _scalar(v) else cast_to(low, node, v, dtype) for v in (a, b))
    shape = list(torch.broadcast_shapes(tuple(cond.shape), tuple(a.shape), tuple(b.shape)))
    return low.emit(node, "where", [cond, a, b], _meta(shape, dtype))


def _operand_or_number(low, node, v):
    """An elementwise operand of where / masked_fill: a Python number as it
    is, a 0-d constant as its number, else the graph tensor (an expand's base:
    where broadcasts)."""
    if _scalar(v):
        return v
    if isinstance(v, hf.Const) and v.t.numel() == 1:
        return v.t.item()
    return _lazy_base(low, node, v)[0]


def where(low, node, cond, a, b):
    """torch.where(cond, a, b) on a computed condition (a constant one is
    folded or taken by aten_consts.hf_where first)."""
    out = node.meta["val"]
    cond = _lazy_base(low, node, cond)[0]
    y = where_of(low, node, cond, _operand_or_number(low, node, a),
                 _operand_or_number(low, node, b), out.dtype)
    return _reexpand(y, list(out.shape))


def masked_fill(low, node, x, mask, value):
    """x.masked_fill(mask, value): where(mask, value, x)."""
    out = node.meta["val"]
    y = where_of(low, node, _lazy_base(low, node, mask)[0], _operand_or_number(low, node, value),
                 _lazy_base(low, node, x)[0], out.dtype)
    return _reexpand(y, list(out.shape))


def scatter_value(low, node, base, dim, index, value):
    """base.scatter(dim, index, value) along the last dim, index holding
    columns per row (DeepSeek-V3's router marks its chosen expert groups:
    zeros.scatter_(1, group_idx, 1)): where(index holds column c, value,
    base), the columns found by comparing index with 0..C-1 (eq, then any
    over index's entries: amax), so a column named twice is set once, as
    torch sets it."""
    from .aten import Expanded
    out = node.meta["val"]
    base, index = (hf.materialize_expand(low, node, v) if isinstance(v, Expanded)
                   else low.tensor(node, v) for v in (base, index))
    rank = len(base.shape)
    dim = int(dim) % max(rank, 1)
    if rank == 0 or dim != rank - 1 or len(index.shape) != rank or \
            index.shape[:-1] != base.shape[:-1]:
        low.fail(node, "scatter of a value into %s along dim %d with an index of shape %s "
                 "(the graph writes it for the last dim, index with base's other dims)"
                 % (base.shape, dim, index.shape))
    columns = hf.materialize(low, node, hf.Const(torch.arange(base.shape[-1])))
    entries = index.shape + [1]
    column = low.emit(node, "reshape", [index], _meta(entries, torch.int64), shape=entries)
    hits = index.shape + [base.shape[-1]]
    hit = cast_to(low, node, low.emit(node, "eq", [column, columns], _meta(hits, torch.bool)),
                  torch.float32)  # amax reduces floats: 1.0 / 0.0, exact
    any_hit = low.emit(node, "amax", [hit], _meta(base.shape, torch.float32), dims=[rank - 1],
                       keepdim=0)
    return where_of(low, node, any_hit, float(value), base, out.dtype)


def scatter_src(low, node, base, dim, index, src):
    """base.scatter(dim, index, src) along the last dim, index and src [..., K]
    (Llama 4's router: full(-inf).scatter_(1, top_indices, top_values)):
    column c of a row takes the src entry whose index names c, else keeps
    base. As graph ops: index compared with 0..C-1 ([..., K, C]), src where
    it hits and -inf elsewhere, amax over the K entries, and where any hit
    that maximum, else base. A column named twice takes the larger of its
    values, one of those torch may write (its order is unspecified)."""
    from .aten import Expanded
    out = node.meta["val"]
    base, index, src = (hf.materialize_expand(low, node, v) if isinstance(v, Expanded)
                        else low.tensor(node, v) for v in (base, index, src))
    rank = len(base.shape)
    dim = int(dim) % max(rank, 1)
    if rank == 0 or dim != rank - 1 or len(index.shape) != rank or \
            index.shape[:-1] != base.shape[:-1] or src.shape != index.shape or \
            not out.is_floating_point():
        low.fail(node, "scatter of %s into %s along dim %d with an index of shape %s (the graph "
                 "writes it for floating values along the last dim, index and src of one shape "
                 "with base's other dims)" % (src.shape, base.shape, dim, index.shape))
    columns = hf.materialize(low, node, hf.Const(torch.arange(base.shape[-1])))
    entries = index.shape + [1]
    column = low.emit(node, "reshape", [index], _meta(entries, torch.int64), shape=entries)
    hits = index.shape + [base.shape[-1]]
    hit = low.emit(node, "eq", [column, columns], _meta(hits, torch.bool))
    value = low.emit(node, "reshape", [cast_to(low, node, src, out.dtype)],
                     _meta(entries, out.dtype), shape=entries)
    written = where_of(low, node, hit, value, float("-inf"), out.dtype)
    largest = low.emit(node, "amax", [written], _meta(base.shape, out.dtype), dims=[rank - 1],
                       keepdim=0)
    any_hit = low.emit(node, "amax", [cast_to(low, node, hit, torch.float32)],
                       _meta(base.shape, torch.float32), dims=[rank - 1], keepdim=0)
    return where_of(low, node, any_hit, largest, cast_to(low, node, base, out.dtype), out.dtype)


def histc(low, node, x, bins=100, min=0, max=0):
    """torch.histc over a fixed range (the mixture-of-experts load-balancing
    loss counts each expert's tokens with it): element v falls in bin
    int((v - min) * bins / (max - min)) in x's dtype, as torch's CPU kernel
    computes it, v == max in the last bin, values outside [min, max] and NaN
    in none. As graph ops: that bin index per element (cast to int64), one
    comparison with the bins' numbers ([M, bins] int64, a one-hot row per
    element) and a sum over the elements. The counts carry no gradient (as
    torch's)."""
    from .const_data import index_buffer
    if min == max:
        low.fail(node, "histc with min == max takes its range from the data's own minimum and "
                       "maximum, which a static graph cannot; give the range")
    # Integer values (transformers counts int32 indices when it traces on
    # the meta device) are binned and counted in float32: exact below 2^24.
    out = node.meta["val"].dtype
    dtype = out if out.is_floating_point else torch.float32
    base = cast_to(low, node, _lazy_base(low, node, x)[0], dtype)
    count, bins = base.val.numel(), int(bins)
    flat = low.emit(node, "reshape", [base], _meta([count, 1], dtype), shape=[count, 1])
    scaled = low.emit(node, "sub", [flat, low.const(min, flat)], _meta([count, 1], dtype))
    scaled = low.emit(node, "mul", [scaled, low.const(bins, flat)], _meta([count, 1], dtype))
    scaled = low.emit(node, "div", [scaled, low.const(max - min, flat)], _meta([count, 1], dtype))
    index = cast_to(low, node, scaled, torch.int64)
    index = where_of(low, node, low.emit(node, "eq", [flat], _meta([count, 1], torch.bool),
                                         value=float(max)),
                     bins - 1, index, torch.int64)
    inside = low.emit(node, "mul", [
        low.emit(node, "ge", [flat], _meta([count, 1], torch.int64), value=float(min)),
        low.emit(node, "le", [flat], _meta([count, 1], torch.int64), value=float(max))],
        _meta([count, 1], torch.int64))
    numbers = index_buffer(low, torch.arange(bins, dtype=torch.int64).reshape(1, bins))
    if numbers is None:
        low.fail(node, "histc with %d bins: too many for the graph's constant index data" % bins)
    hot = low.emit(node, "eq", [index, numbers], _meta([count, bins], torch.int64))
    hot = low.emit(node, "mul", [hot, inside], _meta([count, bins], torch.int64))
    hot = cast_to(low, node, hot, dtype)
    counts = low.emit(node, "sum", [hot], _meta([bins], dtype), dims=[0], keepdim=0)
    return cast_to(low, node, counts, out)


def rules(aten):
    table = {
        aten.histc.default: histc,
        aten._to_copy.default: to_copy,
        aten.cumsum.default: cumsum,
        aten.sign.default: sign,
        aten.clamp.Tensor: clamp_tensor,
        aten.where.self: where,
        aten.scatter.value: scatter_value,
        aten.scatter.src: scatter_src,
        aten.masked_fill.Scalar: masked_fill,
        aten.masked_fill.Tensor: masked_fill,
        aten.logical_not.default: logical_not,
        aten.bitwise_not.default: _bool_only(logical_not),
        aten.logical_and.default: logical_and,
        aten.logical_or.default: logical_or,
        aten.bitwise_and.Tensor: _bool_only(logical_and),
        aten.bitwise_or.Tensor: _bool_only(logical_or),
        aten.isnan.default: isnan,
        aten.maximum.default: extremum("lt"),
        aten.minimum.default: extremum("gt"),
        aten.any.default: any_or_all("amax"),
        aten.any.dim: any_or_all("amax"),
        aten.any.dims: any_or_all("amax"),
        aten.all.default: any_or_all("amin"),
        aten.all.dim: any_or_all("amin"),
        aten.all.dims: any_or_all("amin"),
        aten._assert_async.msg: assert_async,
        aten._assert_async.default: assert_async,
    }
    for name in ("eq", "ne", "lt", "le", "gt", "ge"):
        op = getattr(aten, name)
        table[op.Scalar] = compare(name)
        table[op.Tensor] = compare(name)
    return table
