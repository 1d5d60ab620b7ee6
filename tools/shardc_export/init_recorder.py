"""Construct an nn.Module on the meta device and record its init programs.

Two recorders run while the user's constructor (and anything it calls,
e.g. `self.apply(self._init_weights)`) executes:

- `MetaFactoryMode` (a TorchFunctionMode) sends every tensor factory to the
  meta device, so no parameter storage is ever allocated, and tags constant
  tensors with a small expression (`("arange", start, end, step)`,
  `("tril", ...)`, ...) that the forward lowering uses to recognize position
  ids and causal masks.
- `InitRecorder` (a TorchDispatchMode) records, per storage, every aten op
  that creates or mutates it: that is the init chain. `torch.nn.init`'s
  public functions are wrapped while recording, so `kaiming_uniform_`,
  `trunc_normal_`, `orthogonal_`... become ONE op with torch's arguments;
  the aten ops they decompose into are not recorded separately.

A later generator overwrites an earlier one: the chain starts anew at the
last generator (nanoGPT calls normal_ twice on its c_proj weights).
"""

import contextlib
import functools

import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode


class ExportError(Exception):
    """A model the exporter cannot represent; the message says what and where."""


def storage_key(t):
    try:
        s = t.untyped_storage()  # torch >= 2.0
    except AttributeError:
        s = t.storage()
    return s._cdata


# ------------------------------------------------------------ meta factories

_FACTORIES = {
    torch.empty: "empty", torch.zeros: "zeros", torch.ones: "ones",
    torch.full: "full", torch.arange: "arange", torch.eye: "eye",
    torch.rand: "rand", torch.randn: "randn", torch.randint: "randint",
    torch.tensor: "tensor", torch.linspace: "linspace",
    torch.empty_strided: "empty_strided", torch.as_tensor: "as_tensor",
}


def _size_args(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)):
        return [int(s) for s in args[0]]
    return [int(s) for s in args]


def _factory_expr(name, args, kwargs):
    try:
        if name in ("zeros", "ones", "empty", "rand", "randn"):
            return (name, _size_args(args))
        if name == "full":
            return ("full", [int(s) for s in args[0]], float(args[1] if len(args) > 1
                                                            else kwargs["fill_value"]))
        if name == "arange":
            a = list(args)
            if len(a) == 1:
                a = [0, a[0], 1]
            elif len(a) == 2:
                a = [a[0], a[1], 1]
            return ("arange", a[0], a[1], a[2])
        if name == "eye":
            return ("eye", [int(s) for s in args])
    except Exception:
        return None
    return None


def _tag(t, expr):
    if isinstance(t, torch.Tensor) and expr is not None:
        try:
            t._shardc_expr = expr
        except Exception:
            pass
    return t


def tag_of(t):
    if not isinstance(t, torch.Tensor):
        return None
    return getattr(t, "_shardc_expr", None)


_TAGGED_METHODS = {
    "tril": "tril", "triu": "triu", "view": "view", "reshape": "reshape",
    "unsqueeze": "unsqueeze", "__eq__": "eq", "eq": "eq",
    "logical_not": "not", "__invert__": "not", "bool": "bool", "to": "to",
    "float": "to", "type_as": "to", "long": "to",
}


# ------------------------------------------------------------ CPU shadows
# A constructor may compute its configuration with tensors and read it back
# as Python numbers: torchvision's RegNet derives its stage widths from
# `torch.arange(depth) * w_a + w_0` ... `.int().tolist()`. On meta tensors
# that read fails ("Cannot copy out of meta tensor"). So a small tensor made
# by a deterministic factory carries a CPU shadow holding its values, every
# op whose tensor operands all have shadows computes its result's shadow
# too, and reading a meta tensor's values (tolist, item, int(), ...) reads
# its shadow. Parameters and anything derived from them have no shadow, so
# reading their values still fails as before.
SHADOW_MAX_ELEMENTS = 1 << 16
_NO_SHADOW_FACTORIES = ("empty", "empty_strided", "rand", "randn", "randint")
_VALUE_READS = {"tolist", "item", "__int__", "__float__", "__bool__", "__index__",
                "numpy", "__format__", "__repr__", "__str__",
                # value-dependent shapes (timm's RegNet counts its stages with
                # torch.unique): computed on the shadow, a CPU result
                "unique", "_unique2", "unique_consecutive", "nonzero"}


