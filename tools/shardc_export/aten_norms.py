"""torch.linalg.vector_norm (F.normalize, torch.norm, SwinV2's cosine
attention): kept whole rather than decomposed, because torch differentiates
it as one op. Its decomposition, (sum |x|^p)^(1/p), has an infinite slope
at a norm of 0 (a zero vector: SwinV2's padded window tokens, whose key
bias is 0), and there 0 * inf gives NaN; torch's norm gradient is 0 there.

The graph form: s = sum |x|^p (x * x for p = 2), then the root of s where s
is not 0 and 0 where it is, the root taken of where(s == 0, 1, s) so its
gradient is finite everywhere (the "double where"): the same values, and
torch's masked gradient. p = 1 is sum |x| and p = inf max |x| (no root)."""

import math

import torch

from .aten_values import _meta, where_of


def vector_norm(low, node, x, ord=2, dim=None, keepdim=False, dtype=None):
    x = low.tensor(node, x)
    out = node.meta["val"]
    if dtype is not None and dtype != x.val.dtype:
        low.fail(node, "a norm into another dtype (%s) has no graph op" % dtype)
    p = float(ord)
    if p <= 0 or math.isnan(p):
        low.fail(node, "vector_norm of order %s has no graph form (orders > 0 and inf)" % ord)
    attrs = {"keepdim": int(bool(keepdim))}
    if isinstance(dim, int):
        dim = [dim]
    if dim:
        attrs["dims"] = [int(d) for d in dim]
    size = _meta(x.shape, x.val.dtype)
    magnitude = x if p == 2 else low.emit(node, "abs", [x], size)
    if math.isinf(p):
        return low.emit(node, "amax", [magnitude], out, **attrs)
    if p == 1:
        return low.emit(node, "sum", [magnitude], out, **attrs)
    powered = (low.emit(node, "mul", [x, x], size) if p == 2 else
               low.emit(node, "pow_scalar", [magnitude], size, exponent=p))
    total = low.emit(node, "sum", [powered], out, **attrs)
    zero = low.emit(node, "eq", [total], _meta(out.shape, torch.bool), value=0.0)
    safe = where_of(low, node, zero, 1.0, total, out.dtype)
    root = (low.emit(node, "sqrt_out", [safe], out) if p == 2 else
            low.emit(node, "pow_scalar", [safe], out, exponent=1.0 / p))
    return where_of(low, node, zero, 0.0, root, out.dtype)


def rules(aten):
    return {aten.linalg_vector_norm.default: vector_norm}
