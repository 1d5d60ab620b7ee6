"""ATen-level capture (torch >= 2): torch.export traces forward through torch's
dispatcher, run_decompositions() brings it to Core ATen IR, and each ATen op is
mapped here to shardc graph nodes (docs/exporter.md, "ATen capture").

Modules, tensor methods and torch.nn.functional calls need no hand mapping:
whatever they do reaches this file as a few dozen ATen ops. Shapes are
specialised on the example inputs (torch.export's static shapes); the graph
records them under "specialized". An ATen op without a mapping fails with
ExportError naming the op, the module path and the source line.
"""

import contextlib
import math
import operator

import torch

from .init_recorder import _FACTORIES, ExportError, to_graph_chain
from .graph_emitter import GRAPH_DTYPES, G, GraphEmitter, value_dtype
from . import aten_consts as hf
from . import aten_values

aten = torch.ops.aten

# Kept whole rather than decomposed: the graph format has one fused attention
# op (scaled_dot_product_attention), measurably better than the matmul /
# softmax / matmul chain it would otherwise decompose into;
# hardswish / hardsigmoid are single unary graph ops (the op table's unary
# family): one pass and one buffer instead of the four elementwise ops and
# three buffers of their decomposition; mish, softplus, celu and
# logsigmoid too (their decompositions reach log1p, expm1 or minimum, which
# have no graph op).
# Pooling too: the table may rewrite an adaptive pool into as_strided views
# (convnext at a 2x2 map), which have no graph op, where the pool is one.
KEPT_WHOLE = (aten.scaled_dot_product_attention.default, aten.hardswish.default,
              aten.hardsigmoid.default, aten.mish.default, aten.softplus.default,
              aten.celu.default, aten.log_sigmoid_forward.default,
              aten._adaptive_avg_pool2d.default,
              aten.adaptive_max_pool2d.default, aten.avg_pool2d.default,
              aten.max_pool2d_with_indices.default, aten._adaptive_avg_pool3d.default,
              aten.adaptive_max_pool3d.default, aten.avg_pool3d.default,
              aten.max_pool3d_with_indices.default,
              # F.fold: one transposed convolution instead of an accumulating index_put
              aten.col2im.default,
              # F.cross_entropy: the graph's cross_entropy (the decomposition
              # gathers the target's log-probability and sums int64 counts)
              aten.nll_loss_forward.default,
              # x.detach(): the graph's detach (no gradient flows back), where
              # the decomposition leaves an alias like any other
              aten.detach.default,
              # vector norms: torch's gradient is 0 at a zero norm, its
              # decomposition's NaN (aten_norms.py)
              aten.linalg_vector_norm.default)


def _nll_loss_kept_if_plain(decompose):
    """nll_loss_forward's decomposition, except where the graph's
    cross_entropy op serves (a mean or a sum over [N, C] without class
    weights: kept whole, NotImplemented to the tracer; nll_loss below). Class
    weights, the 'none' reduction (per-token losses) and a single sample's
    [C] are torch's own graph of gather, where and sum."""
    def nll_loss_forward(x, target, weight, reduction, ignore_index):
        if weight is None and reduction in (1, 2) and x.dim() == 2:
            return NotImplemented
        return decompose(x, target, weight, reduction, ignore_index)
    return nll_loss_forward


class Expanded:
    """aten.expand's result, kept lazy: broadcasting consumers (elementwise ops,
    matmul) read the unexpanded base; anything else would need the expanded
    copy, which the graph format cannot express yet."""

    def __init__(self, base, shape):
        self.base, self.shape = base, list(shape)


class SpecializedInput(hf.Const):
    """An input specialised on its example values (specialize.py): a Const
    wherever ops fold, the graph input itself where a graph op reads it
    (shardc run checks that it holds these values)."""

    def __init__(self, t, graph_input):
        hf.Const.__init__(self, t)
        self.input = graph_input


class Unusable:
    """A value the graph cannot hold; an error only if an op reads it."""

    def __init__(self, why):
        self.why = why


class Multi:
    """A multi-result ATen op (native_layer_norm, split): getitem picks one."""

    def __init__(self, items):
        self.items = items


@contextlib.contextmanager
def no_fused_fast_paths():
    """nn.TransformerEncoderLayer / nn.MultiheadAttention take a fused eval
    fast path (_transformer_encoder_layer_fwd, _native_multi_head_attention)
    that has no decomposition; turning it off makes them trace op by op."""
    mha = getattr(torch.backends, "mha", None)
    if mha is None or not hasattr(mha, "set_fastpath_enabled"):
        yield
        return
    before = mha.get_fastpath_enabled()
    mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        mha.set_fastpath_enabled(before)


def where(node):
    """' in module PATH (Class) at FILE:LINE: `code`' for an exported node."""
    out = ""
    stack = node.meta.get("nn_module_stack") or {}
    if stack:
        path, cls = list(stack.values())[-1]
        cls = cls.__name__ if isinstance(cls, type) else str(cls).rsplit(".", 1)[-1]
        out += " in module %s (%s)" % (path or "<root>", cls)
    frames = []
    lines = [l for l in (node.meta.get("stack_trace") or "").splitlines() if l.strip()]
    for i, l in enumerate(lines):
        s = l.strip()
        if s.startswith("File "):
            code = lines[i + 1].strip() if i + 1 < len(lines) and \
                not lines[i + 1].strip().startswith("File ") else ""
            try:
                frames.append("%s:%s" % (s.split('"')[1], s.split("line ")[1].split(",")[0]),)
                frames[-1] = (frames[-1], code)
            except IndexError:
                pass
    if frames:
        # the innermost line of the user's code, then torch's own if deeper
        user = [f for f in frames if "/torch/" not in f[0] and "shardc_export" not in f[0]]
        loc, code = (user or frames)[-1]
        out += " at %s%s" % (loc, (": `%s`" % code) if code else "")
        if user and frames[-1] != user[-1]:
            out += " (in %s)" % frames[-1][0]
    return out


def _user_frame(error):
    """The innermost frame of the model's own code in `error`'s traceback:
    file:line in function (`source line`)."""
    import traceback
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if "/torch/" not in f.filename and "shardc_export" not in f.filename]
    if not frames:
        return "an unknown place"
    f = frames[-1]
    path = f.filename.split("/site-packages/")[-1]
    return "%s:%d in %s (`%s`)" % (path, f.lineno, f.name, (f.line or "").strip())


def _as_slice(index):
    """A Python list of ints that is an ascending run with a constant step (or
    one int) as the slice selecting the same elements, else None."""
    if not isinstance(index, list) or not index or \
            not all(isinstance(i, int) and not isinstance(i, bool) for i in index):
        return None
    if len(set(i < 0 for i in index)) != 1:
        return None  # mixed signs: positions depend on the size
    step = index[1] - index[0] if len(index) > 1 else 1
    if step <= 0 or any(b - a != step for a, b in zip(index, index[1:])):
        return None
    end = index[-1] + 1
    return slice(index[0], None if end == 0 else end, step)


class _ListIndexMode(torch.overrides.TorchFunctionMode):
    """x[..., [-2], :] (Falcon's key / value heads) indexes with a tensor made
    from the list inside forward; traced on meta, that constant has no
    values. The same elements as a slice keep the dim and need no tensor."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.__getitem__ and len(args) == 2:
            idx = args[1] if isinstance(args[1], tuple) else (args[1],)
            lists = [i for i, v in enumerate(idx) if isinstance(v, list)]
            # one list index among basic ones only: the result's dims stay in
            # place (beside an int or another list, advanced indexing moves
            # the broadcast dims first, which a slice would not reproduce)
            basic = all(i in lists or v is None or v is Ellipsis or isinstance(v, slice)
                        for i, v in enumerate(idx))
            if len(lists) == 1 and basic:
                at = lists[0]
                before, after = idx[:at], idx[at + 1:]
                # the dim the list indexes (None adds a dim, ... spans the rest)
                if any(v is Ellipsis for v in before):
                    dim = args[0].dim() - 1 - sum(v is not None and v is not Ellipsis
                                                  for v in after)
                else:
                    dim = sum(v is not None for v in before)
                size = args[0].shape[dim] if 0 <= dim < args[0].dim() else None
                in_range = size is not None and all(-size <= i < size for i in idx[at])
                sl = _as_slice(idx[at]) if in_range else None  # else torch's own error
                if sl is not None:
                    idx = idx[:lists[0]] + (sl,) + idx[lists[0] + 1:]
                    args = (args[0], idx)
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def list_indices_as_slices():
    with _ListIndexMode():
        yield


# Factories whose result has no values to keep (shape, fill or random draw
# only): made without a device, they follow the traced inputs onto meta.
# The fx capture's factory table (init_recorder._FACTORIES) but for those
# that take values.
_VALUELESS_FACTORIES = set(_FACTORIES) - {torch.tensor, torch.as_tensor}


class _FactoriesOnMetaMode(torch.overrides.TorchFunctionMode):
    """Code written for the CPU makes tensors inside forward without a
    device (`torch.arange(T)`, `torch.ones(B, T)`) and mixes them with its
    inputs, which is fine in eager; traced on meta inputs, torch refuses the
    mix ("found at least two devices, meta and cpu"). Such a factory call
    without a device is made on meta, as if it had said `device=x.device`.
    torch.tensor / as_tensor (values) are left alone."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _VALUELESS_FACTORIES and kwargs.get("device") is None:
            kwargs = dict(kwargs, device="meta")
        return func(*args, **kwargs)


# The first words of torch's error when forward mixes a tensor it made on
# the CPU with the meta inputs (see _FactoriesOnMetaMode).
DEVICE_MIX = "FakeTensorDeviceMismatchError"