def shadow_of(t):
    return getattr(t, "_shardc_cpu", None)


def _to_shadow(v):
    """v with each meta tensor replaced by its CPU shadow; None if one has none."""
    if isinstance(v, torch.Tensor):
        if v.device.type != "meta":
            return v
        return shadow_of(v)
    if isinstance(v, (list, tuple)):
        out = [_to_shadow(x) for x in v]
        if any(o is None and isinstance(x, torch.Tensor) for o, x in zip(out, v)):
            return None
        return type(v)(out)
    return v


def _has_meta(v):
    if isinstance(v, torch.Tensor):
        return v.device.type == "meta"
    if isinstance(v, (list, tuple)):
        return any(_has_meta(x) for x in v)
    return False


def _shadow_call(func, args, kwargs, meta_out):
    """func on the shadows; attaches the result to meta_out when it is a small
    tensor (or a tuple/list of them)."""
    sargs = [_to_shadow(a) for a in args]
    skw = {k: _to_shadow(v) for k, v in kwargs.items()}
    if any(s is None and _has_meta(a) for s, a in zip(sargs, args)) or \
            any(skw[k] is None and _has_meta(v) for k, v in kwargs.items()):
        return
    if "device" in skw:
        skw["device"] = "cpu"
    outs = meta_out if isinstance(meta_out, (tuple, list)) else (meta_out,)
    if not all(isinstance(o, torch.Tensor) and o.numel() <= SHADOW_MAX_ELEMENTS
               for o in outs):
        return
    try:
        cpu = func(*sargs, **skw)
    except Exception:
        return
    cpus = cpu if isinstance(cpu, (tuple, list)) else (cpu,)
    for o, c in zip(outs, cpus):
        if isinstance(c, torch.Tensor) and o.device.type == "meta" and \
                list(c.shape) == list(o.shape):
            try:
                o._shardc_cpu = c
            except Exception:
                pass
            if o.is_contiguous() and o.storage_offset() == 0:
                # nn.Parameter(t) shares t's storage: found again by storage
                _SHADOW_BY_STORAGE[storage_key(o)] = (o, c)


_SHADOW_BY_STORAGE = {}  # storage key -> (meta tensor kept alive, CPU shadow)


def shadow_fill_value(t):
    """The one value of every element of t when t's storage has a CPU shadow
    whose elements are all equal (swin_v2's logit_scale = log(10 * ones)),
    else None: the init chain then is one fill."""
    entry = _SHADOW_BY_STORAGE.get(storage_key(t))
    if entry is None or not entry[1].is_floating_point() or entry[1].numel() != t.numel() \
            or t.numel() == 0:
        return None
    flat = entry[1].reshape(-1)
    return float(flat[0]) if bool((flat == flat[0]).all()) else None


