"""What both lowerings (fx: lowering.py, ATen: aten.py) share: the graph
they build (nodes, extra buffers, scalar constants) and its names.

Both walk a traced program and append graph-format nodes (docs/graph-format.md);
only how they read torch's graph differs. Keeping the naming rules here means
a name collision or an output rename behaves the same on either path."""

import math

import torch

from .init_recorder import ExportError


class G:
    """A graph tensor: its name in the graph and a meta tensor of its shape."""

    def __init__(self, name, val):
        self.name = name
        self.val = val  # a meta tensor (shape, dtype)

    @property
    def shape(self):
        return list(self.val.shape)


# torch dtype -> graph-format dtype name (docs/graph-format.md).
GRAPH_DTYPES = {torch.float32: "float32", torch.float64: "float64",
                torch.float16: "float16", torch.bfloat16: "bfloat16",
                torch.int64: "int64"}


def json_float(value):
    """A float for the graph file: the number, or "inf", "-inf", "nan" (JSON
    has no literal for them; docs/graph-format.md)."""
    value = float(value)
    if math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def value_dtype(dtype):
    """The graph dtype of a value torch computes in `dtype`: GRAPH_DTYPES',
    and int64 for torch's bool and narrower integer types, which the graph
    carries as int64 with the same values (docs/ops.md, "Integer values");
    None for dtypes the graph cannot hold (complex)."""
    if dtype in GRAPH_DTYPES:
        return GRAPH_DTYPES[dtype]
    if dtype == torch.bool or not (dtype.is_floating_point or dtype.is_complex):
        return "int64"
    return None


class GraphEmitter:
    def __init__(self, params, buffers, input_decls, device):
        self.device = device
        self.nodes = []
        self.graph_buffers = {}  # name -> decl (constants made while lowering)
        self.consts = {}         # (value, dtype) -> G
        self.meta = {}           # node result name -> (shape, graph dtype)
        # node result name -> the concrete tensor it holds, for values the ATen
        # capture folded and then wrote as graph ops (aten_consts.materialize):
        # lets a rewrite see that a mask is the causal one (attention_fusion.py)
        self.const_values = {}
        self.used_names = set(params.values()) | set(buffers.values()) | \
            {d["name"] for d in input_decls}

    def fresh(self, base):
        """`base`, or `base.1`, `base.2`... whichever is not taken yet."""
        base = str(base)
        name, i = base, 1
        while name in self.used_names:
            name = "%s.%d" % (base, i)
            i += 1
        self.used_names.add(name)
        return name

    def append(self, base, op, inputs, val, attrs):
        name = self.fresh(base)
        n = {"name": name, "op": op, "inputs": [x.name for x in inputs]}
        # an infinite or NaN attribute as its string (json_float): a bare
        # float would be written as Infinity, which is not JSON
        n.update({k: json_float(v) if isinstance(v, float) and not math.isfinite(v) else v
                  for k, v in attrs.items()})
        self.nodes.append(n)
        if hasattr(val, "shape"):  # for rewrites of the node list (attention_fusion.py)
            self.meta[name] = (list(val.shape), value_dtype(val.dtype))
        return G(name, val)

    def const(self, value, like):
        """A 0-d buffer holding a Python number (fill), dtype of `like`."""
        dt = value_dtype(like.val.dtype)
        key = (float(value), dt)
        if key not in self.consts:
            name = self.fresh("const.%r" % float(value) if math.isfinite(value)
                              else "const." + json_float(value))
            self.graph_buffers[name] = {"name": name, "shape": [], "dtype": dt,
                                        "device": self.device,
                                        "init": [{"op": "fill", "value": json_float(value)}]}
            self.consts[key] = G(name, torch.empty((), dtype=like.val.dtype, device="meta"))
        return self.consts[key]

    def name_outputs(self, outs, output_names):
        """Graph names of the output tensors `outs` (G values): the user's
        --output-names (else output / output.i), given to the node that
        produced each one when that name is free."""
        if not outs:
            raise ExportError("forward returns no tensor")
        names = output_names or (["output"] if len(outs) == 1 else
                                 ["output.%d" % i for i in range(len(outs))])
        if len(names) != len(outs):
            raise ExportError("--output-names gives %d names for %d outputs"
                              % (len(names), len(outs)))
        outputs = []
        for v, want in zip(outs, names):
            if not isinstance(v, G):
                raise ExportError("output %s is not a tensor of the graph" % want)
            produced = any(n.get("name") == v.name for n in self.nodes)
            if produced and want not in self.used_names and want not in outputs:
                self.rename(v.name, want)
                outputs.append(want)
            else:
                outputs.append(v.name)
        return outputs

    def rename(self, old, new):
        self.used_names.add(new)
        if old in self.meta:
            self.meta[new] = self.meta.pop(old)
        if old in self.const_values:
            self.const_values[new] = self.const_values.pop(old)
        for n in self.nodes:
            if n.get("name") == old:
                n["name"] = new
            n["inputs"] = [new if x == old else x for x in n["inputs"]]