def trace(model, metas, values=None, factories_on_meta=False):
    """torch.export on meta inputs, then Core ATen decompositions. `values`
    ({input name: CPU tensor}): example values of inputs that forward's
    control flow may read (specialize.py). `factories_on_meta`: trace under
    _FactoriesOnMetaMode. Returns the program and {input name: source line}
    of the inputs whose values were read."""
    from .specialize import shadowed_forward
    from .moe import static_experts
    factories = _FactoriesOnMetaMode() if factories_on_meta else contextlib.nullcontext()
    with no_fused_fast_paths(), static_experts(model), list_indices_as_slices(), \
            factories, shadowed_forward(model, values or {}) as shadows:
        try:
            ep = torch.export.export(model, (), dict(metas))
        except Exception as e:  # torch raises many types; say which, briefly
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            if type(e).__name__ == "GuardOnDataDependentSymNode" and any(
                    r in _user_frame(e) for r in ("rand(", "randn(", "bernoulli", "randint(")):
                raise ExportError(
                    "forward's Python control flow depends on a random draw at %s: a random "
                    "decision taken in Python (LayerDrop skipping whole layers in training, "
                    "as torchaudio's wav2vec2 does) has no static graph; export in eval mode, "
                    "or without the draw" % _user_frame(e))
            if type(e).__name__ == "GuardOnDataDependentSymNode":
                raise ExportError(
                    "forward's Python control flow depends on values at %s that the "
                    "ATen capture cannot specialise on: %s" % (
                        _user_frame(e),
                        "they are computed from tensors other than inputs with example "
                        "values (e.g. activations: a data-dependent shape)" if values else
                        "give the input it reads example values, "
                        "--input-shapes '{\"NAME\": {\"shape\": [...], \"dtype\": ..., "
                        "\"value\": [...]}}', to specialise on them (or pass what the value "
                        "decides as a constructor argument, or compute it without .item() / "
                        "int(tensor))"))
            raise ExportError("torch.export could not trace forward: %s: %s"
                              % (type(e).__name__, first))
        table = torch.export.default_decompositions()
        # (CustomDecompTable: indexing, not .get, reads its entries)
        nll = aten.nll_loss_forward.default
        decompose_nll_loss = table[nll] if nll in table else None
        for op in KEPT_WHOLE + hf.KEPT_WHOLE:
            if op in table:
                del table[op]
        if decompose_nll_loss is not None:
            table[nll] = _nll_loss_kept_if_plain(decompose_nll_loss)
        try:
            return ep.run_decompositions(table), dict(shadows.read)
        except Exception as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise ExportError("decomposing to Core ATen failed: %s: %s"
                              % (type(e).__name__, first))


class AtenLowering(GraphEmitter):
    """ExportedProgram -> graph nodes. Values are G (a graph tensor), Expanded,
    Multi or Python scalars."""

    def __init__(self, model, ep, params, buffers, buffer_chains, input_decls, device,
                 concrete=None, specialized=None):
        self.model, self.ep, self.device = model, ep, device
        # inputs whose values control flow read: constants of their example
        # values here (their ops fold), still graph inputs (shardc checks them)
        self.specialized = dict(specialized or {})
        self.input_decls = input_decls
        self.by_name = {}  # every (possibly tied) parameter name -> canonical name
        for name, p in model.named_parameters(remove_duplicate=False):
            self.by_name[name] = params[id(p)]
        self.buffer_names = {}
        for name, b in model.named_buffers(remove_duplicate=False):
            self.buffer_names[name] = buffers[id(b)]
        self.buffer_tensors = dict(model.named_buffers(remove_duplicate=False))
        self.buffer_chains = buffer_chains
        GraphEmitter.__init__(self, params, buffers, input_decls, device)
        self.vals = {}
        self.transposed = {}  # graph name of permute(W, [1, 0]) -> W (a parameter G)
        self.high = {}
        self.log_softmax_of = {}  # log_softmax result name -> (logits, dim)
        self.unbiased_linear = {}  # graph name -> its node dict (fold_bias adds one)
        self.params_shape = {}
        # constants built in forward, rotary / RMSNorm recognition (aten_consts.py)
        self.concrete, self.concrete_values = concrete, None
        self.slice_of = {}  # graph name of a slice -> (source G, dim, start, end)
        self.fused = hf.fused_modules(ep, lambda n: ep.graph_signature.inputs_to_parameters
                                      .get(n.name))
        self.updates = []  # (buffer name, G): the graph's "updates"
        self.untracked_updates = []  # buffers forward updates that the graph lacks
        self.rng_step = None  # dropout's step counter (rng_step_buffer)

    # ------------------------------------------------------------ helpers
    def fail(self, node, why):
        raise ExportError("cannot export ATen op %s%s: %s" % (node.target, where(node), why))

    @staticmethod
    def stem(node):
        """A node's graph name before uniquing: the module that ran the op
        (node.meta's module stack), then the ATen node's name."""
        stack = node.meta.get("nn_module_stack") or {}
        base = list(stack.values())[-1][0] if stack else ""
        return base + "." + node.name if base else node.name

    def emit(self, node, op, inputs, val, **attrs):
        return self.append(self.stem(node), op, inputs, val, attrs)

    def emit_dropout(self, node, x, p, val):
        """The graph's dropout of x: its mask's stream the FNV-1a hash of the
        node's name, its step counter rng.step (docs/rng.md)."""
        return self.emit(node, "dropout", [x, self.rng_step_buffer()], val, p=float(p),
                         stream=fnv1a32(self.stem(node)))

    def tensor(self, node, v, what="operand"):
        if isinstance(v, G):
            return v
        if isinstance(v, SpecializedInput):
            return v.input  # read as a tensor: the input itself holds these values
        if isinstance(v, hf.Lazy):
            return v.materialize(self, node)
        if isinstance(v, hf.Const):
            return hf.materialize(self, node, v)
        if isinstance(v, hf.Skipped):
            self.fail(node, "it reads an intermediate of module %s, lowered as one fused "
                      "node" % v.module)
        if isinstance(v, Unusable):
            self.fail(node, "its %s is a %s" % (what, v.why))
        if isinstance(v, Expanded):
            self.fail(node, "its %s is an expanded (broadcast) view that would have to be "
                      "materialized; only elementwise ops and matmul consume expand" % what)
        if isinstance(v, aten_complex.ComplexPair):
            self.fail(node, "its %s is a complex value: %s" % (what, aten_complex.SUPPORTED))
        self.fail(node, "its %s is %r, not a tensor of the graph" % (what, v))

    @staticmethod
    def out_shape(node):
        return list(node.meta["val"].shape)

    def reshape(self, node, x, shape):
        if list(x.shape) == list(shape):
            return x
        return self.emit(node, "reshape", [x], node.meta["val"], shape=list(shape))

    # ------------------------------------------------------------ run
    def run(self, output_names=None):
        sig = self.ep.graph_signature
        user_inputs = [s.arg.name for s in sig.input_specs
                       if s.kind == torch.export.graph_signature.InputKind.USER_INPUT]
        decl_names = [d["name"] for d in self.input_decls]
        mutations, untracked = self.buffer_mutations(sig)
        out_vals = None
        for node in self.ep.graph.nodes:
            if node.op == "placeholder":
                self.vals[node] = self.placeholder(node, sig, user_inputs, decl_names)
            elif node.op == "output":
                out_vals = node.args[0]
            elif node.op == "call_function":
                self.vals[node] = untracked[node] if node in untracked else self.lower(node)
            else:
                self.fail(node, "graph node kind %s is not supported" % node.op)
        self.record_updates(mutations)
        user = [s.arg.name for s in sig.output_specs
                if s.kind == torch.export.graph_signature.OutputKind.USER_OUTPUT]
        out_vals = [v for v in out_vals
                    if not isinstance(v, torch.fx.Node) or v.name in user]
        outs = []
        for v in out_vals:
            if v is None:
                # an absent optional output (torchaudio's wav2vec2 returns
                # (features, None) without lengths): no tensor, no output,
                # as the eager side's flattening skips it too
                continue
            val = self.vals.get(v) if isinstance(v, torch.fx.Node) else v
            if isinstance(val, SpecializedInput):
                val = val.input  # returned as it came (the Conformer's lengths)
            if isinstance(val, hf.Lazy):
                val = val.materialize(self, v)
            if isinstance(val, Expanded):
                raise ExportError("forward returns an expanded view; the graph format "
                                  "cannot materialize it yet")
            if not isinstance(val, G):
                raise ExportError("forward returns %r, not a tensor" % (val,))
            outs.append(val)
        return self.name_outputs(outs, output_names)

    def buffer_mutations(self, sig):
        """The buffers forward overwrites (a training-mode batch norm's running
        statistics): [(buffer target, value node)], and {node: Unusable} for
        the updates of int64 buffers the graph does not hold (BatchNorm's
        num_batches_tracked, read only when momentum is None), whose nodes
        are then not lowered."""
        mutations, untracked = [], {}
        nodes = {n.name: n for n in self.ep.graph.nodes}
        for spec in sig.output_specs:
            if spec.kind != torch.export.graph_signature.OutputKind.BUFFER_MUTATION:
                continue
            value = nodes[spec.arg.name]
            t = self.buffer_tensors.get(spec.target)
            if t is not None and t.is_floating_point():
                mutations.append((spec.target, value))
                continue
            self.untracked_updates.append(spec.target)
            if value.op == "call_function" and all(u.op == "output" for u in value.users):
                untracked[value] = Unusable("update of %s, a %s buffer the graph does not "
                                            "hold" % (spec.target, t.dtype if t is not None
                                                      else "non-tensor"))
        return mutations, untracked

    def rng_step_buffer(self):
        """rng.step: the 0-d float32 count of forwards run, which dropout's
        masks read (a new mask each step); zero at init, not in the model's
        state_dict (persistent false), advanced by one after each forward."""
        if self.rng_step is None:
            name = self.fresh("rng.step")
            self.graph_buffers[name] = {"name": name, "shape": [], "dtype": "float32",
                                        "device": self.device, "persistent": False,
                                        "init": [{"op": "zeros"}]}
            self.rng_step = G(name, torch.empty((), dtype=torch.float32, device="meta"))
        return self.rng_step

    def record_updates(self, mutations):
        """The graph's "updates": each overwritten floating buffer gets the
        value forward computed for it, in the buffer's dtype."""
        for target, value_node in mutations:
            bname = self.buffer_names[target]
            v = self.vals.get(value_node)
            if isinstance(v, hf.Lazy):
                v = v.materialize(self, value_node)
            if not isinstance(v, G):
                raise ExportError("forward overwrites buffer %s with %r, not a tensor of the "
                                  "graph" % (bname, v))
            if v.name == bname:
                continue  # written back unchanged (eval-mode batch norm)
            want = self.buffer_tensors[target].dtype
            if v.val.dtype != want:
                v = self.emit(value_node, "cast", [v],
                              torch.empty(list(v.shape), dtype=want, device="meta"),
                              dtype=GRAPH_DTYPES[want])
            if not any(n.get("name") == v.name for n in self.nodes):
                raise ExportError("forward overwrites buffer %s with %s, which no op of "
                                  "forward computes" % (bname, v.name))
            self.updates.append((bname, v))
        if self.rng_step is not None:  # one more forward counted
            step = self.rng_step
            nxt = self.append(step.name + ".next", "add", [step, self.const(1.0, step)],
                              step.val, {})
            self.updates.append((step.name, nxt))

    def placeholder(self, node, sig, user_inputs, decl_names):
        name = node.name
        if name in sig.inputs_to_parameters:
            pname = self.by_name[sig.inputs_to_parameters[name]]
            return G(pname, node.meta["val"])
        if name in sig.inputs_to_buffers:
            target = sig.inputs_to_buffers[name]
            bname = self.buffer_names[target]
            t = self.buffer_tensors[target]
            c = self.buffer_const(target, bname, t)
            if c is not None:
                return c
            if t.dtype not in GRAPH_DTYPES or t.dtype == torch.int64:
                # e.g. BatchNorm's num_batches_tracked: fine as long as forward
                # does not read it
                return Unusable("buffer %s of dtype %s (graph buffers are floating point)"
                                % (bname, t.dtype))
            if bname not in self.graph_buffers:
                init = to_graph_chain(self.buffer_chains.get(bname), list(t.shape),
                                      "buffer " + bname)
                self.graph_buffers[bname] = {"name": bname, "shape": list(t.shape),
                                             "dtype": GRAPH_DTYPES[t.dtype],
                                             "device": self.device, "init": init}
            return G(bname, node.meta["val"])
        if name in user_inputs:
            decl = self.input_decls[user_inputs.index(name)]
            if decl["name"] in self.specialized:
                return SpecializedInput(
                    torch.tensor(decl["value"], dtype=node.meta["val"].dtype)
                    .reshape(decl["shape"]), G(decl["name"], node.meta["val"]))
            return G(decl["name"], node.meta["val"])
        lifted = getattr(sig, "inputs_to_lifted_tensor_constants", {}).get(name)
        value = self.ep.constants.get(lifted) if lifted is not None else None
        if isinstance(value, torch.Tensor) and value.device.type != "meta":
            # a plain tensor attribute, or a tensor built in forward (not a
            # parameter or buffer): a constant, folded like those
            return hf.Const(value.detach())
        if isinstance(value, torch.Tensor) and value.numel() == 0:
            # an empty tensor built in forward has no values to miss, even
            # on meta: transformers' key / value cache starts as
            # torch.tensor([]) in every attention layer (use_cache=True,
            # the default), then cat skips it
            return hf.Const(torch.empty(value.shape, dtype=value.dtype))
        raise ExportError("forward reads a tensor constant %s built outside the parameters "
                          "and buffers%s; the ATen path cannot express it yet" % (
                              name, " (on the meta device: no values)" if value is not None
                              else ""))

    def buffer_const(self, target, bname, t):
        """A buffer folded as a constant (aten_consts.py): integer ones (position
        / token type ids) and those whose init chain the graph cannot express
        (rotary inv_freq, Gemma's embed_scale), read from an instance built
        with its parameters on meta."""
        if self.concrete is None:
            return None
        if t.is_floating_point():
            try:
                to_graph_chain(self.buffer_chains.get(bname), list(t.shape), "buffer " + bname)
                return None
            except ExportError:
                pass
        if self.concrete_values is None:
            self.concrete_values = self.concrete()
        v = self.concrete_values.get(target)
        if v is None or v.numel() > hf.MAX_CONST_ELEMENTS:
            return None
        return hf.Const(v)

    # ------------------------------------------------------------ ops
    def lower(self, node):
        def arg(a):
            if isinstance(a, torch.fx.Node):
                return self.vals[a]
            if isinstance(a, (list, tuple)):
                return type(a)(arg(x) for x in a)
            return a
        if node.target in hf.NO_VALUE:
            return None
        spec = self.fused.get(node)
        if spec is not None:
            return hf.Skipped(spec[1]) if spec[0] == "skip" else hf.lower_fused(self, node, spec)
        args = [arg(a) for a in node.args]
        kwargs = {k: arg(v) for k, v in node.kwargs.items()}
        uniform = random_uniform_rule(self, node, args)  # a drop path's torch.rand
        if uniform is not None:
            return uniform
        folded = hf.try_fold(self, node, args, kwargs)
        if folded is not None:
            return folded
        hf_rule = hf.HF_RULES.get(node.target)
        if hf_rule is not None:
            out = hf_rule(self, node, *args, **kwargs)
            if out is not None:
                return out
        rule = RULES.get(node.target)
        if rule is None:
            moe = hf.mixture_of_experts(node)
            if moe:
                self.fail(node, moe)
            self.fail(node, "no mapping to a shardc graph op (docs/exporter.md lists the "
                      "ATen ops the exporter maps)")
        return rule(self, node, *args, **kwargs)


