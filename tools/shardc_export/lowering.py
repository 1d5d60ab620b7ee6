"""Lower a concretely traced torch.fx graph to shardc graph nodes
(docs/graph-format.md, "Nodes"; docs/exporter.md has the mapping table)."""

import math
import operator

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

from .graph_emitter import GRAPH_DTYPES, G, GraphEmitter  # noqa: F401 (re-exported)
from .init_recorder import ExportError, tag_of, to_graph_chain
from .tracer import VAL, where

class Seq:
    def __init__(self, items):
        self.items = items


class Mask:
    """A causal mask recognized from its construction (never a graph value).
    kind: 'keep' (True where j <= i), 'drop' (True where j > i), 'additive'
    (0 where j <= i, -inf elsewhere)."""

    def __init__(self, kind):
        self.kind = kind


class Arange:
    def __init__(self, start, end, step, shape):
        self.start, self.end, self.step, self.shape = start, end, step, list(shape)


class Attn:
    """Pieces of an explicit attention (q @ k^T * scale -> mask -> softmax)."""

    def __init__(self, stage, q, k, scale, causal):
        self.stage, self.q, self.k, self.scale, self.causal = stage, q, k, scale, causal


def mask_kind(expr):
    """Classify a constant's expression tag (init_recorder.MetaFactoryMode)."""
    if expr is None:
        return None
    op = expr[0]
    if op in ("shape", "slice_tl"):
        return mask_kind(expr[1])
    if op == "to":
        return mask_kind(expr[1])
    if op == "tril" and expr[2] == 0 and expr[1][0] == "ones":
        return "keep"
    if op == "triu" and expr[2] == 1 and expr[1][0] == "ones":
        return "drop"
    if op == "triu" and expr[2] == 1 and expr[1][0] == "full" and expr[1][2] == -math.inf:
        return "additive"
    if op in ("eq", "not"):
        inner = mask_kind(expr[1])
        if op == "eq" and expr[2] != 0.0:
            return None
        return {"keep": "drop", "drop": "keep"}.get(inner)
    return None


def arange_of(expr):
    if expr is None:
        return None
    if expr[0] == "arange":
        return expr
    if expr[0] in ("shape", "to"):
        return arange_of(expr[1])
    return None


