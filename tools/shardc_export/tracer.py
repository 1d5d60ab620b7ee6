"""torch.fx tracing with concrete shapes.

Plain `torch.fx.symbolic_trace` cannot trace most transformer code
(`B, T, C = x.size()`, `math.sqrt(k.size(-1))`, `assert t <= block_size`):
sizes are Proxies. `ConcreteTracer` runs every traced op on meta tensors as it
records it (node.meta["shardc_val"]), so sizes, shapes, dtypes and devices
are plain Python values: the graph is specialized to the given input shapes,
which is what a shardc graph file is anyway.
"""

import torch.fx as fx
from torch.fx.node import map_aggregate

from .init_recorder import ExportError

VAL = "shardc_val"


class MetaProxy(fx.Proxy):
    @property
    def _val(self):
        return self.node.meta.get(VAL)

    def size(self, dim=None):
        v = self._val
        return v.size() if dim is None else v.size(dim)

    @property
    def shape(self):
        return self._val.shape

    @property
    def ndim(self):
        return self._val.dim()

    def dim(self):
        return self._val.dim()

    def numel(self):
        return self._val.numel()

    def nelement(self):
        return self._val.numel()

    @property
    def dtype(self):
        return self._val.dtype

    @property
    def device(self):
        return self._val.device

    @property
    def is_cuda(self):
        return False

    def __len__(self):
        return len(self._val)

    def __iter__(self):
        v = self._val
        if isinstance(v, (tuple, list)):
            return iter([self[i] for i in range(len(v))])
        return iter([self[i] for i in range(v.shape[0])])

    def __bool__(self):
        return bool(self._val)

    def __float__(self):
        return float(self._val)

    def __int__(self):
        return int(self._val)

    def __index__(self):
        return int(self._val)


def _default_leaf(m):
    """torch.nn's own modules, plus RMSNorm / rotary modules by convention
    (docs/exporter.md)."""
    name = type(m).__name__
    if name.endswith("RMSNorm") and hasattr(m, "weight"):
        return True
    if "Rotary" in name and (hasattr(m, "theta") or hasattr(m, "base")):
        return True
    return False


class ConcreteTracer(fx.Tracer):
    def __init__(self, inputs):
        super().__init__()
        self.inputs = inputs          # placeholder name -> meta tensor / value
        self.record_stack_traces = True
        self._computing = 0

    def proxy(self, node):
        return MetaProxy(node, self)

    def is_leaf_module(self, m, qualname):
        return _default_leaf(m) or super().is_leaf_module(m, qualname)

    def getattr(self, attr, attr_val, parameter_proxy_cache):
        if self._computing:
            return attr_val
        return super().getattr(attr, attr_val, parameter_proxy_cache)

    def _fetch(self, target):
        self._computing += 1
        try:
            obj = self.root
            for part in target.split("."):
                obj = getattr(obj, part)
            return obj
        finally:
            self._computing -= 1

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None,
                     proxy_factory_fn=None):
        p = super().create_proxy(kind, target, args, kwargs, name, type_expr,
                                 proxy_factory_fn)

        def val(a):
            if isinstance(a, fx.Proxy):
                return a.node.meta.get(VAL)
            return a
        if kind == "placeholder":
            v = self.inputs.get(target)
        elif kind == "get_attr":
            v = self._fetch(target)
        elif kind == "output":
            v = None
        else:
            a = map_aggregate(args, val)
            kw = map_aggregate(kwargs, val)
            self._computing += 1
            try:
                if kind == "call_function":
                    v = target(*a, **kw)
                elif kind == "call_method":
                    v = getattr(a[0], target)(*a[1:], **kw)
                else:  # call_module
                    v = self.root.get_submodule(target).forward(*a, **kw)
            except ExportError:
                raise
            except Exception as e:
                raise ExportError("%s %s failed on meta tensors: %s%s" % (
                    kind, getattr(target, "__name__", target), e,
                    where(p.node)))
            finally:
                self._computing -= 1
        p.node.meta[VAL] = v
        return p


def where(node):
    """' at FILE:LINE: `code`' from an fx node's recorded stack trace."""
    st = getattr(node, "stack_trace", None) or ""
    lines = [l for l in st.strip().splitlines() if l.strip()]
    # frames are 'File "...", line N, in f' followed by the code line
    frames = []
    i = 0
    while i < len(lines):
        l = lines[i].strip()
        if l.startswith("File "):
            code = lines[i + 1].strip() if i + 1 < len(lines) and \
                not lines[i + 1].strip().startswith("File ") else ""
            frames.append((l, code))
        i += 1
    if not frames:
        return ""
    user = [f for f in frames if "shardc_export" not in f[0] and "/torch/" not in f[0]]
    loc, code = (user or frames)[0]
    try:
        fname = loc.split('"')[1]
        line = loc.split("line ")[1].split(",")[0]
        loc = "%s:%s" % (fname, line)
    except IndexError:
        pass
    return " at %s%s" % (loc, (": `%s`" % code) if code else "")


def trace(model, inputs, concrete_args):
    tracer = ConcreteTracer(inputs)
    try:
        graph = tracer.trace(model, concrete_args=concrete_args or None)
    except ExportError:
        raise
    except Exception as e:
        raise ExportError("torch.fx could not trace %s.forward: %s: %s" % (
            type(model).__name__, type(e).__name__, e))
    return tracer, graph