# ---------------------------------------------------------------- rules
def copy_into(self, node, dst, src, non_blocking=False):
    """aten.copy (functionalized in-place assignment, `a[...] = b`): the
    result is src in dst's shape and dtype; dst's values are not read."""
    if isinstance(src, Expanded) and list(src.shape) == self.out_shape(node):
        return src
    src = self.tensor(node, src)
    if list(src.shape) != self.out_shape(node):
        self.fail(node, "expected the shape to be kept")
    return aten_values.cast_to(self, node, src, node.meta["val"].dtype)


def identity(self, node, x, *rest, **kw):
    if isinstance(x, Expanded):
        return x
    x = self.tensor(node, x)
    if list(x.shape) != self.out_shape(node):
        self.fail(node, "expected the shape to be kept")
    if node.meta["val"].dtype != x.val.dtype:
        self.fail(node, "dtype conversion %s -> %s has no graph op"
                  % (x.val.dtype, node.meta["val"].dtype))
    return x


def detach(self, node, x):
    """x.detach(): the graph's detach, the same values with no gradient
    flowing back through it (a stop-gradient inside forward: a consistency
    loss's target, BYOL). What no gradient reaches anyway (constants, masks
    and ranges built lazily) passes through."""
    if not isinstance(x, G):
        return identity(self, node, x)
    return self.emit(node, "detach", [x], node.meta["val"])


def view(self, node, x, *rest, **kw):
    out = self.out_shape(node)
    if isinstance(x, Expanded):
        if out == x.shape:
            return x
        lazy = reshape_expanded(self, node, x, out)
        if lazy is not None:
            return lazy
        # any other reshape reads the broadcast copy
        x = materialize(self, node, x)
    return self.reshape(node, self.tensor(node, x), out)


def reshape_expanded(self, node, x, out):
    """An expanded view reshaped only by inserting or dropping size-1 dims
    (MViT's `class_token.expand(B, -1).unsqueeze(1)`) stays lazy: the base
    gets the same size-1 dims. None for any other reshape."""
    if [n for n in x.shape if n != 1] != [n for n in out if n != 1]:
        return None
    # the base's shape aligned on the right with the expanded one (broadcast)
    base = [1] * (len(x.shape) - len(x.base.shape)) + list(x.base.shape)
    kept = iter(b for n, b in zip(x.shape, base) if n != 1)
    new_base = [1 if n == 1 else next(kept) for n in out]
    b = x.base
    if new_base != list(b.shape):
        b = self.emit(node, "reshape", [b],
                      torch.empty(new_base, dtype=b.val.dtype, device="meta"), shape=new_base)
    return b if new_base == out else Expanded(b, out)


def permute(self, node, x, dims):
    # an expanded view permuted (BoTNet's relative logits) is materialized
    x = materialize(self, node, x) if isinstance(x, Expanded) else self.tensor(node, x)
    rank = len(x.shape)
    dims = [d % rank for d in dims] if rank else []
    if dims == list(range(rank)):
        return x
    g = self.emit(node, "permute", [x], node.meta["val"], dims=dims)
    if dims == [1, 0] and x.name in self.by_name.values():
        self.transposed[g.name] = x
    return g


def expand(self, node, x, size, **kw):
    x = self.tensor(node, x)
    out = self.out_shape(node)
    if out == list(x.shape):
        return x
    return Expanded(x, out)


def as_strided(self, node, x, size, stride, storage_offset=0):
    """Only the as_strided that re-reads a tensor in its own row-major order
    (a decomposition's restride of size-1 dims, e.g. a pooled [N, C, 1, 1]):
    a reshape. Other strides need a strided copy of torch's storage."""
    x = self.tensor(node, x)
    size = [int(v) for v in size]
    contiguous, step = [], 1
    for n in reversed(size):
        contiguous.insert(0, step)
        step *= n
    same_order = all(n == 1 or int(s) == c for n, s, c in zip(size, stride, contiguous))
    if storage_offset or not same_order or step != x.val.numel():
        self.fail(node, "as_strided with strides %s (not the tensor's own order) has no "
                  "graph op" % list(stride))
    return self.reshape(node, x, size)


def select(self, node, x, dim, index):
    x = self.tensor(node, x)
    dim %= len(x.shape)
    index = index + x.shape[dim] if index < 0 else index
    s = self.emit(node, "slice", [x], node.meta["val"], dim=dim, start=index, end=index + 1)
    s = G(s.name, torch.empty(x.shape[:dim] + [1] + x.shape[dim + 1:], device="meta",
                              dtype=x.val.dtype))
    return self.reshape(node, s, self.out_shape(node))


