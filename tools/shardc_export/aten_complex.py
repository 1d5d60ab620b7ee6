"""Complex values as pairs of reals: rotary embeddings written with complex
numbers (Llama 4's `apply_rotary_emb`, Meta's original Llama code):

    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xq_out = torch.view_as_real(xq_ * freqs_cis[:, :, None, :]).flatten(3)

The graph has no complex dtype. A complex tensor [..., n] made by
`view_as_complex` is kept as the real tensor it views, [..., n, 2] (real
part, imaginary part), so `view_as_complex` and `view_as_real` are the same
graph tensor, and a product with a constant complex table (`freqs_cis`,
folded by the capture: it depends on positions only) or another pair is
written with real ops on the two halves:

    (a + bi)(c + di) = (ac - bd) + (ad + bc)i

Anything else on a complex value is refused, naming the op."""

import torch

from .graph_emitter import G
from . import aten_consts as hf


class ComplexPair:
    """A complex graph value: `pair` is the real graph tensor [..., n, 2]
    holding it, `val` the complex meta tensor [..., n] torch sees."""

    def __init__(self, pair, val):
        self.pair, self.val = pair, val

    @property
    def shape(self):
        return list(self.val.shape)


def _real_meta(shape, like):
    return torch.empty(shape, dtype=like.val.dtype, device="meta")


def view_as_complex(self, node, x):
    if not isinstance(x, G):
        self.fail(node, "view_as_complex of a value that is not a plain graph tensor")
    if not x.shape or x.shape[-1] != 2:
        self.fail(node, "view_as_complex needs a last dim of 2, got shape %s" % x.shape)
    return ComplexPair(x, node.meta["val"])


def view_as_real(self, node, z):
    if not isinstance(z, ComplexPair):
        self.fail(node, "view_as_real of a complex value the exporter did not make "
                  "with view_as_complex")
    return G(z.pair.name, node.meta["val"])


def _halves(self, node, v, like):
    """(real part, imaginary part) of a pair, a constant or a real scalar, each
    shaped [..., n, 1] so they broadcast against the pair's halves."""
    if isinstance(v, ComplexPair):
        p = v.pair
        half = p.shape[:-1] + [1]
        return tuple(self.emit(node, "slice", [p], _real_meta(half, p), dim=len(p.shape) - 1,
                               start=k, end=k + 1, step=1) for k in (0, 1))
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return self.const(float(v), like), None
    if isinstance(v, hf.Const):
        t = v.t
        if t.is_complex():
            pair = torch.view_as_real(t.to(torch.complex128 if like.val.dtype == torch.float64
                                           else torch.complex64))
            parts = (pair[..., 0:1], pair[..., 1:2])
        else:
            parts = (t.to(like.val.dtype).unsqueeze(-1), None)
        return tuple(None if c is None else _table(self, node, c, like) for c in parts)
    self.fail(node, "a complex product with an operand that is neither a complex value, "
              "a constant nor a number")


def _table(self, node, t, like):
    """A constant part (cos or sin of a rotary table) as constant data, one
    copy along each dim it repeats on (the product broadcasts), shared by
    every layer that reads the same values."""
    from .aten import Expanded
    from .const_data import data_buffer
    if t.numel() == 1:
        return self.const(float(t.reshape(-1)[0]), like)
    for d in range(t.dim()):
        if t.shape[d] > 1 and bool((t == t.narrow(d, 0, 1)).all()):
            t = t.narrow(d, 0, 1)
    table = data_buffer(self, t.contiguous(), like.val.dtype)
    if table is None:
        self.fail(node, "a complex product with a constant table of shape %s: more than 2^20 "
                  "elements of constant data" % list(t.shape))
    return table.base if isinstance(table, Expanded) else table


def complex_mul(self, node, a, b):
    """a * b where a or b is a ComplexPair (the other a pair, a constant or a
    number): (ar + ai i)(br + bi i) on the halves, then the halves side by
    side again."""
    like = (a if isinstance(a, ComplexPair) else b).pair
    ar, ai = _halves(self, node, a, like)
    br, bi = _halves(self, node, b, like)
    out_shape = list(node.meta["val"].shape) + [2]
    half = _real_meta(out_shape[:-1] + [1], like)

    def mul(x, y):
        shape = list(torch.broadcast_shapes(tuple(x.shape), tuple(y.shape)))
        return self.emit(node, "mul", [x, y], _real_meta(shape, like))

    def combine(op, x, y):
        return self.emit(node, op, [x, y], half)

    if ai is None and bi is None:
        self.fail(node, "a complex product of two real operands")
    if bi is None:  # (ar + ai i) * br
        re, im = mul(ar, br), mul(ai, br)
    elif ai is None:
        re, im = mul(ar, br), mul(ar, bi)
    else:
        re = combine("sub", mul(ar, br), mul(ai, bi))
        im = combine("add", mul(ar, bi), mul(ai, br))
    if list(re.shape) != out_shape[:-1] + [1] or list(im.shape) != out_shape[:-1] + [1]:
        self.fail(node, "a complex product whose operands do not broadcast to the result")
    pair = self.emit(node, "cat", [re, im], _real_meta(out_shape, like), dim=len(out_shape) - 1)
    return ComplexPair(pair, node.meta["val"])


SUPPORTED = ("complex values are exported only through view_as_complex, a product (with a "
             "complex constant, a number or another such value) and view_as_real")


def rules(aten, real_rules):
    """view_as_complex, view_as_real, and mul (Tensor and Scalar overloads)
    taking complex pairs, the real rules of `real_rules` otherwise."""
    def with_complex(real_mul):
        def mul(self, node, a, b, *rest, **kw):
            if isinstance(a, ComplexPair) or isinstance(b, ComplexPair):
                return complex_mul(self, node, a, b)
            return real_mul(self, node, a, b, *rest, **kw)
        return mul
    return {aten.view_as_complex.default: view_as_complex,
            aten.view_as_real.default: view_as_real,
            aten.mul.Tensor: with_complex(real_rules[aten.mul.Tensor]),
            aten.mul.Scalar: with_complex(real_rules[aten.mul.Scalar])}