class MetaFactoryMode(TorchFunctionMode):
    """Every tensor factory makes meta tensors; constants get expression tags;
    small deterministic constants keep CPU shadows of their values."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        fname = getattr(func, "__name__", "")
        if fname in _VALUE_READS and args and isinstance(args[0], torch.Tensor) and \
                args[0].device.type == "meta" and shadow_of(args[0]) is not None:
            return func(shadow_of(args[0]), *args[1:], **kwargs)
        out = self._meta_call(func, args, kwargs)
        name = _FACTORIES.get(func)
        if name not in _NO_SHADOW_FACTORIES and _has_meta(out) and \
                (name is not None or _has_meta(list(args) + list(kwargs.values()))):
            _shadow_call(func, args, kwargs, out)
        return out

    def _meta_call(self, func, args, kwargs):
        name = _FACTORIES.get(func)
        if name == "tensor" and "device" not in kwargs and len(args) == 1 and \
                isinstance(args[0], (list, tuple)) and len(args[0]) == 0:
            # `torch.tensor([]).device` is how Hugging Face asks whether a
            # meta-device context is active (it then skips _init_weights):
            # an empty literal holds no data, so it may stay on CPU and HF
            # runs (and we record) its init as it does eagerly.
            return func(*args, **kwargs)
        if name is not None:
            kwargs["device"] = "meta"
            kwargs.pop("pin_memory", None)
            out = func(*args, **kwargs)
            return _tag(out, _factory_expr(name, args, kwargs))
        out = func(*args, **kwargs)
        fname = getattr(func, "__name__", "")
        if fname in ("tril", "triu") and args and tag_of(args[0]) is not None:
            diag = args[1] if len(args) > 1 else kwargs.get("diagonal", 0)
            return _tag(out, (fname, tag_of(args[0]), int(diag)))
        if fname == "__getitem__" and args and isinstance(args[0], torch.Tensor) \
                and tag_of(args[0]) is not None and isinstance(out, torch.Tensor):
            idx = args[1] if isinstance(args[1], tuple) else (args[1],)
            if all(isinstance(s, slice) and s.start in (None, 0) and s.step in (None, 1)
                   for s in idx) and out.dim() >= 2 and out.shape[-1] == out.shape[-2]:
                return _tag(out, ("slice_tl", tag_of(args[0]), list(out.shape)))
            return out
        op = _TAGGED_METHODS.get(fname)
        if op and args and isinstance(args[0], torch.Tensor) and tag_of(args[0]) is not None \
                and isinstance(out, torch.Tensor):
            if op == "eq":
                other = args[1] if len(args) > 1 else None
                if isinstance(other, (int, float, bool)):
                    return _tag(out, ("eq", tag_of(args[0]), float(other)))
                return out
            if op in ("view", "reshape", "unsqueeze", "to", "bool"):
                return _tag(out, ("shape", tag_of(args[0]), list(out.shape))
                            if op != "to" and op != "bool" else tag_of(args[0]))
            return _tag(out, (op, tag_of(args[0])))
        return out


# ------------------------------------------------------------ init recording

# nn.init functions wrapped while recording: name -> (graph op, argument names
# in torch's signature order with torch's defaults).
_NN_INIT = {
    "uniform_": ("uniform", [("a", 0.0), ("b", 1.0)]),
    "normal_": ("normal", [("mean", 0.0), ("std", 1.0)]),
    "trunc_normal_": ("trunc_normal", [("mean", 0.0), ("std", 1.0), ("a", -2.0), ("b", 2.0)]),
    "constant_": ("fill", [("val", None)]),
    "ones_": ("ones", []),
    "zeros_": ("zeros", []),
    "eye_": ("eye", []),
    "xavier_uniform_": ("xavier_uniform", [("gain", 1.0)]),
    "xavier_normal_": ("xavier_normal", [("gain", 1.0)]),
    "kaiming_uniform_": ("kaiming_uniform", [("a", 0), ("mode", "fan_in"),
                                             ("nonlinearity", "leaky_relu")]),
    "kaiming_normal_": ("kaiming_normal", [("a", 0), ("mode", "fan_in"),
                                           ("nonlinearity", "leaky_relu")]),
    "orthogonal_": ("orthogonal", [("gain", 1)]),
}

GENERATORS = {"empty", "fill", "zeros", "ones", "uniform", "normal", "trunc_normal",
              "kaiming_uniform", "kaiming_normal", "xavier_uniform", "xavier_normal",
              "eye", "arange", "orthogonal", "norm_of"}


def _num(v):
    if isinstance(v, torch.Tensor):
        return v.item() if v.device.type != "meta" else None
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, int):
        return v
    return float(v)


def _numel(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


class Chain:
    """The ops applied to one storage, in order. `ops` are graph-format init ops
    (dicts); `unsupported` names the first op the graph format cannot express."""

    def __init__(self, ops, shape, unsupported=None, ancestors=()):
        self.ops = ops
        self.shape = list(shape)       # shape of the tensor the generator made
        self.unsupported = unsupported  # (op description, python stack line) or None
        # storage keys of the tensors this one was computed from out of
        # place, oldest first: which draw a chain continues, when two draws
        # have equal ops
        self.ancestors = tuple(ancestors)

    def extended(self, op, parent=None):
        """This chain and `op`; `parent`: the storage op read when it made a
        new tensor (out of place)."""
        ancestors = self.ancestors + ((parent,) if parent is not None else ())
        return Chain(self.ops + [op], self.shape, self.unsupported, ancestors)


class InitRecorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.chains = {}       # storage key -> Chain
        self.suppress = 0      # > 0 inside a wrapped nn.init call

    # -- helpers
    def _where(self):
        import traceback
        for fr in reversed(traceback.extract_stack()):
            f = fr.filename
            if "/torch/" in f or "shardc_export" in f or "contextlib" in f:
                continue
            return "%s:%d" % (f, fr.lineno)
        return "?"

    def set_generator(self, t, op):
        self.chains[storage_key(t)] = Chain([op], list(t.shape))

    def set_unsupported(self, t, what):
        c = self.chains.get(storage_key(t))
        base = c.ops if c else []
        self.chains[storage_key(t)] = Chain(base, list(t.shape), (what, self._where()))

    def append(self, t, op, what):
        key = storage_key(t)
        c = self.chains.get(key)
        if c is None:
            self.chains[key] = Chain([], list(t.shape), (what + " on a tensor whose "
                                                         "creation was not recorded",
                                                         self._where()))
            return
        self.chains[key] = c.extended(op)

    def fill_rows(self, t, value):
        """t (a view) is whole rows [r0, r1) of dim 0 of the tensor that owns
        its storage (nn.Embedding's weight[padding_idx]): append fill_rows to
        that tensor's chain and return True; else False."""
        c = self.chains.get(storage_key(t))
        if c is None or c.unsupported or value is None or not t.is_contiguous():
            return False
        shape = c.shape
        row = 1
        for n in shape[1:]:
            row *= n
        try:
            nbytes = t.untyped_storage().nbytes() if hasattr(t, "untyped_storage") \
                else t.storage().nbytes()  # torch 1.13
        except Exception:
            return False
        total = row * (shape[0] if shape else 1)
        if not shape or nbytes != total * t.element_size() or row == 0 or \
                t.storage_offset() % row or t.numel() % row or \
                any(o["op"] in ("reshape", "transpose", "permute", "slice") for o in c.ops):
            return False
        r0 = t.storage_offset() // row
        self.chains[storage_key(t)] = c.extended(
            {"op": "fill_rows", "value": float(value), "start": r0,
             "end": r0 + t.numel() // row})
        return True

    @staticmethod
    def _whole(t):
        """True when t covers its whole storage (no partial writes)."""
        try:
            n = t.untyped_storage().nbytes() if hasattr(t, "untyped_storage") \
                else t.storage().nbytes()
        except Exception:
            return True
        return t.storage_offset() == 0 and t.numel() * t.element_size() == n \
            and t.is_contiguous()

    # -- nn.init wrappers
    def wrap_nn_init(self):
        saved = {}
        rec = self

        for fname, (op, argspec) in _NN_INIT.items():
            orig = getattr(nn.init, fname, None)
            if orig is None:
                continue
            saved[fname] = orig

            def make(orig=orig, op=op, argspec=argspec, fname=fname):
                @functools.wraps(orig)
                def wrapper(tensor, *args, **kwargs):
                    if rec.suppress:
                        return orig(tensor, *args, **kwargs)
                    vals = {}
                    for i, (an, default) in enumerate(argspec):
                        if i < len(args):
                            vals[an] = args[i]
                        elif an in kwargs:
                            vals[an] = kwargs[an]
                        elif an == "val" and "value" in kwargs:
                            vals[an] = kwargs["value"]
                        else:
                            vals[an] = default
                    extra = set(kwargs) - {an for an, _ in argspec} - {"generator"}
                    rec.suppress += 1
                    try:
                        out = orig(tensor, *args, **kwargs)
                    finally:
                        rec.suppress -= 1
                    if extra:
                        rec.set_unsupported(tensor, "nn.init.%s with %s" % (fname, sorted(extra)))
                        return out
                    entry = {"op": op}
                    for an, _ in argspec:
                        v = vals[an]
                        key = "value" if an == "val" else an
                        if isinstance(v, str):
                            entry[key] = v
                        else:
                            entry[key] = float(v) if not isinstance(v, bool) else float(v)
                    if op in ("kaiming_uniform", "kaiming_normal") and isinstance(vals["a"], int):
                        entry["a"] = float(vals["a"])
                    fill = {"zeros": 0.0, "ones": 1.0}.get(op, entry.get("value")) \
                        if op in ("zeros", "ones", "fill") else None
                    if not rec._whole(tensor):
                        # whole rows (an embedding's padding_idx row): fill_rows
                        if not rec.fill_rows(tensor, fill):
                            rec.set_unsupported(tensor, "nn.init.%s on a part of a tensor "
                                                "other than whole rows" % fname)
                    else:
                        rec.set_generator(tensor, entry)
                    return out
                return wrapper
            setattr(nn.init, fname, make())

        def restore():
            for k, v in saved.items():
                setattr(nn.init, k, v)
        return restore

    # -- aten ops
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.suppress:
            return out
        try:
            self._record(func, args, kwargs, out)
        except ExportError:
            raise
        except Exception as e:  # never let bookkeeping break construction
            if isinstance(out, torch.Tensor):
                self.chains[storage_key(out)] = Chain([], list(out.shape),
                                                      ("%s (%s)" % (func, e), self._where()))
        return out

    def _record(self, func, args, kwargs, out):
        name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
        a = list(args)
        if name in ("detach", "alias", "lift_fresh"):
            return
        if name in ("clone", "_to_copy", "contiguous") and a and isinstance(a[0], torch.Tensor) \
                and isinstance(out, torch.Tensor):
            sc = self.chains.get(storage_key(a[0]))
            if sc is not None and storage_key(out) != storage_key(a[0]):
                if _numel(sc.shape) != out.numel():  # a copy of an expanded view
                    self.chains[storage_key(out)] = Chain(sc.ops, list(out.shape), sc.unsupported or (
                        "aten.%s of an expanded view" % name, self._where()))
                else:
                    self.chains[storage_key(out)] = Chain(list(sc.ops), sc.shape, sc.unsupported,
                                                          sc.ancestors + (storage_key(a[0]),))
            return
        # --- factories (new storage)
        if name in ("empty", "empty_strided", "new_empty", "new_empty_strided"):
            self.set_generator(out, {"op": "empty"})
            return
        if name in ("zeros", "new_zeros", "zeros_like"):
            self.set_generator(out, {"op": "zeros"})
            return
        if name in ("ones", "new_ones", "ones_like"):
            self.set_generator(out, {"op": "ones"})
            return
        if name in ("full", "new_full", "full_like"):
            v = a[1] if len(a) > 1 else kwargs.get("fill_value")
            self.set_generator(out, {"op": "fill", "value": float(_num(v))})
            return
        if name == "arange":
            nums = [x for x in a if isinstance(x, (int, float))]
            if len(nums) == 1:
                nums = [0, nums[0], 1]
            elif len(nums) == 2:
                nums = [nums[0], nums[1], 1]
            self.set_generator(out, {"op": "arange", "start": float(nums[0]),
                                     "step": float(nums[2])})
            return
        if name == "eye":
            self.set_generator(out, {"op": "eye"})
            return
        if name in ("randn", "randn_like"):
            self.set_generator(out, {"op": "normal", "mean": 0.0, "std": 1.0})
            return
        if name in ("rand", "rand_like"):
            self.set_generator(out, {"op": "uniform", "a": 0.0, "b": 1.0})
            return
        if name == "empty_like":
            self.set_generator(out, {"op": "empty"})
            return
        # --- in-place ops on an existing storage
        if name.endswith("_") and a and isinstance(a[0], torch.Tensor):
            t = a[0]
            whole = self._whole(t)
            gen = None
            if name == "normal_":
                gen = {"op": "normal", "mean": float(_num(a[1] if len(a) > 1 else kwargs.get("mean", 0.0))),
                       "std": float(_num(a[2] if len(a) > 2 else kwargs.get("std", 1.0)))}
            elif name == "uniform_":
                gen = {"op": "uniform", "a": float(_num(a[1] if len(a) > 1 else kwargs.get("from", 0.0))),
                       "b": float(_num(a[2] if len(a) > 2 else kwargs.get("to", 1.0)))}
            elif name == "fill_":
                v = _num(a[1])
                if v is None:
                    self.set_unsupported(t, "fill_ with a tensor value")
                    return
                gen = {"op": "fill", "value": float(v)}
            elif name == "zero_":
                gen = {"op": "zeros"}
            if gen is not None:
                if whole:
                    self.set_generator(t, gen)
                elif gen["op"] in ("fill", "zeros") and \
                        self.fill_rows(t, gen.get("value", 0.0)):
                    pass  # whole rows of dim 0: nn.Embedding's padding_idx row
                else:
                    self.set_unsupported(t, "%s on a part of a tensor other than whole "
                                         "rows" % name)
                return
            if name == "copy_":
                src = a[1]
                sc = self.chains.get(storage_key(src)) if isinstance(src, torch.Tensor) else None
                if not whole:
                    self.set_unsupported(t, "copy_ into a part of a tensor")
                elif sc is None:
                    self.set_unsupported(t, "copy_ from a tensor whose init was not recorded")
                elif list(src.shape) != list(t.shape) or not self._whole(src):
                    if src.numel() == t.numel() and self._whole(src):
                        c = Chain(list(sc.ops), sc.shape, sc.unsupported)
                        self.chains[storage_key(t)] = c
                    else:
                        self.set_unsupported(t, "copy_ from a tensor of another shape / a view")
                else:
                    self.chains[storage_key(t)] = Chain(list(sc.ops), sc.shape, sc.unsupported)
                return
            op = self._pointwise(name[:-1], a, kwargs)
            if op is None:
                self.set_unsupported(t, "aten.%s" % name)
            elif not whole:
                self.set_unsupported(t, "%s on a part of a tensor" % name)
            else:
                self.append(t, op, name)
            return
        # --- out-of-place ops: a new storage derived from a recorded one
        if not isinstance(out, torch.Tensor):
            return
        srcs = [x for x in a if isinstance(x, torch.Tensor)]
        if not srcs:
            return
        src = srcs[0]
        sk = storage_key(src)
        if storage_key(out) == sk:  # a view: nothing new is created
            return
        sc = self.chains.get(sk)
        if sc is None:
            return
        if name == "norm":
            self._record_norm(src, a, kwargs, out, sc)
            return
        if name == "add" and len(srcs) == 2 and self._inverse_softplus(srcs, out):
            return
        op = self._pointwise(name, a, kwargs) if len(srcs) == 1 or \
            (len(srcs) == 2 and srcs[1].dim() == 0 and srcs[1].device.type != "meta") else None
        if op is not None and list(src.shape) == list(out.shape):
            self.chains[storage_key(out)] = sc.extended(op, parent=sk)
        else:
            self.chains[storage_key(out)] = Chain(sc.ops, list(out.shape),
                                                  sc.unsupported or ("aten.%s" % name, self._where()))

    _SOFTPLUS_INVERSE_TAIL = ["neg", "expm1", "neg", "log"]

    def _inverse_softplus(self, srcs, out):
        """`x + log(-expm1(-x))` (either order): torch's idiom for softplus's
        inverse, Mamba's dt bias. Both operands derive from the same chain,
        which a linear init chain cannot say, so it becomes one op
        (`inverse_softplus`) appended to x's chain. The term must be computed
        from x itself (its fourth-last ancestor), not from another draw with
        the same ops. True when recorded."""
        for x, term in (srcs, srcs[::-1]):
            xc = self.chains.get(storage_key(x))
            tc = self.chains.get(storage_key(term))
            if xc is None or tc is None or xc.unsupported or tc.unsupported:
                continue
            if list(x.shape) != list(out.shape) or list(term.shape) != list(out.shape):
                continue
            n = len(xc.ops)
            if len(tc.ops) == n + 4 and tc.ops[:n] == xc.ops and \
                    tc.ancestors[-4:-3] == (storage_key(x),) and \
                    [o["op"] for o in tc.ops[n:]] == self._SOFTPLUS_INVERSE_TAIL:
                self.chains[storage_key(out)] = xc.extended({"op": "inverse_softplus"})
                return True
        return False

    def _record_norm(self, src, a, kwargs, out, sc):
        """A 2-norm of a whole recorded tensor over some of its dims: weight
        norm's `g = norm_except_dim(v, 2, dim)` (views v as [-1, k] or
        [k, -1], then aten.norm over one dim). Recorded as a derived init op
        `norm_of` on the source tensor (named by storage here, by parameter
        name at export), its dims counted in the source's own shape."""
        p = _num(a[1]) if len(a) > 1 else kwargs.get("p", 2)
        dims = a[2] if len(a) > 2 else kwargs.get("dim")
        keepdim = a[3] if len(a) > 3 else kwargs.get("keepdim", False)
        full = list(sc.shape)
        view = list(src.shape)
        if p != 2 or sc.unsupported or not self._whole(src) or keepdim:
            self.chains[storage_key(out)] = Chain([], list(out.shape), sc.unsupported or (
                "aten.norm (only the 2-norm of a whole tensor is expressible)", self._where()))
            return
        if dims is None or len(dims) == 0 or len(dims) == len(view):
            reduced = list(range(len(full)))
        elif len(view) == 2 and len(dims) == 1:
            # [A, B] = full viewed at a dim boundary: find it.
            cut, prod = None, 1
            for i in range(len(full) + 1):
                if prod == view[0]:
                    cut = i
                    break
                if i < len(full):
                    prod *= full[i]
            if cut is None:
                self.set_unsupported(out, "aten.norm of a view that splits a dim")
                return
            d = dims[0] % 2
            reduced = list(range(cut)) if d == 0 else list(range(cut, len(full)))
        elif view == full:
            reduced = sorted(d % len(full) for d in dims)
        else:
            self.chains[storage_key(out)] = Chain([], list(out.shape), (
                "aten.norm over dims %s of a view %s" % (list(dims), view), self._where()))
            return
        kept = [1 if i in reduced else n for i, n in enumerate(full)]
        self.chains[storage_key(out)] = Chain(
            [{"op": "norm_of", "_source_storage": storage_key(src), "dims": reduced}], kept)

    @staticmethod
    def _pointwise(name, a, kwargs):
        def scal(i, key=None, default=None):
            v = a[i] if len(a) > i else kwargs.get(key, default)
            return _num(v) if v is not None else None
        if name in ("mul", "add", "sub", "div"):
            v = scal(1, "other")
            if v is None:
                return None
            if name in ("add", "sub"):
                alpha = kwargs.get("alpha", a[2] if len(a) > 2 else 1)
                v = v * _num(alpha)
            if name == "div" and kwargs.get("rounding_mode") is not None:
                return None
            return {"op": name, "value": float(v)}
        if name in ("erfinv", "sqrt", "neg", "exp", "log", "expm1"):
            return {"op": name}
        if name == "clamp":
            op = {"op": "clamp"}
            lo, hi = scal(1, "min"), scal(2, "max")
            if lo is not None:
                op["min"] = float(lo)
            if hi is not None:
                op["max"] = float(hi)
            return op
        if name == "clamp_min":
            return {"op": "clamp", "min": float(scal(1, "min"))}
        if name == "clamp_max":
            return {"op": "clamp", "max": float(scal(1, "max"))}
        return None


@contextlib.contextmanager
def recording():
    """Construct under this: tensors are meta, init ops are recorded."""
    rec = InitRecorder()
    _SHADOW_BY_STORAGE.clear()
    restore = rec.wrap_nn_init()
    try:
        with MetaFactoryMode(), rec:
            yield rec
    finally:
        restore()


def to_graph_chain(chain, shape, what):
    """A recorded Chain -> graph-format init list for a tensor of `shape`.
    `what` names the tensor for error messages."""
    if chain is None:
        raise ExportError("%s: its creation was not recorded (made before the exporter "
                          "started, or from data the exporter cannot see)" % what)
    if chain.unsupported:
        op, where = chain.unsupported
        raise ExportError("%s: init op %s at %s is not expressible in the graph format "
                          "(docs/exporter.md lists what is)" % (what, op, where))
    ops = [dict(o) for o in chain.ops]
    # the chain starts anew at the last generator
    last = max((i for i, o in enumerate(ops) if o["op"] in GENERATORS), default=None)
    if last is None:
        raise ExportError("%s: no generator recorded" % what)
    ops = ops[last:]
    if ops[0]["op"] == "empty":
        raise ExportError("%s: never initialized (its values are torch.empty's); "
                          "initialize it in the constructor or load a checkpoint"
                          % what)
    gshape = list(chain.shape)
    if gshape != list(shape):
        if any(o["op"] == "fill_rows" for o in ops):
            raise ExportError("%s: rows filled on a tensor of shape %s that is then viewed as "
                              "%s (fill_rows sets rows of the final shape)"
                              % (what, gshape, list(shape)))
        ops[0]["shape"] = gshape
        ops.append({"op": "reshape", "shape": list(shape)})
    if ops[0]["op"] == "orthogonal" and any(o["op"] in ("reshape", "transpose", "permute", "slice")
                                            for o in ops[1:]):
        raise ExportError("%s: orthogonal followed by a view is not expressible" % what)
    if ops[0]["op"] == "eye" and len(gshape) != 2:
        raise ExportError("%s: eye on a %d-d tensor" % (what, len(gshape)))
    return ops