def slice_(self, node, x, dim=0, start=None, end=None, step=1):
    x = self.tensor(node, x)
    dim %= len(x.shape)
    n = x.shape[dim]
    start = 0 if start is None else (start + n if start < 0 else start)
    end = n if end is None else (end + n if end < 0 else end)
    start, end = max(0, min(start, n)), max(0, min(end, n))
    if start == 0 and end == n and step == 1:
        return x
    g = self.emit(node, "slice", [x], node.meta["val"], dim=dim, start=start, end=end,
                  step=step)
    if step == 1:
        self.slice_of[g.name] = (x, dim, start, end)
    return g


def operand(self, node, v, like):
    """An elementwise operand: a tensor, the base of an expand, or a scalar."""
    if isinstance(v, Expanded):
        return v.base
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return self.const(v, like)
    if isinstance(v, hf.Const):
        return hf.materialize(self, node, v, like, broadcast=True)
    return self.tensor(node, v)


def elementwise(op):
    def rule(self, node, a, b, alpha=1):
        a, b = (v.materialize(self, node) if isinstance(v, hf.Lazy) else v for v in (a, b))
        like = a if isinstance(a, G) else (a.base if isinstance(a, Expanded) else
                                          (b.base if isinstance(b, Expanded) else b))
        if not isinstance(like, G):
            self.fail(node, "both operands are scalars")
        out_dtype = node.meta["val"].dtype
        if out_dtype == torch.bool and op != "mul":
            self.fail(node, "%s of bool values (logical) has no graph op" % op)
        # torch's type promotion: scalars are made in the result's dtype and
        # tensor operands cast to it (an int mask times a float, x.float() *
        # a bfloat16 weight); ints and bools are int64 in the graph
        like = G(like.name, torch.empty(like.shape, dtype=out_dtype, device="meta"))
        a, b = (aten_values.cast_to(self, node, operand(self, node, v, like), out_dtype)
                for v in (a, b))
        if alpha != 1:
            b = self.emit(node, "mul", [b, self.const(alpha, like)], b.val)
        if torch.broadcast_shapes(tuple(a.shape), tuple(b.shape)) != \
                torch.Size(self.out_shape(node)):
            self.fail(node, "its operands do not broadcast to the result")
        if value_dtype(out_dtype) is None:
            self.fail(node, "dtype %s has no graph dtype" % out_dtype)
        if op == "add" and fold_bias(self, node, a, b):
            return G(a.name, node.meta["val"])
        return self.emit(node, op, [a, b], node.meta["val"])
    return rule


def fold_bias(self, node, a, b):
    """linear(x, W) + bias, with the linear used only here, is linear(x, W, bias):
    F.linear on a 3-d input decomposes to a matmul and a separate add."""
    lin = self.unbiased_linear.get(a.name)
    src = node.args[0]
    if lin is None or not isinstance(src, torch.fx.Node) or len(src.users) != 1:
        return False
    weight = lin["inputs"][1]
    if b.name not in self.by_name.values() or list(b.shape) != [self.params_shape[weight][0]]:
        return False
    lin["inputs"].append(b.name)
    del self.unbiased_linear[a.name]
    return True


def unary(op, **attrs):
    def rule(self, node, x, *rest, **kw):
        return self.emit(node, op, [self.tensor(node, x)], node.meta["val"], **attrs)
    return rule


def log1p(self, node, x):
    """log1p(x) as log(1 + x): the graph has no log1p op. x + 1 rounds away
    an |x| below half an ulp of 1 (6e-8 in float32), so the result is within
    that much of torch's; nn.BCELoss's log(1 - p) reaches it (torch computed
    it as log(1 - p) before it used log1p)."""
    x = self.tensor(node, x)
    val = node.meta["val"]
    one_plus = self.emit(node, "add", [x, self.const(1.0, x)], val)
    return self.emit(node, "log", [one_plus], val)


def expm1(self, node, x):
    """expm1(x) as exp(x) - 1: the graph has no expm1 op. Within half an ulp
    of 1 (6e-8 in float32) of torch's in absolute terms, not relative to a
    small result; Apertus's xIELU activation reaches it (expm1(x) - x)."""
    x = self.tensor(node, x)
    val = node.meta["val"]
    e = self.emit(node, "exp", [x], val)
    return self.emit(node, "sub", [e, self.const(1.0, x)], val)


def gelu(self, node, x, approximate="none"):
    return self.emit(node, "gelu", [self.tensor(node, x)], node.meta["val"],
                     approximate=approximate)


def softmax(self, node, x, dim, half_to_float=False):
    x = self.tensor(node, x)
    if half_to_float:
        self.fail(node, "half_to_float softmax has no graph op")
    return self.emit(node, "softmax", [x], node.meta["val"], dim=dim % len(x.shape))


def log_softmax(self, node, x, dim, half_to_float=False):
    """x - max - log(sum(exp(x - max))) over `dim`: the graph has no
    log_softmax op. nll_loss of it (F.cross_entropy) becomes the graph's
    cross_entropy instead, and these nodes are left unread."""
    x = self.tensor(node, x)
    if half_to_float:
        self.fail(node, "half_to_float log_softmax has no graph op")
    d = dim % len(x.shape)
    kept = list(x.shape)
    kept[d] = 1
    kept = torch.empty(kept, dtype=x.val.dtype, device="meta")
    top = self.emit(node, "amax", [x], kept, dims=[d], keepdim=1)
    shifted = self.emit(node, "sub", [x, top], x.val)
    total = self.emit(node, "sum", [self.emit(node, "exp", [shifted], x.val)], kept,
                      dims=[d], keepdim=1)
    out = self.emit(node, "sub", [shifted, self.emit(node, "log", [total], kept)],
                    node.meta["val"])
    self.log_softmax_of[out.name] = (x, d)
    return out


def nll_loss(self, node, x, target, weight=None, reduction=1, ignore_index=-100):
    """nll_loss_forward of log_softmax over the classes of [N, C] logits,
    mean over the targets other than ignore_index: F.cross_entropy, the
    graph's cross_entropy op. Returns (loss, total_weight); only the loss is
    mapped."""
    source = self.log_softmax_of.get(getattr(x, "name", None))
    if source is None or source[1] != 1 or len(source[0].shape) != 2:
        self.fail(node, "nll_loss of anything but log_softmax over the classes of [N, C] "
                        "logits (F.cross_entropy) has no graph op")
    if weight is not None or reduction not in (1, 2):
        self.fail(node, "cross_entropy with class weights or a reduction other than mean "
                        "or sum has no graph op")
    attrs = {} if ignore_index == -100 else {"ignore_index": int(ignore_index)}
    target = self.tensor(node, target)
    val = node.meta["val"][0]
    loss = self.emit(node, "cross_entropy", [source[0], target], val, **attrs)
    if reduction == 2:
        loss = counted_sum(self, node, loss, target, ignore_index, val)
    return Multi([loss, None])


def counted_sum(self, node, mean, target, ignore_index, val):
    """reduction='sum' (Hugging Face's loss when the Trainer passes
    num_items_in_batch) as the mean times the number of counted targets, 0
    where none is counted (torch's sum; the mean is NaN there): the graph's
    cross_entropy stays, so the loss fuses with the head
    (--fuse-linear-cross-entropy) and splits over data-parallel ranks as the
    mean does. One rounding more than a direct sum (the mean's, to float)."""
    n = target.shape[0]
    counted = self.emit(node, "ne", [target], torch.empty([n], dtype=torch.bool, device="meta"),
                        value=float(ignore_index))
    counted = aten_values.cast_to(self, node, counted, val.dtype)
    count = self.emit(node, "sum", [counted], val)
    total = self.emit(node, "mul", [mean, count], val)
    return aten_values.where_of(self, node, count, total, 0.0, val.dtype)


def matmul_operand(self, node, v):
    """A matmul operand; an expand that only adds or widens batch dims is
    matmul's own broadcasting."""
    if isinstance(v, Expanded):
        if v.base.shape[-2:] != v.shape[-2:] or len(v.base.shape) < 2:
            self.fail(node, "an expand of the matrix dims needs it materialized")
        return v.base
    return self.tensor(node, v)


def matmul_like(self, node, a, b, bias=None):
    """a @ b (+ bias); a parameter W consumed as permute(W, [1, 0]) is nn.Linear."""
    a, b = matmul_operand(self, node, a), matmul_operand(self, node, b)
    w = self.transposed.get(b.name)
    if w is not None and (bias is None or list(bias.shape) == [w.shape[0]]):
        ins = [a, w] + ([bias] if bias is not None else [])
        out = self.emit(node, "linear", ins, node.meta["val"])
        if bias is None:
            self.unbiased_linear[out.name] = self.nodes[-1]
            self.params_shape[w.name] = w.shape
    else:
        out = self.emit(node, "matmul", [a, b], node.meta["val"])
        if bias is not None:
            out = self.emit(node, "add", [out, bias], node.meta["val"])
    if out.shape != self.out_shape(node):
        # bmm on batch dims that an expand broadcast: same elements, other dims
        if node.meta["val"].numel() != out.val.numel():
            self.fail(node, "both operands were expanded; the product needs them "
                      "materialized")
        out = self.reshape(node, out, self.out_shape(node))
    return out


def mm(self, node, a, b):
    return matmul_like(self, node, a, b)


def addmm(self, node, bias, a, b, beta=1, alpha=1):
    if beta != 1 or alpha != 1:
        self.fail(node, "addmm with beta/alpha other than 1 has no mapping yet")
    return matmul_like(self, node, a, b, bias=operand(self, node, bias, a))


def layer_norm(self, node, x, shape, weight=None, bias=None, eps=1e-5):
    """The graph's layer_norm normalizes the last dim with a weight and a
    bias. Over the last k dims (normalized_shape of k > 1: timm's
    LayerNorm2d on channels-last maps) x, weight and bias are seen with
    those dims as one; a missing weight or bias (timm's MetaFormer norms
    without bias) is a constant buffer of ones or zeros, which gives the
    same values as none (x_hat * 1 + 0 is x_hat exactly)."""
    x = self.tensor(node, x)
    shape = [int(n) for n in shape]
    k = len(shape)
    if k == 0 or shape != x.shape[len(x.shape) - k:]:
        self.fail(node, "normalized_shape %s is not the input's last dims %s"
                  % (shape, x.shape))
    inner = 1
    for n in shape:
        inner *= n
    flat = x.shape[:len(x.shape) - k] + [inner]
    dtype = x.val.dtype

    def as_row(t, fill):
        if t is None:
            return hf.fill_buffer(self, fill, [inner], dtype)
        t = self.tensor(node, t)
        if k == 1:
            return t
        return self.emit(node, "reshape", [t], torch.empty([inner], dtype=t.val.dtype,
                                                           device="meta"), shape=[inner])

    xin = x if k == 1 else self.emit(node, "reshape", [x], torch.empty(
        flat, dtype=dtype, device="meta"), shape=flat)
    g = self.emit(node, "layer_norm", [xin, as_row(weight, 1.0), as_row(bias, 0.0)],
                  torch.empty(flat, dtype=dtype, device="meta"), eps=float(eps))
    if k > 1:
        g = self.emit(node, "reshape", [g], node.meta["val"][0], shape=list(x.shape))
    return Multi([g, None, None])