class Lowering(GraphEmitter):
    def __init__(self, model, gm_graph, tracer, params, buffers, buffer_chains,
                 input_decls, device):
        self.model = model
        self.fx_graph = gm_graph
        self.tracer = tracer
        self.params = params            # id(tensor) -> canonical name
        self.buffers = buffers          # id(tensor) -> name
        self.buffer_chains = buffer_chains  # name -> Chain
        self.input_decls = input_decls  # list of dicts (name, shape, dtype)
        GraphEmitter.__init__(self, params, buffers, input_decls, device)
        self.vals = {}
        self.high = {}                 # input name -> vocabulary size
        self.input_names = {d["name"] for d in input_decls}

    # ------------------------------------------------------------ helpers
    def fail(self, node, why):
        desc = "%s %s" % (node.op, getattr(node.target, "__name__", node.target))
        raise ExportError("cannot export fx node `%s` (%s)%s: %s" % (
            node.name, desc, where(node), why))

    def emit(self, base, op, inputs, val, **attrs):
        return self.append(base, op, inputs, val, attrs)

    def tensor_value(self, node, t, name_hint):
        """A real tensor reached through get_attr: parameter, buffer, constant."""
        if id(t) in self.params:
            return G(self.params[id(t)], t)
        expr = tag_of(t)
        mk = mask_kind(expr)
        if mk:
            return Mask(mk)
        ar = arange_of(expr)
        if ar:
            return Arange(ar[1], ar[2], ar[3], list(t.shape))
        if id(t) in self.buffers:
            name = self.buffers[id(t)]
            if name not in self.graph_buffers:
                if t.dtype not in GRAPH_DTYPES or t.dtype == torch.int64:
                    self.fail(node, "buffer %s has dtype %s" % (name, t.dtype))
                init = to_graph_chain(self.buffer_chains.get(name), list(t.shape),
                                      "buffer " + name)
                self.graph_buffers[name] = {"name": name, "shape": list(t.shape),
                                            "dtype": GRAPH_DTYPES[t.dtype],
                                            "device": self.device, "init": init}
            return G(name, t)
        if expr is not None and expr[0] in ("ones", "zeros", "full") and t.is_floating_point():
            name = self.fresh("const." + name_hint)
            init = [{"op": expr[0]}] if expr[0] != "full" else \
                [{"op": "fill", "value": expr[2]}]
            self.graph_buffers[name] = {"name": name, "shape": list(t.shape),
                                        "dtype": GRAPH_DTYPES[t.dtype],
                                        "device": self.device, "init": init}
            return G(name, t)
        self.fail(node, "a constant tensor %s %s the exporter cannot express "
                  "(only parameters, buffers with recorded init, causal masks, "
                  "aranges and ones/zeros/full constants)" % (list(t.shape), t.dtype))

    def need(self, node, v, what="a tensor"):
        if isinstance(v, G):
            return v
        if isinstance(v, Attn) or isinstance(v, Mask):
            self.fail(node, "this value is part of an attention / causal-mask pattern and "
                      "can only be used as q @ k^T * scale -> masked_fill/+mask -> "
                      "softmax(dim=-1) -> @ v")
        if isinstance(v, Arange):
            self.fail(node, "torch.arange values can only be used as positions of an "
                      "nn.Embedding / F.embedding (exported as a slice of its weight)")
        self.fail(node, "expected %s, got %r" % (what, v))

    # ------------------------------------------------------------ run
    def run(self, output_names=None):
        out_vals = None
        for node in self.fx_graph.nodes:
            if node.op == "placeholder":
                v = node.meta.get(VAL)
                self.vals[node] = G(node.target, v) if node.target in self.input_names else v
            elif node.op == "get_attr":
                t = self.tracer._fetch(node.target)
                self.vals[node] = self.tensor_value(node, t, node.name) \
                    if isinstance(t, torch.Tensor) else t
            elif node.op == "output":
                out_vals = node.args[0]
            else:
                self.vals[node] = self.lower(node)
        outs = []

        def collect(v):
            if isinstance(v, fx.Node):
                v = self.vals[v]
                if isinstance(v, (G, Attn, Mask, Arange)):
                    outs.append((v, None))
                elif isinstance(v, Seq):
                    for x in v.items:
                        outs.append((x, None))
            elif isinstance(v, (tuple, list)):
                for x in v:
                    collect(x)
            elif isinstance(v, dict):
                for x in v.values():
                    collect(x)
        collect(out_vals)
        return self.name_outputs([v for v, _ in outs], output_names)

    # ------------------------------------------------------------ nodes
    def lower(self, node):
        def arg(a):
            if isinstance(a, fx.Node):
                return self.vals[a]
            if isinstance(a, (list, tuple)):
                return type(a)(arg(x) for x in a)
            if isinstance(a, dict):
                return {k: arg(x) for k, x in a.items()}
            if isinstance(a, slice):
                return slice(arg(a.start), arg(a.stop), arg(a.step))
            return a
        args = [arg(a) for a in node.args]
        kwargs = {k: arg(v) for k, v in node.kwargs.items()}
        out = node.meta.get(VAL)
        # non-tensor computations (sizes, arithmetic on ints) are concrete
        if not any(isinstance(x, (G, Seq, Mask, Arange, Attn))
                   for x in _flat(args) + _flat(list(kwargs.values()))):
            if isinstance(out, torch.Tensor):
                return self.tensor_value(node, out, node.name)
            return out
        if node.op == "call_module":
            return self.lower_module(node, self.model.get_submodule(node.target), args,
                                     kwargs, out)
        if node.op == "call_method":
            return self.lower_method(node, node.target, args, kwargs, out)
        return self.lower_function(node, node.target, args, kwargs, out)

    def lower_module(self, node, m, args, kwargs, out):
        base = node.target
        x = args[0] if args else kwargs.get("input")
        if isinstance(m, (nn.Dropout, nn.Identity)):
            return x
        if isinstance(m, nn.Linear):
            w = G(self.params[id(m.weight)], m.weight)
            ins = [self.need(node, x), w]
            if m.bias is not None:
                ins.append(G(self.params[id(m.bias)], m.bias))
            return self.emit(base, "linear", ins, out)
        if isinstance(m, nn.Embedding):
            return self.embedding(node, base, G(self.params[id(m.weight)], m.weight), x, out,
                                  m.padding_idx, m.max_norm)
        if isinstance(m, nn.LayerNorm):
            return self.layer_norm(node, base, x, m.normalized_shape,
                                   G(self.params[id(m.weight)], m.weight) if m.weight is not None else None,
                                   G(self.params[id(m.bias)], m.bias) if m.bias is not None else None,
                                   m.eps, out)
        if isinstance(m, nn.GELU):
            return self.emit(base, "gelu", [self.need(node, x)], out,
                             approximate=getattr(m, "approximate", "none"))
        if isinstance(m, nn.SiLU):
            return self.emit(base, "silu", [self.need(node, x)], out)
        if isinstance(m, nn.ReLU):
            return self.emit(base, "relu", [self.need(node, x)], out)
        if isinstance(m, nn.Softmax):
            return self.softmax(node, base, x, m.dim, None, out)
        name = type(m).__name__
        if name.endswith("RMSNorm"):
            eps = getattr(m, "eps", getattr(m, "variance_epsilon", None))
            if eps is None:
                self.fail(node, "%s has no eps / variance_epsilon attribute" % name)
            return self.emit(base, "rms_norm", [self.need(node, x),
                                                G(self.params[id(m.weight)], m.weight)],
                             out, eps=float(eps))
        if "Rotary" in name:
            xv = self.need(node, x)
            if not isinstance(out, torch.Tensor) or list(out.shape) != xv.shape or \
                    len(xv.shape) != 4:
                self.fail(node, "a rotary module is exported as rotary_embedding only when "
                          "forward(x [B, H, T, D]) returns the rotated x")
            theta = getattr(m, "theta", getattr(m, "base", 10000.0))
            return self.emit(base, "rotary_embedding", [xv], out, theta=float(theta))
        self.fail(node, "module %s has no mapping" % type(m).__name__)

    # -- shared lowerings
    def embedding(self, node, base, w, ids, out, padding_idx=None, max_norm=None):
        if max_norm is not None:
            self.fail(node, "embedding max_norm is not supported")
        if isinstance(ids, Arange):
            if ids.step <= 0:
                self.fail(node, "arange positions with a non-positive step")
            v = self.emit(base, "slice", [w], torch.empty(
                [len(range(ids.start, ids.end, ids.step)), w.shape[1]], dtype=w.val.dtype,
                device="meta"), dim=0, start=int(ids.start), end=int(ids.end))
            if ids.step != 1:
                self.nodes[-1]["step"] = int(ids.step)
            if list(out.shape) != v.shape:
                v = self.emit(base + ".view", "reshape", [v], out, shape=list(out.shape))
            return v
        ids = self.need(node, ids, "token ids")
        if ids.name in self.input_names:
            self.high[ids.name] = w.shape[0]
        return self.emit(base, "embedding", [w, ids], out)

    def layer_norm(self, node, base, x, normalized_shape, w, b, eps, out):
        x = self.need(node, x)
        ns = list(normalized_shape) if isinstance(normalized_shape, (tuple, list, torch.Size)) \
            else [normalized_shape]
        if len(ns) != 1 or ns[0] != x.shape[-1]:
            self.fail(node, "layer_norm over %s: only the last dim is supported" % ns)
        like = torch.empty(ns, dtype=x.val.dtype, device="meta")
        if w is None:
            w = self.filled(base + ".weight", "ones", like)
        if b is None:
            b = self.filled(base + ".bias", "zeros", like)
        return self.emit(base, "layer_norm", [x, w, b], out, eps=float(eps))

    def filled(self, base, op, like):
        name = self.fresh("const." + base)
        self.graph_buffers[name] = {"name": name, "shape": list(like.shape),
                                    "dtype": GRAPH_DTYPES[like.dtype], "device": self.device,
                                    "init": [{"op": op}]}
        return G(name, like)

    def softmax(self, node, base, x, dim, dtype, out):
        if isinstance(x, Attn) and x.stage == "masked":
            if dim not in (-1, x.q.val.dim() - 1):
                self.fail(node, "softmax of attention scores over dim %s" % dim)
            return Attn("probs", x.q, x.k, x.scale, True)
        xv = self.need(node, x)
        if dtype is not None and dtype != xv.val.dtype:
            self.fail(node, "softmax with dtype=%s on a %s tensor" % (dtype, xv.val.dtype))
        if dim is None:
            self.fail(node, "softmax without dim")
        r = self.emit(base, "softmax", [xv], out, dim=int(dim))
        a = getattr(xv, "attn", None)
        if a is not None and a.stage == "scores" and dim in (-1, xv.val.dim() - 1):
            r.attn = Attn("probs", a.q, a.k, a.scale, False)
        return r

    def matmul(self, node, base, a, b, out):
        if isinstance(a, Attn) or (isinstance(a, G) and getattr(a, "attn", None) is not None
                                   and a.attn.stage == "probs"):
            p = a if isinstance(a, Attn) else a.attn
            if p.stage != "probs":
                self.fail(node, "attention scores used before softmax")
            v = self.need(node, b)
            q, k = p.q, p.k
            if q.val.dim() != 4:
                self.fail(node, "attention on %d-d q: scaled_dot_product_attention needs "
                          "[B, H, T, E]" % q.val.dim())
            attrs = {"causal": bool(p.causal)}
            E = q.shape[-1]
            if abs(p.scale - 1.0 / math.sqrt(E)) > 1e-12:
                attrs["scale"] = float(p.scale)
            return self.emit(base, "scaled_dot_product_attention", [q, k, v], out, **attrs)
        a, b = self.need(node, a), self.need(node, b)
        r = self.emit(base, "matmul", [a, b], out)
        kt = getattr(b, "kT", None)
        if kt is not None and a.val.dim() == 4:
            r.attn = Attn("scores", a, kt, 1.0, False)
        return r

    def arith(self, node, base, op, a, b, out):
        # attention scaling and masking
        for x, y in ((a, b), (b, a)):
            if isinstance(x, G) and getattr(x, "attn", None) is not None \
                    and x.attn.stage == "scores" and not x.attn.causal:
                at = x.attn
                if isinstance(y, (int, float)) and (op == "mul" or (op == "div" and x is a)):
                    s = at.scale * (y if op == "mul" else 1.0 / y)
                    r = self._arith_emit(node, base, op, a, b, out)
                    r.attn = Attn("scores", at.q, at.k, s, False)
                    return r
                if isinstance(y, Mask) and y.kind == "additive" and op == "add":
                    return Attn("masked", at.q, at.k, at.scale, True)
        return self._arith_emit(node, base, op, a, b, out)

    def _arith_emit(self, node, base, op, a, b, out):
        if isinstance(a, (int, float)) and not isinstance(a, bool):
            a = self.const(a, self.need(node, b))
        if isinstance(b, (int, float)) and not isinstance(b, bool):
            b = self.const(b, self.need(node, a))
        return self.emit(base, op, [self.need(node, a), self.need(node, b)], out)

    def reshape_to(self, node, base, x, out):
        x = self.need(node, x)
        if list(out.shape) == x.shape:
            return x
        return self.emit(base, "reshape", [x], out, shape=list(out.shape))

    def transpose(self, node, base, x, d0, d1, out):
        if isinstance(x, (Mask, Arange)):
            self.fail(node, "transpose of a mask / arange")
        x = self.need(node, x)
        r = self.emit(base, "transpose", [x], out, dim0=int(d0), dim1=int(d1))
        nd = x.val.dim()
        if sorted([d0 % nd, d1 % nd]) == [nd - 2, nd - 1]:
            r.kT = x
        return r

    def getitem(self, node, base, x, idx, out):
        if isinstance(x, Seq):
            return x.items[idx]
        if isinstance(x, (tuple, list)):
            return x[idx]
        if isinstance(x, Mask):
            ok = isinstance(idx, tuple) and all(isinstance(s, slice) and s.start in (None, 0)
                                                and s.step in (None, 1) for s in idx) \
                and out.dim() >= 2 and out.shape[-1] == out.shape[-2]
            if not ok:
                self.fail(node, "only top-left square slices of a causal mask are supported")
            return x
        xv = self.need(node, x)
        if not isinstance(idx, tuple):
            idx = (idx,)
        idx = tuple(slice(i[0] % xv.shape[k], i[0] % xv.shape[k] + 1)
                    if isinstance(i, list) and len(i) == 1 and isinstance(i[0], int) else i
                    for k, i in enumerate(idx))
        if any(isinstance(i, (G, torch.Tensor, list)) for i in idx):
            self.fail(node, "tensor (advanced) indexing has no mapping")
        nd = xv.val.dim()
        # expand Ellipsis
        n_real = sum(1 for i in idx if i is not None and i is not Ellipsis)
        full = []
        for i in idx:
            if i is Ellipsis:
                full.extend([slice(None)] * (nd - n_real))
            else:
                full.append(i)
        cur, dim = xv, 0
        shape = list(xv.shape)
        for i in full:
            if i is None:
                continue
            if isinstance(i, int):
                n = shape[dim]
                j = i % n if n else 0
                s = slice(j, j + 1, 1)
            else:
                s = i
            start, stop, step = s.indices(shape[dim])
            if (start, stop, step) != (0, shape[dim], 1):
                if step <= 0:
                    self.fail(node, "negative slice steps are not supported")
                length = len(range(start, stop, step))
                shape[dim] = length
                attrs = {"dim": dim, "start": start, "end": stop}
                if step != 1:
                    attrs["step"] = step
                cur = self.emit(base, "slice", [cur], torch.empty(shape, dtype=xv.val.dtype,
                                                                  device="meta"), **attrs)
            dim += 1
        return self.reshape_to(node, base + ".view", cur, out)

    def split(self, node, base, x, out, dim):
        xv = self.need(node, x)
        nd = xv.val.dim()
        dim = dim % nd
        sizes = [int(o.shape[dim]) for o in out]
        names = [self.fresh("%s.%d" % (base, i)) for i in range(len(out))]
        self.nodes.append({"names": names, "op": "split", "inputs": [xv.name],
                           "dim": dim, "sizes": sizes})
        return Seq([G(n, o) for n, o in zip(names, out)])

    def same_dtype(self, node, x, dtype):
        if isinstance(x, (Attn, Mask, Arange)):
            return x
        xv = self.need(node, x)
        if dtype is not None and dtype != xv.val.dtype:
            self.fail(node, "dtype conversion %s -> %s has no mapping" % (xv.val.dtype, dtype))
        return x

    # -- call_method
    def lower_method(self, node, name, args, kwargs, out):
        x, rest = args[0], args[1:]
        base = node.name
        if name in ("view", "reshape", "flatten", "unsqueeze", "squeeze", "view_as", "reshape_as"):
            if isinstance(x, Arange):
                return Arange(x.start, x.end, x.step, list(out.shape))
            if isinstance(x, Mask):
                return x
            return self.reshape_to(node, base, x, out)
        if name in ("contiguous", "clone", "detach"):
            return x
        if name in ("to", "type", "float", "type_as", "bfloat16", "half", "double"):
            target = {"float": torch.float32, "bfloat16": torch.bfloat16,
                      "half": torch.float16, "double": torch.float64}.get(name)
            if isinstance(out, torch.Tensor):
                target = out.dtype
            return self.same_dtype(node, x, target)
        if name == "transpose":
            d0 = rest[0] if rest else kwargs["dim0"]
            d1 = rest[1] if len(rest) > 1 else kwargs["dim1"]
            return self.transpose(node, base, x, d0, d1, out)
        if name == "t":
            return self.transpose(node, base, x, 0, 1, out)
        if name == "permute":
            dims = list(rest[0]) if len(rest) == 1 and isinstance(rest[0], (tuple, list)) \
                else list(rest)
            return self.emit(base, "permute", [self.need(node, x)], out, dims=dims)
        if name in ("split", "chunk", "tensor_split"):
            dim = rest[1] if len(rest) > 1 else kwargs.get("dim", 0)
            return self.split(node, base, x, out, dim)
        if name == "softmax":
            dim = rest[0] if rest else kwargs.get("dim")
            return self.softmax(node, base, x, dim, kwargs.get("dtype"), out)
        if name in ("eq", "__eq__", "logical_not", "__invert__") and isinstance(x, Mask):
            return self.mask_flip(node, name in ("logical_not", "__invert__"), args)
        if name == "masked_fill":
            mask = rest[0] if rest else kwargs.get("mask")
            value = rest[1] if len(rest) > 1 else kwargs.get("value")
            return self.masked_fill(node, x, mask, value)
        if name in ("matmul", "__matmul__", "bmm"):
            return self.matmul(node, base, x, rest[0], out)
        if name in ("add", "sub", "mul", "div"):
            if kwargs.get("alpha", 1) != 1:
                self.fail(node, "alpha != 1")
            return self.arith(node, base, name, x, rest[0] if rest else kwargs["other"], out)
        if name in ("relu", "silu"):
            return self.emit(base, name, [self.need(node, x)], out)
        if name == "neg":
            xv = self.need(node, x)
            return self.emit(base, "mul", [xv, self.const(-1.0, xv)], out)
        self.fail(node, "tensor method .%s() has no mapping" % name)

    def mask_flip(self, node, is_not, a):
        if not is_not and a[1] not in (0, 0.0, False):
            self.fail(node, "a causal mask compared with %r" % (a[1],))
        flipped = {"keep": "drop", "drop": "keep"}.get(a[0].kind)
        if flipped is None:
            self.fail(node, "negating an additive mask")
        return Mask(flipped)

    def masked_fill(self, node, x, mask, value):
        if isinstance(x, G) and getattr(x, "attn", None) is not None and \
                x.attn.stage == "scores" and isinstance(mask, Mask) and mask.kind == "drop" \
                and value == -math.inf:
            return Attn("masked", x.attn.q, x.attn.k, x.attn.scale, True)
        self.fail(node, "masked_fill is supported only as the causal mask of an attention "
                  "(scores.masked_fill(tril_mask == 0, -inf))")

    def cross_entropy(self, node, base, kw, out):
        """F.cross_entropy(input, target, weight, size_average, ignore_index,
        reduce, reduction, label_smoothing): the graph's cross_entropy is the
        mean over the targets other than ignore_index (nanoGPT passes -1).
        What it cannot express is refused, never dropped."""
        if kw(2, "weight") is not None:
            self.fail(node, "cross_entropy with class weights has no graph op")
        if kw(3, "size_average") is not None or kw(5, "reduce") is not None:
            self.fail(node, "cross_entropy's deprecated size_average / reduce arguments "
                            "have no graph op (use reduction)")
        if kw(6, "reduction", "mean") != "mean":
            self.fail(node, "cross_entropy with reduction=%r has no graph op (only 'mean')"
                      % (kw(6, "reduction", "mean"),))
        if kw(7, "label_smoothing", 0.0) not in (0, 0.0):
            self.fail(node, "cross_entropy with label_smoothing has no graph op")
        ignore_index = kw(4, "ignore_index", -100)
        if not isinstance(ignore_index, int):
            self.fail(node, "cross_entropy's ignore_index must be a Python int, got %r"
                      % (ignore_index,))
        attrs = {} if ignore_index == -100 else {"ignore_index": ignore_index}
        return self.emit(base, "cross_entropy", [self.need(node, kw(0, "input")),
                                                 self.need(node, kw(1, "target"))], out,
                         **attrs)

    # -- call_function
    def lower_function(self, node, fn, args, kwargs, out):
        base = node.name
        a = args

        def kw(i, k, d=None):
            return a[i] if len(a) > i else kwargs.get(k, d)
        arith = {operator.add: "add", operator.sub: "sub", operator.mul: "mul",
                 operator.truediv: "div", torch.add: "add", torch.sub: "sub",
                 torch.mul: "mul", torch.div: "div", operator.iadd: "add",
                 operator.imul: "mul"}
        if fn in arith:
            if kwargs.get("alpha", 1) != 1:
                self.fail(node, "alpha != 1")
            return self.arith(node, base, arith[fn], a[0], a[1], out)
        if fn is operator.neg:
            xv = self.need(node, a[0])
            return self.emit(base, "mul", [xv, self.const(-1.0, xv)], out)
        if fn is operator.getitem:
            return self.getitem(node, base, a[0], a[1], out)
        if fn in (operator.eq, torch.eq, operator.invert, torch.logical_not) and \
                isinstance(a[0], Mask):
            return self.mask_flip(node, fn in (operator.invert, torch.logical_not), a)
        if fn is getattr:
            x = a[0]
            if isinstance(x, G):
                return getattr(x.val, a[1])
            self.fail(node, "getattr %s" % a[1])
        if fn in (operator.matmul, torch.matmul, torch.bmm):
            return self.matmul(node, base, a[0], a[1], out)
        if fn is F.linear:
            ins = [self.need(node, a[0]), self.need(node, kw(1, "weight"))]
            b = kw(2, "bias")
            if b is not None:
                ins.append(self.need(node, b))
            return self.emit(base, "linear", ins, out)
        if fn is F.embedding:
            if kw(2, "padding_idx") is not None and False:
                pass
            return self.embedding(node, base, self.need(node, kw(1, "weight")), a[0], out,
                                  None, kw(3, "max_norm"))
        if fn is F.layer_norm:
            return self.layer_norm(node, base, a[0], kw(1, "normalized_shape"),
                                   kw(2, "weight"), kw(3, "bias"), kw(4, "eps", 1e-5), out)
        if fn is F.gelu:
            return self.emit(base, "gelu", [self.need(node, a[0])], out,
                             approximate=kw(1, "approximate", "none"))
        if fn in (F.silu,):
            return self.emit(base, "silu", [self.need(node, a[0])], out)
        if fn in (F.relu, torch.relu):
            return self.emit(base, "relu", [self.need(node, a[0])], out)
        if fn in (F.softmax, torch.softmax):
            return self.softmax(node, base, a[0], kw(1, "dim"), kw(3, "dtype")
                                if fn is F.softmax else kw(2, "dtype"), out)
        if fn in (F.dropout,):
            return a[0]
        if fn in (torch.transpose,):
            return self.transpose(node, base, a[0], kw(1, "dim0"), kw(2, "dim1"), out)
        if fn in (torch.reshape, torch.flatten, torch.unsqueeze, torch.squeeze):
            if isinstance(a[0], Arange):
                return Arange(a[0].start, a[0].end, a[0].step, list(out.shape))
            return self.reshape_to(node, base, a[0], out)
        if fn is torch.permute:
            return self.emit(base, "permute", [self.need(node, a[0])], out,
                             dims=list(kw(1, "dims")))
        if fn in (torch.split, torch.chunk, torch.tensor_split):
            return self.split(node, base, a[0], out, kw(2, "dim", 0))
        if fn is torch.cat:
            xs = [self.need(node, x) for x in kw(0, "tensors")]
            return self.emit(base, "cat", xs, out, dim=int(kw(1, "dim", 0)))
        if fn is F.cross_entropy:
            return self.cross_entropy(node, base, kw, out)
        sdpa = getattr(F, "scaled_dot_product_attention", None)
        if sdpa is not None and fn is sdpa:
            if kw(3, "attn_mask") is not None or kw(4, "dropout_p", 0.0) not in (0, 0.0):
                self.fail(node, "scaled_dot_product_attention with attn_mask / dropout")
            q = self.need(node, a[0])
            attrs = {"causal": bool(kw(5, "is_causal", False))}
            scale = kwargs.get("scale")
            if scale is not None:
                attrs["scale"] = float(scale)
            return self.emit(base, "scaled_dot_product_attention",
                             [q, self.need(node, a[1]), self.need(node, a[2])], out, **attrs)
        if fn is torch.masked_fill:
            return self.masked_fill(node, a[0], a[1], a[2])
        self.fail(node, "function %s has no mapping" % getattr(fn, "__name__", fn))


def _flat(xs):
    out = []
    for x in xs:
        if isinstance(x, (list, tuple)):
            out.extend(_flat(x))
        elif isinstance(x, slice):
            out.extend([x.start, x.stop, x.step])
        else:
            out.append(x)
    return out


def dead_code_eliminate(nodes, outputs):
    live = set(outputs)
    keep = []
    for n in reversed(nodes):
        names = n["names"] if "names" in n else [n["name"]]
        if any(x in live for x in names):
            keep.append(n)
            live.update(n["inputs"])
    keep.reverse()
    return keep, live