def attention_with_dropout(self, node, q, k, v, bias, dropout_p, is_causal, scale):
    """scaled_dot_product_attention with dropout on its probabilities (a
    model exported with --train: GPT-2's attn_pdrop, BERT's
    attention_probs_dropout_prob): the fused op has no dropout, so the
    attention is written out as torch's math path computes it, softmax(q kT
    * scale + bias, causal -inf above the diagonal) then dropout then @ v, the
    probabilities a graph tensor [B, H, T, S] (saved for backward, as the
    math path saves them). 4-d q, k, v with as many key / value heads as
    query heads (the grouped-head case has dropout 0 in every model here)."""
    q, k, v = (self.tensor(node, t) for t in (q, k, v))
    if len(q.shape) != 4 or len(k.shape) != 4 or len(v.shape) != 4 or \
            not (q.shape[:2] == k.shape[:2] == v.shape[:2]):
        self.fail(node, "scaled_dot_product_attention with dropout on q, k, v of shapes %s, "
                  "%s, %s (with dropout: 4-d [B, H, T, E], as many key / value heads as query "
                  "heads)" % (q.shape, k.shape, v.shape))
    dt = q.val.dtype
    T, S = q.shape[2], k.shape[2]
    scores_shape = q.shape[:3] + [S]
    meta = (lambda shape: torch.empty(shape, dtype=dt, device="meta"))
    kt = self.emit(node, "transpose", [k], meta(k.shape[:2] + [k.shape[3], S]), dim0=2, dim1=3)
    scores = self.emit(node, "matmul", [q, kt], meta(scores_shape))
    factor = float(scale) if scale is not None else 1.0 / math.sqrt(q.shape[3])
    scores = self.emit(node, "mul", [scores, self.const(factor, q)], meta(scores_shape))
    if bias is not None:
        scores = self.emit(node, "add", [scores, bias], meta(scores_shape))
    if is_causal:
        if T != S:
            self.fail(node, "scaled_dot_product_attention: is_causal with %d queries and %d "
                      "keys" % (T, S))
        above = torch.ones(T, S, dtype=torch.bool).triu(1)
        mask = torch.zeros(T, S, dtype=dt).masked_fill(above, -math.inf)
        scores = self.emit(node, "add", [scores, hf.materialize(self, node, hf.Const(mask))],
                           meta(scores_shape))
    probs = self.emit(node, "softmax", [scores], meta(scores_shape), dim=-1)
    dropped = self.emit_dropout(node, probs, dropout_p, meta(scores_shape))
    return self.emit(node, "matmul", [dropped, v], node.meta["val"])


def sdpa(self, node, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    if dropout_p and attn_mask is None:
        return attention_with_dropout(self, node, q, k, v, None, dropout_p, is_causal, scale)
    if attn_mask is not None or dropout_p != 0.0:
        self.fail(node, "scaled_dot_product_attention with attn_mask or dropout has "
                  "no graph op yet")
    q, k, v = (self.tensor(node, t) for t in (q, k, v))
    k, v = attention_kv(self, node, q, k, v, enable_gqa)
    rank = len(q.shape)
    # the leading dims agree, but for 4-d k and v's grouped heads
    lead = (lambda t: t.shape[:1] if rank == 4 else t.shape[:-2])
    if rank < 3 or len(k.shape) != rank or len(v.shape) != rank or not (
            lead(q) == lead(k) == lead(v) and k.shape[:-1] == v.shape[:-1]):
        self.fail(node, "scaled_dot_product_attention on q, k, v of shapes %s, %s, %s (the "
                  "graph op takes [B, H, T, E] with k, v of [B, Hkv, S, E], and other ranks with "
                  "the same leading dims)"
                  % (q.shape, k.shape, v.shape))
    attrs = {"causal": bool(is_causal)}
    if scale is not None:
        attrs["scale"] = float(scale)
    if rank == 4:
        return self.emit(node, "scaled_dot_product_attention", [q, k, v], node.meta["val"],
                         **attrs)
    # [B, T, E] is one head; [B, X, H, T, E] (Hiera's mask units) is a batch of
    # B * X: attention is independent per leading index, so the leading dims
    # are one batch dim and come back after.
    lead, heads = q.shape[0], 1
    if rank > 3:
        lead, heads = 1, q.shape[-3]
        for n in q.shape[:-3]:
            lead *= n

    def as4(t):
        shape = [lead, heads] + list(t.shape[-2:])
        return self.emit(node, "reshape", [t], torch.empty(shape, dtype=t.val.dtype,
                                                           device="meta"), shape=shape)
    out4 = [lead, heads, q.shape[-2], v.shape[-1]]
    g = self.emit(node, "scaled_dot_product_attention", [as4(q), as4(k), as4(v)],
                  torch.empty(out4, dtype=q.val.dtype, device="meta"), **attrs)
    return self.reshape(node, g, self.out_shape(node))


def attention_kv(self, node, q, k, v, enable_gqa):
    """k and v as the attention op reads them beside q. On 4-d operands
    [B, H, T, E] the op takes k and v with Hkv heads, H a multiple of Hkv
    (grouped-query attention: query head h reads head h / (H / Hkv)), so
    nothing repeats them: not torch's enable_gqa, not transformers'
    repeat_kv (an expand over a new dim viewed as heads, which
    aten_consts.hf_view_expanded copies with cat and records: the op reads
    the unrepeated k and v, and the copies are left unread), not a shared
    head (Falcon's multi-query attention). A batch of 1 against q's batch
    is still copied; other ranks repeat the heads as before."""
    repeated = self.__dict__.get("repeated_heads", {})
    if len(q.shape) == 4 and k.name in repeated and v.name in repeated:
        k0, v0 = (unrepeated(self, node, repeated[t.name]) for t in (k, v))
        if k0.shape[:-1] == v0.shape[:-1]:
            k, v = k0, v0
    if len(q.shape) != 4 or len(k.shape) != 4 or len(v.shape) != 4 or \
            k.shape[1] != v.shape[1]:
        if enable_gqa:
            k, v = (repeat_heads(self, node, t, q) for t in (k, v))
        # k, v broadcast over q's leading dims: copies of the shared head
        return tuple(broadcast_leading(self, node, t, q) for t in (k, v))
    h, hkv = q.shape[1], k.shape[1]
    if hkv == 0 or h % hkv:
        self.fail(node, "scaled_dot_product_attention: %d query heads are not a multiple of "
                  "%d key / value heads" % (h, hkv))

    def batch_of_q(t):
        if t.shape[0] == q.shape[0] or t.shape[0] != 1:
            return t  # equal, or no broadcast: the op's shape check reports it
        return materialize(self, node, Expanded(t, [q.shape[0]] + list(t.shape[1:])))
    return batch_of_q(k), batch_of_q(v)


def unrepeated(self, node, base):
    """The key / value heads that transformers' repeat_kv expanded: its
    base [B, Hkv, 1, S, E] as [B, Hkv, S, E] (a reshape, free: an alias)."""
    shape = list(base.shape[:-3]) + list(base.shape[-2:])
    return self.emit(node, "reshape", [base], torch.empty(shape, dtype=base.val.dtype,
                                                          device="meta"), shape=shape)


def repeat_heads(self, node, t, q):
    """sdpa's enable_gqa: key / value head j serves query heads j*g ... j*g +
    g - 1 (g = query heads / key-value heads), i.e. each head repeated g
    times in place: [..., Hkv, T, E] -> [..., Hkv, g, T, E] -> [..., H, T, E]."""
    if len(t.shape) < 3 or len(q.shape) != len(t.shape):
        self.fail(node, "enable_gqa on q, k of shapes %s, %s" % (q.shape, t.shape))
    h, hkv = q.shape[-3], t.shape[-3]
    if h == hkv:
        return t
    if hkv == 0 or h % hkv:
        self.fail(node, "enable_gqa: %d query heads are not a multiple of %d key / value "
                  "heads" % (h, hkv))
    dtype = t.val.dtype
    split = list(t.shape[:-2]) + [1] + list(t.shape[-2:])
    base = self.emit(node, "reshape", [t], torch.empty(split, dtype=dtype, device="meta"),
                     shape=split)
    wide = list(t.shape[:-2]) + [h // hkv] + list(t.shape[-2:])
    copies = materialize(self, node, Expanded(base, wide))
    out = list(t.shape[:-3]) + [h] + list(t.shape[-2:])
    return self.emit(node, "reshape", [copies], torch.empty(out, dtype=dtype, device="meta"),
                     shape=out)


def broadcast_leading(self, node, t, q):
    """t with q's leading dims (all but the last two) where t has size 1 in
    them; t itself when they already agree or cannot broadcast (the shape
    check reports it)."""
    lead, want = list(t.shape[:-2]), list(q.shape[:-2])
    if lead == want or len(lead) != len(want) or \
            any(a != b and a != 1 for a, b in zip(lead, want)):
        return t
    return materialize(self, node, Expanded(t, want + list(t.shape[-2:])))


def embedding(self, node, weight, ids, padding_idx=-1, *rest):
    weight, ids = self.tensor(node, weight), self.tensor(node, ids)
    for d in self.input_decls:
        if d["name"] == ids.name:
            self.high[d["name"]] = weight.shape[0]
    # padding_idx changes only the backward (that row's gradient stays 0).
    extra = {"padding_idx": int(padding_idx)} if int(padding_idx) >= 0 else {}
    return self.emit(node, "embedding", [weight, ids], node.meta["val"], **extra)


def trilinear(self, node, i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    """aten._trilinear as F.bilinear calls it (nn.Bilinear):
    y[n, k] = sum_i sum_j x1[n, i] W[k, i, j] x2[n, j], x1 [N, I], W [K, I, J],
    x2 [N, J]: a `linear` of x1 by W's rows as [K * J, I] (a `permute` and a
    `reshape` of W), reshaped to [N, K, J], times x2 and summed over j.
    Other _trilinear forms are an error."""
    if (list(expand1), list(expand2), list(expand3), list(sumdim)) != ([1, 3], [0], [1, 2], [2, 3]):
        self.fail(node, "_trilinear other than F.bilinear's (expand1 [1, 3], expand2 [0], "
                  "expand3 [1, 2], sumdim [2, 3]) has no graph form")
    x1, w, x2 = self.tensor(node, i1), self.tensor(node, i2, "weight"), self.tensor(node, i3)
    out = node.meta["val"]
    (N, I), (K, _, J) = x1.shape, w.shape

    def meta(shape):
        return torch.empty(shape, dtype=out.dtype, device="meta")
    rows = self.emit(node, "permute", [w], meta([K, J, I]), dims=[0, 2, 1])
    rows = self.emit(node, "reshape", [rows], meta([K * J, I]), shape=[K * J, I])
    t = self.emit(node, "linear", [x1, rows], meta([N, K * J]))
    t = self.emit(node, "reshape", [t], meta([N, K, J]), shape=[N, K, J])
    x2 = self.emit(node, "reshape", [x2], meta([N, 1, J]), shape=[N, 1, J])
    t = self.emit(node, "mul", [t, x2], meta([N, K, J]))
    return self.emit(node, "sum", [t], out, dims=[2], keepdim=0)


def materialize(self, node, v):
    """An expanded view as a tensor of its own: base + zeros of the expanded
    shape (a zero-filled constant buffer), e.g. ViT's class token expanded
    over the batch before cat. Exact: x + 0 is x."""
    if not isinstance(v, Expanded):
        return self.tensor(node, v)
    dt = GRAPH_DTYPES.get(v.base.val.dtype)
    name = self.fresh("zeros.%s" % "x".join(str(n) for n in v.shape))
    self.graph_buffers[name] = {"name": name, "shape": list(v.shape), "dtype": dt,
                                "device": self.device, "init": [{"op": "zeros"}]}
    zeros = G(name, torch.empty(v.shape, dtype=v.base.val.dtype, device="meta"))
    return self.emit(node, "add", [v.base, zeros],
                     torch.empty(v.shape, dtype=v.base.val.dtype, device="meta"))


def cat(self, node, tensors, dim=0):
    # torch.cat skips 1-d tensors with no elements whatever the other
    # operands' rank (a legacy rule transformers' cache relies on)
    kept = [t for t in tensors if not (isinstance(t, hf.Const) and list(t.shape) == [0])]
    if len(kept) == 1:
        return kept[0]
    ts = [materialize(self, node, t) for t in kept or tensors]
    return self.emit(node, "cat", ts, node.meta["val"], dim=dim % len(ts[0].shape))


def split(self, node, x, sizes, dim=0):
    """split_with_sizes: one graph `split` node with one name per piece."""
    x = self.tensor(node, x)
    dim %= len(x.shape)
    stem = self.stem(node)
    names = [self.fresh("%s.%d" % (stem, i)) for i in range(len(sizes))]
    self.nodes.append({"names": names, "op": "split", "inputs": [x.name], "dim": dim,
                       "sizes": [int(n) for n in sizes]})
    return Multi([G(n, v) for n, v in zip(names, node.meta["val"])])


def getitem(self, node, seq, i):
    if isinstance(seq, hf.ConstTuple):
        return seq.items[i]
    if not isinstance(seq, Multi) or seq.items[i] is None:
        self.fail(node, "result %d of a multi-result op is not mapped" % i)
    return seq.items[i]


# ------------------------------------------------- op families (the op table's)
# Each maps onto one SHARDC_FAMILY_OP of runtime/OpTable.def; the graph reader
# reads such a node by the table's attribute kinds (docs/graph-format.md).
def spatial_list(v, n):
    """torch's int-or-list conv/pool argument as a list of n ints."""
    if isinstance(v, (list, tuple)):
        v = [int(x) for x in v]
        return v * n if len(v) == 1 and n > 1 else v
    return [int(v)] * n


def convolution(self, node, x, w, bias, stride, padding, dilation, transposed,
                output_padding, groups):
    x, w = self.tensor(node, x), self.tensor(node, w, "weight")
    n = len(x.shape) - 2
    if n not in (1, 2, 3):
        self.fail(node, "convolution over %d spatial dims (the graph op takes 1, 2 or 3)" % n)
    ins = [x, w] + ([self.tensor(node, bias, "bias")] if bias is not None else [])
    attrs = dict(stride=spatial_list(stride, n), padding=spatial_list(padding, n),
                 dilation=spatial_list(dilation, n), groups=int(groups))
    if transposed:
        attrs.update(transposed=1, output_padding=spatial_list(output_padding, n))
    return self.emit(node, "conv", ins, node.meta["val"], **attrs)


def batch_norm_node(self, node, x, weight, bias, mean, var, eps, val):
    x = self.tensor(node, x)
    if (weight is None) != (bias is None):
        self.fail(node, "batch_norm with only one of weight and bias has no graph op")
    if mean is None or var is None:
        self.fail(node, "batch_norm without running statistics (training-mode "
                  "statistics) has no graph op; export the model in eval mode")
    ins = [x, self.tensor(node, mean, "running_mean"), self.tensor(node, var, "running_var")]
    if weight is not None:
        ins += [self.tensor(node, weight, "weight"), self.tensor(node, bias, "bias")]
    stats = ins[1].val.dtype
    if x.val.dtype != stats:
        # torch's mixed-type batch norm (a 16-bit input, float32 running
        # statistics: a model traced with --param-dtype keeps its buffers):
        # computed in the statistics' dtype, the result rounded back once.
        from .aten_values import cast_to
        wide = [cast_to(self, node, t, stats) for t in ins]
        g = self.emit(node, "batch_norm", wide,
                      torch.empty(val.shape, dtype=stats, device="meta"), eps=float(eps))
        return Multi([cast_to(self, node, g, val.dtype), None, None])
    g = self.emit(node, "batch_norm", ins, val, eps=float(eps))
    return Multi([g, None, None])


def batch_norm_no_training(self, node, x, weight, bias, mean, var, momentum, eps):
    return batch_norm_node(self, node, x, weight, bias, mean, var, eps, node.meta["val"][0])


def batch_norm_functional(self, node, x, weight, bias, mean, var, training, momentum, eps):
    """torch.export's batch norm with running statistics: (out, save_mean,
    save_rstd, new_running_mean, new_running_var). In eval mode the running
    statistics pass through; in training mode (export --train) forward
    normalizes by the batch's statistics and the new running ones are
    momentum * batch + (1 - momentum) * running, the variance unbiased, as
    torch's kernel updates them (the graph's "updates" write them back)."""
    if not training:
        out = batch_norm_node(self, node, x, weight, bias, mean, var, eps,
                              node.meta["val"][0])
        return Multi([out.items[0], None, None, mean, var])
    if mean is None or var is None:
        return Multi(batch_norm_batch_stats(self, node, x, weight, bias, True, momentum,
                                            eps).items + [None, None])
    out = batch_norm_batch_stats(self, node, x, weight, bias, True, momentum, eps)
    x = mixed_batch_norm_input(self, node, self.tensor(node, x), mean)
    mean, var = self.tensor(node, mean, "running_mean"), self.tensor(node, var, "running_var")
    c = x.shape[1]
    dims = [0] + list(range(2, len(x.shape)))
    if momentum is None:
        self.fail(node, "batch_norm with momentum=None (a cumulative average over "
                  "num_batches_tracked) has no graph form")
    stat = torch.empty([c], dtype=x.val.dtype, device="meta")
    batch_mean = self.emit(node, "mean", [x], stat, dims=dims, keepdim=0)
    batch_var = self.emit(node, "var", [x], stat, dims=dims, keepdim=0, correction=1)

    def running(old, batch):
        if batch.val.dtype != old.val.dtype:
            batch = self.emit(node, "cast", [batch], old.val,
                              dtype=GRAPH_DTYPES[old.val.dtype])
        kept = self.emit(node, "mul", [old, self.const(1.0 - float(momentum), old)], old.val)
        new = self.emit(node, "mul", [batch, self.const(float(momentum), old)], old.val)
        return self.emit(node, "add", [new, kept], old.val)
    return Multi(out.items + [running(mean, batch_mean), running(var, batch_var)])


def native_batch_norm(self, node, x, weight, bias, mean, var, training, momentum, eps):
    if training:
        self.fail(node, "batch_norm in training mode has no graph op; export in eval mode")
    return batch_norm_node(self, node, x, weight, bias, mean, var, eps, node.meta["val"][0])


def fnv1a32(text):
    """runtime/Philox.h's fnv1a32 of a string's UTF-8 bytes."""
    h = 2166136261
    for byte in text.encode():
        h = ((h ^ byte) * 16777619) & 0xffffffff
    return h


def native_dropout(self, node, x, p, train):
    """Dropout traced in training mode (export --train): the graph's dropout,
    its mask a function of the run's seed, this node's stream (the FNV-1a
    hash of its graph name), the step counter rng.step (a non-persistent
    buffer the graph's updates advance by one each forward) and the
    element's index (docs/rng.md). p = 0 and eval mode are the identity."""
    if not train or float(p) == 0.0:
        return Multi([x, None])
    x = self.tensor(node, x)
    return Multi([self.emit_dropout(node, x, p, x.val), None])


def bernoulli_p(self, node, x, p, generator=None):
    """torch.empty(shape).bernoulli_(p): 1 with probability p, else 0, only
    x's shape and dtype read (torchvision's StochasticDepth draws its
    per-sample noise so). The mask of the graph's dropout of ones at 1 - p:
    ne(dropout(ones), 0) cast to x's dtype, exactly 0 or 1."""
    if generator is not None:
        self.fail(node, "bernoulli with an explicit generator has no graph form")
    return bernoulli_mask(self, node, float(p))


def bernoulli_mask(self, node, p):
    """1 with probability p, else 0, in node's result shape and dtype."""
    from . import aten_values
    dtype, shape = node.meta["val"].dtype, list(node.meta["val"].shape)
    ones = hf.fill_buffer(self, 1.0, shape, torch.float32) if shape else \
        self.const(1.0, G("", torch.empty((), dtype=torch.float32, device="meta")))
    kept = self.emit_dropout(node, ones, 1.0 - p,
                             torch.empty(shape, dtype=torch.float32, device="meta"))
    mask = self.emit(node, "ne", [kept], torch.empty(shape, dtype=torch.bool, device="meta"),
                     value=0.0)
    return aten_values.cast_to(self, node, mask, dtype)


class RandomUniform(hf.Lazy):
    """torch.rand(shape) (+ keep): uniform in [0, 1) (shifted by `keep`).
    Only the drop path's floor(keep + rand) has a graph form (a bernoulli
    mask of probability keep: Hugging Face's and timm's older drop_path);
    any other read of the uniform values is refused."""

    def __init__(self, node, keep=None):
        self.node, self.keep = node, keep

    def materialize(self, low, node):
        low.fail(self.node, "torch.rand's uniform values have no graph op; only "
                 "floor(keep_prob + torch.rand(shape)) (a drop path's mask) maps")


def random_uniform_rule(self, node, args):
    """The drop-path pattern over torch.rand, or None for other nodes."""
    if node.target == aten.rand.default:
        return RandomUniform(node)
    uniform = [a for a in args if isinstance(a, RandomUniform)]
    if not uniform:
        return None
    u = uniform[0]
    if node.target in (aten.add.Tensor, aten.add.Scalar) and u.keep is None and len(args) == 2:
        other = args[1] if args[0] is u else args[0]
        if isinstance(other, (int, float)) and 0 < float(other) <= 1:
            return RandomUniform(u.node, float(other))
    if node.target == aten.floor.default and u.keep is not None:
        return bernoulli_mask(self, node, u.keep)
    return None


def complete_affine(self, weight, bias, c, dtype):
    """A norm's weight and bias when one of them alone is given (timm's
    ScaledStdConv2d gain, GroupNorm1NoBias): the other becomes a constant of
    ones or zeros, which changes no value; both or neither pass through."""
    if weight is not None and bias is None:
        bias = hf.fill_buffer(self, 0.0, [c], dtype)
    elif bias is not None and weight is None:
        weight = hf.fill_buffer(self, 1.0, [c], dtype)
    return weight, bias


def batch_norm_batch_stats(self, node, x, weight, bias, training, momentum, eps):
    """Batch norm over the batch's own statistics with no running ones
    (timm's StdConv2d standardizes its weight so: F.batch_norm(w.reshape(1,
    out, -1), None, None, training=True)): per channel over the batch and the
    spatial dims, which is group_norm with one group per channel on
    [1, C, N * rest] (the batch moved beside the spatial dims)."""
    if not training:
        self.fail(node, "batch_norm without running statistics in eval mode has no "
                  "meaning")
    x = self.tensor(node, x)
    if len(x.shape) < 2:
        self.fail(node, "batch_norm on a %d-d tensor" % len(x.shape))
    out_dtype = x.val.dtype
    x = mixed_batch_norm_input(self, node, x, weight)
    n, c = x.shape[0], x.shape[1]
    weight, bias = complete_affine(self, weight, bias, c, x.val.dtype)
    rest = 1
    for k in x.shape[2:]:
        rest *= k
    dtype = x.val.dtype
    if n > 1:
        perm = [1, 0] + list(range(2, len(x.shape)))
        x = self.emit(node, "permute", [x], torch.empty([x.shape[k] for k in perm],
                                                       dtype=dtype, device="meta"), dims=perm)
    flat = [1, c, n * rest]
    xin = self.emit(node, "reshape", [x], torch.empty(flat, dtype=dtype, device="meta"),
                    shape=flat) if list(x.shape) != flat else x
    ins = [xin] + ([self.tensor(node, weight), self.tensor(node, bias)]
                   if weight is not None else [])
    g = self.emit(node, "group_norm", ins, torch.empty(flat, dtype=dtype, device="meta"),
                  groups=int(c), eps=float(eps))
    if list(x.shape) != flat:
        g = self.emit(node, "reshape", [g], torch.empty(x.shape, dtype=dtype, device="meta"),
                      shape=list(x.shape))
    if n > 1:
        g = self.emit(node, "permute", [g], torch.empty(
            list(node.meta["val"][0].shape), dtype=dtype, device="meta"), dims=perm)
    if dtype != out_dtype:  # torch's mixed-type batch norm: rounded back once
        from .aten_values import cast_to
        g = cast_to(self, node, g, out_dtype)
    return Multi([g, None, None])


def mixed_batch_norm_input(self, node, x, *params):
    """torch's mixed-type batch norm: a 16-bit input beside float32 weight or
    running statistics (a model traced with --param-dtype keeps batch norm's)
    is computed in float32: x converted (exactly) to the parameters' dtype."""
    for t in params:
        val = getattr(t, "val", None)
        if isinstance(t, torch.fx.Node):
            val = t.meta.get("val")
        if isinstance(val, torch.Tensor) and val.is_floating_point() and val.dtype != x.val.dtype:
            from .aten_values import cast_to
            return cast_to(self, node, x, val.dtype)
    return x


def group_norm(self, node, x, weight, bias, n, c, hw, groups, eps):
    x = self.tensor(node, x)
    weight, bias = complete_affine(self, weight, bias, int(c), x.val.dtype)
    ins = [x] + ([self.tensor(node, weight), self.tensor(node, bias)] if weight is not None
                 else [])
    g = self.emit(node, "group_norm", ins, node.meta["val"][0], groups=int(groups),
                  eps=float(eps))
    return Multi([g, None, None])


INDICES = ("value no graph op produces: the pooling indices (result 1 of %s); only "
           "the pooled values (result 0) are mapped")


def max_pool(self, node, x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
    x = self.tensor(node, x)
    n = len(kernel)
    g = self.emit(node, "max_pool", [x], node.meta["val"][0],
                  kernel=spatial_list(kernel, n),
                  stride=spatial_list(stride if stride else kernel, n),
                  padding=spatial_list(padding, n), dilation=spatial_list(dilation, n),
                  ceil_mode=int(bool(ceil_mode)))
    return Multi([g, Unusable(INDICES % node.target)])


def avg_pool(self, node, x, kernel, stride=(), padding=0, ceil_mode=False,
             count_include_pad=True, divisor_override=None):
    x = self.tensor(node, x)
    n = len(kernel)
    attrs = dict(kernel=spatial_list(kernel, n),
                 stride=spatial_list(stride if stride else kernel, n),
                 padding=spatial_list(padding, n), ceil_mode=int(bool(ceil_mode)),
                 count_include_pad=int(bool(count_include_pad)))
    if divisor_override is not None:
        attrs["divisor_override"] = int(divisor_override)
    return self.emit(node, "avg_pool", [x], node.meta["val"], **attrs)


def adaptive_avg_pool(self, node, x, output_size):
    return self.emit(node, "adaptive_avg_pool", [self.tensor(node, x)], node.meta["val"],
                     output_size=[int(v) for v in output_size])


def adaptive_max_pool(self, node, x, output_size):
    g = self.emit(node, "adaptive_max_pool", [self.tensor(node, x)], node.meta["val"][0],
                  output_size=[int(v) for v in output_size])
    return Multi([g, Unusable(INDICES % node.target)])


def reduction(op):
    """sum/mean/amax/amin over `dim` (None or [] = every dim), keepdim."""
    def rule(self, node, x, dim=None, keepdim=False, dtype=None, **kw):
        x = self.tensor(node, x)
        if dtype is not None and dtype != x.val.dtype:
            self.fail(node, "a reduction into another dtype (%s) has no graph op" % dtype)
        if isinstance(dim, int):
            dim = [dim]
        attrs = {"keepdim": int(bool(keepdim))}
        if dim:
            attrs["dims"] = [int(d) for d in dim]
        out = node.meta["val"]
        if not x.val.dtype.is_floating_point and op in ("sum", "amax", "amin"):
            # A count of a mask (label smoothing's counted targets, a padding
            # mask's lengths): the graph reduces floats, so in float64, exact
            # to 2^53, and back.
            wide = self.emit(node, "cast", [x], x.val.to(torch.float64), dtype="float64")
            total = self.emit(node, op, [wide], out.to(torch.float64), **attrs)
            return self.emit(node, "cast", [total], out, dtype="int64")
        return self.emit(node, op, [x], out, **attrs)
    return rule


def var_correction(self, node, x, dim=None, correction=None, keepdim=False):
    x = self.tensor(node, x)
    attrs = {"keepdim": int(bool(keepdim))}
    if dim:
        attrs["dims"] = [int(d) for d in dim]
    if correction is not None:
        if correction != int(correction):
            self.fail(node, "var with a fractional correction has no graph op")
        attrs["correction"] = int(correction)
    return self.emit(node, "var", [x], node.meta["val"], **attrs)


def topk(self, node, x, k, dim=-1, largest=True, sorted=True):
    """torch.topk as two graph ops: `topk` gives the indices (torch's CPU
    selection among equal values), `gather` reads the values at them, so
    the values are x's own bits. sorted=False allows any order; the graph's
    is sorted."""
    x = self.tensor(node, x)
    values_val, indices_val = node.meta["val"]
    indices = self.emit(node, "topk", [x], indices_val, k=int(k), dim=int(dim),
                        largest=int(bool(largest)))
    values = self.emit(node, "gather", [x, indices], values_val, dim=int(dim))
    return Multi([values, indices])


def gather(self, node, x, dim, index, sparse_grad=False):
    return self.emit(node, "gather", [self.tensor(node, x), self.tensor(node, index)],
                     node.meta["val"], dim=int(dim))


def moe_experts(self, node, x, index, weights, gate_up, down, activation):
    """shardc::moe_experts (tools/shardc_export/moe.py): the graph op."""
    return self.emit(node, "moe_experts", [self.tensor(node, v) for v in
                                           (x, index, weights, gate_up, down)],
                     node.meta["val"], activation=str(activation))


def arg_reduction(op):
    def rule(self, node, x, dim=None, keepdim=False):
        attrs = {"keepdim": int(bool(keepdim))}
        if dim is not None:
            attrs["dims"] = [int(dim)]
        return self.emit(node, op, [self.tensor(node, x)], node.meta["val"], **attrs)
    return rule


def extreme_with_index(value_op, index_op):
    """torch.max(x, dim) / torch.min(x, dim): the values are amax / amin, the
    indices argmax / argmin (the first extreme, NaN counting as one, as
    torch's CPU kernel); an unread result is removed as dead code."""
    def rule(self, node, x, dim, keepdim=False):
        x = self.tensor(node, x)
        attrs = {"dims": [int(dim)], "keepdim": int(bool(keepdim))}
        values, indices = node.meta["val"]
        return Multi([self.emit(node, value_op, [x], values, **attrs),
                      self.emit(node, index_op, [x], indices, **attrs)])
    return rule


def scalar_attrs(op, names, defaults=()):
    """A unary family op whose ATen scalars become float attributes (None:
    absent)."""
    def rule(self, node, x, *scalars, **kw):
        values = list(scalars) + [kw.get(n, d) for n, d in
                                  list(zip(names, defaults))[len(scalars):]]
        attrs = {n: float(v) for n, v in zip(names, values) if v is not None}
        return self.emit(node, op, [self.tensor(node, x)], node.meta["val"], **attrs)
    return rule


def elu(self, node, x, alpha=1.0, scale=1.0, input_scale=1.0):
    """F.elu; F.celu (input_scale 1 / alpha); F.selu's decomposition (a
    scale): the graph's elu, times the scale where there is one."""
    x = self.tensor(node, x)
    attrs = {"alpha": float(alpha)}
    if input_scale != 1:
        attrs["input_scale"] = float(input_scale)
    y = self.emit(node, "elu", [x], node.meta["val"], **attrs)
    if scale != 1:
        y = self.emit(node, "mul", [y, self.const(float(scale), y)], node.meta["val"])
    return y


def celu(self, node, x, alpha=1.0):
    """F.celu: torch computes it as elu(x, alpha, 1, 1 / alpha)."""
    return elu(self, node, x, alpha, 1.0, 1.0 / float(alpha))


def rrelu(self, node, x, noise, lower=0.125, upper=1.0 / 3.0, training=False, generator=None):
    """F.rrelu in eval mode: leaky_relu with the mean slope (lower + upper) / 2,
    as torch computes it. Training mode draws a slope per element."""
    if training:
        self.fail(node, "rrelu in training mode (a random slope per element) has no graph "
                  "op; export the model in eval mode")
    slope = (float(lower) + float(upper)) / 2
    y = self.emit(node, "leaky_relu", [self.tensor(node, x)], node.meta["val"][0],
                  negative_slope=slope)
    return Multi([y, Unusable("value no graph op produces: rrelu's noise (result 1)")])


def log_sigmoid(self, node, x):
    """F.logsigmoid (aten.log_sigmoid_forward: the value and a buffer only
    its backward reads) as -softplus(-x): log(sigmoid(x)) = -log1p(exp(-x)).
    Past softplus's threshold (-x > 20) both are x within float rounding
    (the term dropped, log1p(exp(x)), is below 2.1e-9 of it)."""
    x = self.tensor(node, x)
    val = node.meta["val"][0]
    negated = self.emit(node, "neg_out", [x], val)
    y = self.emit(node, "neg_out", [self.emit(node, "softplus", [negated], val)], val)
    return Multi([y, Unusable("value no graph op produces: log_sigmoid_forward's buffer "
                              "(result 1), read only by its backward")])


RULES = {
    aten.view.default: view,
    aten._unsafe_view.default: view,
    aten.reshape.default: view,
    aten.unsqueeze.default: view,
    aten.squeeze.default: view,
    aten.squeeze.dim: view,
    aten.squeeze.dims: view,
    aten.clone.default: identity,
    aten.copy.default: copy_into,
    aten.alias.default: identity,
    aten.detach.default: detach,
    aten.permute.default: permute,
    aten.as_strided.default: as_strided,
    aten.expand.default: expand,
    aten.select.int: select,
    aten.slice.Tensor: slice_,
    aten.add.Tensor: elementwise("add"),
    aten.sub.Tensor: elementwise("sub"),
    aten.mul.Tensor: elementwise("mul"),
    aten.div.Tensor: elementwise("div"),
    aten.add.Scalar: elementwise("add"),
    aten.sub.Scalar: elementwise("sub"),
    aten.mul.Scalar: elementwise("mul"),
    aten.div.Scalar: elementwise("div"),
    aten.relu.default: unary("relu"),
    aten.silu.default: unary("silu"),
    aten.gelu.default: gelu,
    aten._softmax.default: softmax,
    aten._log_softmax.default: log_softmax,
    aten.nll_loss_forward.default: nll_loss,
    aten.mm.default: mm,
    aten.bmm.default: mm,
    aten.addmm.default: addmm,
    aten.native_layer_norm.default: layer_norm,
    aten.scaled_dot_product_attention.default: sdpa,
    aten.embedding.default: embedding,
    aten._trilinear.default: trilinear,
    aten.cat.default: cat,
    aten.split_with_sizes.default: split,
    # torch.export's own check of a .to()'s operand: nothing to compute
    aten._assert_tensor_metadata.default: lambda self, node, *args, **kwargs: None,
    aten.convolution.default: convolution,
    aten._native_batch_norm_legit_no_training.default: batch_norm_no_training,
    aten.native_batch_norm.default: native_batch_norm,
    aten._native_batch_norm_legit.no_stats: batch_norm_batch_stats,
    aten._native_batch_norm_legit_functional.default: batch_norm_functional,
    aten.native_dropout.default: native_dropout,
    aten.bernoulli.p: bernoulli_p,
    aten.native_group_norm.default: group_norm,
    aten.max_pool2d_with_indices.default: max_pool,
    aten.avg_pool2d.default: avg_pool,
    aten._adaptive_avg_pool2d.default: adaptive_avg_pool,
    aten.adaptive_max_pool2d.default: adaptive_max_pool,
    aten.max_pool3d_with_indices.default: max_pool,
    aten.avg_pool3d.default: avg_pool,
    aten._adaptive_avg_pool3d.default: adaptive_avg_pool,
    aten.adaptive_max_pool3d.default: adaptive_max_pool,
    aten.sum.dim_IntList: reduction("sum"),
    aten.sum.default: reduction("sum"),
    aten.mean.dim: reduction("mean"),
    aten.mean.default: reduction("mean"),
    aten.amax.default: reduction("amax"),
    aten.amin.default: reduction("amin"),
    aten.var.correction: var_correction,
    aten.topk.default: topk,
    aten.gather.default: gather,
    aten.argmax.default: arg_reduction("argmax"),
    aten.argmin.default: arg_reduction("argmin"),
    aten.max.dim: extreme_with_index("amax", "argmax"),
    aten.min.dim: extreme_with_index("amin", "argmin"),
    aten.sigmoid.default: unary("sigmoid"),
    aten.tanh.default: unary("tanh"),
    aten.exp.default: unary("exp"),
    aten.log.default: unary("log"),
    aten.log1p.default: log1p,
    aten.expm1.default: expm1,
    aten.sqrt.default: unary("sqrt_out"),
    aten.rsqrt.default: unary("rsqrt"),
    aten.neg.default: unary("neg_out"),
    aten.abs.default: unary("abs"),
    aten.erf.default: unary("erf"),
    aten.sin.default: unary("sin"),
    aten.cos.default: unary("cos"),
    aten.reciprocal.default: unary("reciprocal"),
    aten.hardswish.default: unary("hardswish"),
    aten.hardsigmoid.default: unary("hardsigmoid"),
    aten.mish.default: unary("mish"),
    aten.hardtanh.default: scalar_attrs("clamp_out", ("min", "max"), (-1.0, 1.0)),
    aten.clamp.default: scalar_attrs("clamp_out", ("min", "max"), (None, None)),
    aten.leaky_relu.default: scalar_attrs("leaky_relu", ("negative_slope",), (0.01,)),
    aten.elu.default: elu,
    aten.celu.default: celu,
    aten.log_sigmoid_forward.default: log_sigmoid,
    aten.rrelu_with_noise_functional.default: rrelu,
    aten.pow.Tensor_Scalar: scalar_attrs("pow_scalar", ("exponent",)),
    aten.softplus.default: scalar_attrs("softplus", ("beta", "threshold"), (1.0, 20.0)),
    operator.getitem: getitem,
}


def supported_ops():
    """The ATen ops this file maps (docs/exporter.md lists them)."""
    return sorted(str(op) for op in RULES if op is not operator.getitem)


# ---- a mixture of experts' experts (tools/shardc_export/moe.py) -----------------
from .moe import moe_experts_op  # noqa: E402
if moe_experts_op() is not None:
    RULES[torch.ops.shardc.moe_experts.default] = moe_experts

# ---- views and copies (torchvision classifiers: Swin, MaxViT) -----------------
from . import aten_views  # noqa: E402
RULES.update(aten_views.rules(aten))

# ---- integer values, comparisons, dtype conversion (RoBERTa, mixed precision) ---
RULES.update(aten_values.rules(aten))

# ---- vector norms (F.normalize; SwinV2's cosine attention) ----------------------
from . import aten_norms  # noqa: E402
RULES.update(aten_norms.rules(aten))

# ---- embedding bags (DLRM's sparse features) ------------------------------------
from . import aten_bags  # noqa: E402
RULES.update(aten_bags.rules(aten))

# ---- complex values as pairs of reals (Llama 4's rotary embedding) --------------
from . import aten_complex  # noqa: E402
RULES.update(aten_complex.rules(aten, RULES))
