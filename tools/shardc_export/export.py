"""The exporter's driver: construct on meta while recording init, trace forward,
lower, write the graph (and optionally weights, or eager reference outputs)."""

import argparse
import importlib
import inspect
import json
import os
import sys

import torch
import torch.nn as nn

from .attention_fusion import fuse_attention
from .graph_emitter import G
from .init_recorder import (ExportError, MetaFactoryMode, recording, shadow_fill_value,
                            storage_key, to_graph_chain)
from .lowering import GRAPH_DTYPES, Lowering, dead_code_eliminate
from .tracer import trace

TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)
import torch_reference as tr  # noqa: E402  (safetensors reader / writer)

_DTYPE_NAMES = {"float32": torch.float32, "float64": torch.float64,
                "float16": torch.float16, "bfloat16": torch.bfloat16,
                "int64": torch.int64}


def load_factory(spec):
    if ":" not in spec:
        raise ExportError("%r: expected package.module:Class" % spec)
    mod, _, attr = spec.partition(":")
    try:
        m = importlib.import_module(mod)
    except Exception as e:
        raise ExportError("cannot import %s: %s: %s" % (mod, type(e).__name__, e))
    obj = m
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ExportError("%s has no attribute %s" % (mod, attr))
        obj = getattr(obj, part)
    return obj


def build_kwargs(args):
    try:
        kw = json.loads(args.kwargs) if args.kwargs else {}
    except json.JSONDecodeError as e:
        raise ExportError("--kwargs: not JSON: %s" % e)
    if not isinstance(kw, dict):
        raise ExportError("--kwargs: expected a JSON object")
    device = args.device or kw.get("device") or "cpu"
    return kw, str(device)


def construct_meta(factory, kwargs):
    kw = dict(kwargs)
    if "device" in kw:
        kw["device"] = "meta"
    with recording() as rec:
        try:
            model = factory(**kw)
        except ExportError:
            raise
        except Exception as e:
            raise ExportError("constructing %s on the meta device failed: %s: %s" % (
                getattr(factory, "__name__", factory), type(e).__name__, e))
    if not isinstance(model, nn.Module):
        raise ExportError("%s did not return an nn.Module" % factory)
    return model, rec


def construct_eager(factory, kwargs, seed):
    kw = dict(kwargs)
    if "device" in kw:
        kw["device"] = "cpu"
    torch.manual_seed(seed)
    return factory(**kw)


def canonical_params(model):
    """id(param) -> state_dict name (the first name of a tied parameter)."""
    out = {}
    for name, p in model.named_parameters():
        out.setdefault(id(p), name)
    return out


def example_value(name, value, shape):
    """An input's example values (--input-shapes {"x": {"value": [...]}}),
    flat in row-major order, as many as its shape holds: what the ATen
    capture specialises on if forward's control flow reads them."""
    if not isinstance(value, list):
        raise ExportError("--input-shapes: input %s: \"value\" must be a list" % name)
    flat = []

    def walk(v):
        for x in v:
            if isinstance(x, list):
                walk(x)
            elif isinstance(x, (int, float)) and not isinstance(x, bool):
                flat.append(x)
            else:
                raise ExportError("--input-shapes: input %s: \"value\" holds %r, not a "
                                  "number" % (name, x))
    walk(value)
    count = 1
    for n in shape:
        count *= n
    if len(flat) != count:
        raise ExportError("--input-shapes: input %s: \"value\" has %d numbers, its shape "
                          "%s holds %d" % (name, len(flat), shape, count))
    return flat


def input_specs(model, args):
    sig = inspect.signature(model.forward)
    try:
        specs = json.loads(args.input_shapes) if args.input_shapes else {}
    except ValueError as e:
        raise ExportError("--input-shapes: not JSON: %s" % e)
    if not isinstance(specs, dict):
        raise ExportError("--input-shapes: expected a JSON object {argument: shape}")
    inputs, concrete = [], {}
    for pname, prm in sig.parameters.items():
        if prm.kind in (prm.VAR_POSITIONAL, prm.VAR_KEYWORD):
            continue
        if pname in specs:
            s = specs[pname]
            if isinstance(s, dict):
                d = {"name": pname, "shape": [int(x) for x in s["shape"]],
                     "dtype": s.get("dtype", "float32")}
                if "high" in s:
                    d["high"] = int(s["high"])
                if "value" in s:
                    d["value"] = example_value(pname, s["value"], d["shape"])
            else:
                d = {"name": pname, "shape": [int(x) for x in s], "dtype": "float32"}
            inputs.append(d)
        elif prm.default is not prm.empty:
            concrete[pname] = prm.default
        elif args.batch is not None and args.seq is not None:
            inputs.append({"name": pname, "shape": [args.batch, args.seq], "dtype": "int64"})
        else:
            raise ExportError("forward argument %r needs a shape: --batch B --seq T "
                              "(token ids) or --input-shapes '{\"%s\": [...]}'" % (pname, pname))
    # *args / **kwargs take no --input-shapes entry: only named arguments.
    named = [n for n, prm in sig.parameters.items()
             if prm.kind not in (prm.VAR_POSITIONAL, prm.VAR_KEYWORD)]
    extra = sorted(set(specs) - set(named))
    if extra:
        raise ExportError("--input-shapes names %s, which forward does not take (its "
                          "arguments: %s)" % (", ".join(extra), ", ".join(named) or "none"))
    for d in inputs:
        if d["dtype"] not in _DTYPE_NAMES:
            raise ExportError("input %s: dtype %s (one of %s)" % (d["name"], d["dtype"],
                                                                 sorted(_DTYPE_NAMES)))
    return inputs, concrete


def default_capture():
    """ATen capture (torch.export) on torch 2.x; torch.fx per module on 1.x."""
    major = int(torch.__version__.split(".")[0])
    return "aten" if major >= 2 else "fx"


def capture_aten(model, metas, params, buffers, buffer_chains, inputs, device, output_names,
                 concrete=None, factories_on_meta=None):
    """ATen capture. factories_on_meta: True traces with tensors made in
    forward without a device put on meta (aten._FactoriesOnMetaMode); None
    does so only when the plain trace fails on their device (the auto path
    tries fx before that: its patterns fuse more, e.g. hand-written causal
    attention); False never."""
    # arguments with defaults keep them (torch.export calls forward as Python does)
    if not hasattr(torch, "export"):
        raise ExportError("--capture aten needs torch >= 2.1 (this is torch %s)"
                          % torch.__version__)
    from . import aten  # torch 2 only: names ATen ops 1.13 lacks
    from .specialize import example_values
    try:
        ep, read = aten.trace(model, metas, example_values(inputs), bool(factories_on_meta))
    except ExportError as e:
        if factories_on_meta is not None or aten.DEVICE_MIX not in str(e):
            raise
        ep, read = aten.trace(model, metas, example_values(inputs), True)
    low = aten.AtenLowering(model, ep, params, buffers, buffer_chains, inputs, device,
                            concrete=concrete, specialized=read)
    return low, low.run(output_names)


def capture_fx(model, metas, concrete, params, buffers, buffer_chains, inputs, device,
               output_names):
    with MetaFactoryMode():
        tracer, fxg = trace(model, metas, concrete)
    low = Lowering(model, fxg, tracer, params, buffers, buffer_chains, inputs, device)
    return low, low.run(output_names)


def constant_parameters(factory, kwargs, model, pending):
    """name -> values for the parameters whose init chain the graph cannot
    express (pending: (name, error)) but whose values do not depend on the
    seed (ConViT's positional projection, written element by element in
    __init__): two constructions with different seeds give the same bits.
    They become constant data, loaded from the graph's constants file;
    `--load` replaces them like any parameter. Any other is an error: the
    original one, saying why the fallback did not apply."""
    if not pending:
        return {}
    from .const_data import MAX_DATA_ELEMENTS, MAX_REBUILD_PARAM_BYTES
    error = pending[0][1]  # a failure for the whole model reports the first parameter
    if not hasattr(torch.utils, "deterministic"):
        # torch < 2.1 leaves torch.empty's memory as it is: a part no init op
        # writes could look constant
        raise ExportError("%s (constant data needs torch >= 2.1 to tell a part never "
                          "written)" % error)
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    if param_bytes > MAX_REBUILD_PARAM_BYTES:
        raise ExportError("%s (its values cannot be checked for constant data: the model's "
                          "%d parameter bytes are over the %d this exporter builds)" % (
                              error, param_bytes, MAX_REBUILD_PARAM_BYTES))
    # torch.empty's memory filled with NaN (torch's deterministic mode): a
    # part no init op writes shows as NaN, not as whatever both builds found
    was = (torch.are_deterministic_algorithms_enabled(),
           torch.is_deterministic_algorithms_warn_only_enabled())
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        first = dict(construct_eager(factory, kwargs, 0).named_parameters())
        second = dict(construct_eager(factory, kwargs, 1).named_parameters())
    except Exception as e:
        raise ExportError("%s (building the model on the CPU to read its values failed: "
                          "%s: %s)" % (error, type(e).__name__, e))
    finally:
        torch.use_deterministic_algorithms(was[0], warn_only=was[1])
    values = {}
    for name, error in pending:
        a, b = first[name].detach(), second[name].detach()
        if a.numel() > MAX_DATA_ELEMENTS:
            raise ExportError("%s (%d elements: too many for constant data)" % (
                error, a.numel()))
        if not torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)):
            raise ExportError("%s (its values depend on the seed, so they are not constant "
                              "data either)" % error)
        if a.is_floating_point() and bool(torch.isnan(a).any()):
            raise ExportError("%s (part of it is never written: torch.empty's values, so "
                              "not constant data either)" % error)
        values[name] = a.contiguous().clone()
    return values


def param_names_by_storage(model):
    names = {}
    for name, p in model.named_parameters():
        names.setdefault(storage_key(p), name)
    return names


def resolve_derived(init, name, names):
    """A derived init op (`norm_of`) names its source by storage while
    recording; the graph names it by parameter."""
    for op in init:
        key = op.pop("_source_storage", None)
        if key is None:
            continue
        if key not in names:
            raise ExportError("parameter %s: init op %s reads a tensor that is not a "
                              "parameter of the model" % (name, op["op"]))
        op["of"] = names[key]


def fuse_hand_written_attention(nodes, low, param_decls, inputs, kept):
    """attention_fusion.fuse_attention on the lowering's nodes, with the
    shapes and dtypes of every value and the numbers of its 0-d constants."""
    meta = dict(low.meta)
    for d in list(param_decls) + list(low.graph_buffers.values()) + list(inputs):
        meta[d["name"]] = (list(d["shape"]), d.get("dtype", "float32"))
    consts = {}
    for d in low.graph_buffers.values():
        init = d.get("init") or [{}]
        if d["shape"] == [] and len(init) == 1 and init[0].get("op") == "fill":
            consts[d["name"]] = float(init[0]["value"])
    torch_dtypes = {name: dt for dt, name in GRAPH_DTYPES.items()}

    def const(value, dtype):
        return low.const(value, G("", torch.empty((), dtype=torch_dtypes[dtype],
                                                  device="meta"))).name

    def mask_form(term, T, S):
        """A mask built from constants (the ATen capture's folded causal mask,
        low.const_values): no mask, the causal one, or None."""
        if not low.const_values:  # the fx capture (and torch 1.13) folds none
            return None
        from .aten_consts import additive_allowed, mask_form as aten_mask_form
        if isinstance(term, tuple):  # where(cond, -inf, x) or where(cond, x, -inf)
            _, cond, fill = term
            c = low.const_values.get(cond)
            if c is None or c.dtype != torch.bool:
                return None
            allowed = ~c if fill == 1 else c
        else:
            m = low.const_values.get(term)
            allowed = None if m is None or not m.is_floating_point() else additive_allowed(m)
        return None if allowed is None else aten_mask_form(allowed, T, S)
    return fuse_attention(nodes, meta, consts, kept, low.fresh, const, mask_form)


def master_weights(model, param_decls, param_dtype):
    """--param-dtype (docs/exporter.md): forward is traced with the floating
    parameters in `param_dtype` and buffers as they are, as FSDP2's
    MixedPrecisionPolicy(param_dtype=...) runs a module; each parameter keeps
    its own dtype as "master_dtype" (docs/graph-format.md), in which shardc
    initializes, shards, updates and saves it."""
    dtype = _DTYPE_NAMES[param_dtype]
    # Batch norm keeps its parameters (FSDP's MixedPrecision default,
    # _module_classes_to_ignore=(_BatchNorm,)): torch's batch norm takes a
    # 16-bit input with float32 weight, bias and running statistics, not a
    # 16-bit weight beside float32 statistics.
    kept = {id(p) for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)
            for p in m.parameters(recurse=False)}
    kept_names = {n for n, p in model.named_parameters() if id(p) in kept}
    for p in model.parameters():
        if p.is_floating_point() and id(p) not in kept:
            p.data = p.data.to(dtype)
    for d in param_decls:
        if d["dtype"] != param_dtype and d["dtype"] != "int64" and d["name"] not in kept_names:
            d["master_dtype"], d["dtype"] = d["dtype"], param_dtype


def export(args):
    factory = load_factory(args.model)
    kwargs, device = build_kwargs(args)
    model, rec = construct_meta(factory, kwargs)
    # --train: forward as model.train() runs it (batch norm by the batch's
    # statistics, its running ones updated: the graph's "updates")
    model.train(bool(args.train))
    params = canonical_params(model)
    # parameters and their init chains (snapshot before tracing)
    param_decls = []
    pending = []  # (name, error): init chains the graph cannot express
    seen = set()
    for name, p in model.named_parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        if p.dtype not in GRAPH_DTYPES or p.dtype == torch.int64:
            raise ExportError("parameter %s: dtype %s is not supported" % (name, p.dtype))
        if not p.is_contiguous() or p.storage_offset() != 0:
            raise ExportError("parameter %s is a non-contiguous view" % name)
        try:
            init = to_graph_chain(rec.chains.get(storage_key(p)), list(p.shape),
                                  "parameter " + name)
        except ExportError:
            # an init op the graph lacks (log, exp...) on a constant whose
            # values the constructor computed: one fill when all are equal
            value = shadow_fill_value(p)
            chain = rec.chains.get(storage_key(p))
            if value is not None:
                init = [{"op": "fill", "value": value}]
            elif chain is not None and chain.unsupported:
                init = None  # maybe constant data (below)
                pending.append((name, sys.exc_info()[1]))
            else:
                raise
        if init is not None:
            resolve_derived(init, name, param_names_by_storage(model))
        param_decls.append({"name": name, "shape": list(p.shape),
                            "dtype": GRAPH_DTYPES[p.dtype], "device": device,
                            "init": init})
    param_data = constant_parameters(factory, kwargs, model, pending)
    for d in param_decls:
        if d["init"] is None:
            d["init"] = [{"op": "load", "tensor": d["name"]}]
    buffers, buffer_chains = {}, {}
    for name, b in model.named_buffers():
        if id(b) in buffers:
            continue
        buffers[id(b)] = name
        buffer_chains[name] = rec.chains.get(storage_key(b))
    # units
    if args.units_from_modules:
        unit_of = {}
        for mname, m in model.named_modules():
            if type(m).__name__ in args.units_from_modules:
                for pn, p in m.named_parameters():
                    unit_of.setdefault(id(p), mname)
        if not unit_of:
            raise ExportError("--units-from-modules %s: no module of that class" %
                              ",".join(args.units_from_modules))
        byname = {n: unit_of.get(id(p), "root") for n, p in model.named_parameters()}
        for d in param_decls:
            d["unit"] = byname[d["name"]]
    if args.param_dtype:
        master_weights(model, param_decls, args.param_dtype)
    # forward
    inputs, concrete = input_specs(model, args)
    if args.param_dtype:
        # FSDP2's cast_forward_inputs: floating inputs arrive in param_dtype
        for d in inputs:
            if d["dtype"] in ("float32", "float64", "float16"):
                d["dtype"] = args.param_dtype
    metas = {d["name"]: torch.empty(d["shape"], dtype=_DTYPE_NAMES[d["dtype"]], device="meta")
             for d in inputs}
    output_names = args.output_names.split(",") if args.output_names else None

    def buffer_values():
        # buffer values (parameters on meta) for constants folded in forward
        from .aten_consts import concrete_buffers
        try:
            return concrete_buffers(factory, kwargs, sum(
                p.numel() * p.element_size() for p in model.parameters()))
        except Exception as e:
            raise ExportError("constructing %s with parameters on meta (to read its "
                              "buffers' values) failed: %s: %s" % (
                                  getattr(factory, "__name__", factory), type(e).__name__, e))
    capture = args.capture
    if args.train and (capture == "fx" or default_capture() != "aten"):
        raise ExportError("--train needs the ATen capture (torch >= 2.1, --capture aten): "
                          "it records the buffers forward updates")
    if capture is None and default_capture() == "aten" and not args.train:
        # torch 2: ATen capture first; a model it cannot map yet but the
        # per-module fx path can (RMSNorm / rotary modules, causal masks,
        # cross_entropy) still exports, as it did before ATen capture.
        def aten_capture(factories_on_meta):
            return capture_aten(model, metas, params, buffers, buffer_chains, inputs, device,
                                output_names, buffer_values, factories_on_meta=factories_on_meta)
        try:
            low, outputs = aten_capture(False)
            capture = "aten"
        except ExportError as aten_error:
            try:
                low, outputs = capture_fx(model, metas, concrete, params, buffers,
                                          buffer_chains, inputs, device, output_names)
                capture = "fx"
            except ExportError as fx_error:
                from .aten import DEVICE_MIX  # torch 2: the auto path's first try was ATen
                if DEVICE_MIX not in str(aten_error):
                    raise ExportError("%s (and with --capture fx: %s)" % (aten_error, fx_error))
                # tensors made on the CPU in forward: ATen capture again, with
                # them on meta (capture_aten)
                try:
                    low, outputs = aten_capture(True)
                    capture = "aten"
                except ExportError as retry_error:
                    raise ExportError("%s (and with --capture fx: %s)" % (retry_error, fx_error))
    elif capture == "aten" or args.train:
        capture = "aten"
        low, outputs = capture_aten(model, metas, params, buffers, buffer_chains, inputs,
                                    device, output_names, buffer_values)
    else:
        low, outputs = capture_fx(model, metas, concrete, params, buffers, buffer_chains,
                                  inputs, device, output_names)
    updates = [{"buffer": b, "value": v.name} for b, v in getattr(low, "updates", [])]
    kept = outputs + [u["value"] for u in updates]
    nodes, live = dead_code_eliminate(low.nodes, kept)
    if not getattr(args, "keep_attention_ops", False):
        nodes, fused = fuse_hand_written_attention(nodes, low, param_decls, inputs, kept)
        if fused:
            nodes, live = dead_code_eliminate(nodes, kept)
    live |= {u["buffer"] for u in updates}
    untracked = sorted(getattr(low, "untracked_updates", []))
    if untracked:
        print("export_torch: note: forward also updates %d int64 buffer(s) the graph does "
              "not hold (%s%s)" % (len(untracked), ", ".join(untracked[:4]),
                                   ", ..." if len(untracked) > 4 else ""), file=sys.stderr)
    for d in inputs:
        if d["name"] in low.high and "high" not in d:
            d["high"] = low.high[d["name"]]
    graph_buffers = [b for n, b in low.graph_buffers.items() if n in live]
    # What a checkpoint holds is the module's state_dict (docs/checkpoints.md):
    # a buffer outside it (persistent=False, the exporter's constants) is
    # marked so that shardc never saves it; a tied parameter lists its other
    # state_dict names, under which shardc saves it too.
    state = model.state_dict(keep_vars=True)
    tied = {}
    for key, t in state.items():
        if id(t) in params and params[id(t)] != key:
            tied.setdefault(params[id(t)], []).append(key)
    for b in graph_buffers:
        if b["name"] not in state:
            b["persistent"] = False
    held = {d["name"] for d in param_decls} | {b["name"] for b in graph_buffers}
    held |= {k for names in tied.values() for k in names}
    missing = [k for k in state if k not in held]
    if missing:
        print("export_torch: note: %d state_dict entr%s not in the graph (buffers forward "
              "does not read as tensors), so not in shardc's checkpoints: %s%s" % (
                  len(missing), "y is" if len(missing) == 1 else "ies are",
                  ", ".join(missing[:8]), " ..." if len(missing) > 8 else ""),
              file=sys.stderr)
    # parameter order: as the module declares them; decl keys in docs' order
    ordered = []
    for d in param_decls:
        e = {k: d[k] for k in ("name", "shape", "dtype", "device")}
        if "master_dtype" in d:
            e["master_dtype"] = d["master_dtype"]
        if "unit" in d:
            e["unit"] = d["unit"]
        if d["name"] in tied:
            e["tied"] = tied[d["name"]]
        e["init"] = d["init"]
        ordered.append(e)
    graph = {"format": "shardc-graph", "version": 1,
             "name": args.name or type(model).__name__,
             "parameters": ordered, "buffers": graph_buffers, "inputs": inputs,
             "nodes": nodes, "outputs": outputs}
    if updates:
        graph["updates"] = updates
    const_data = dict(getattr(low, "const_tensors", None) or {})
    const_data.update(param_data)
    if const_data:
        graph["_const_data"] = const_data  # written beside the graph (main)
    if capture == "aten":
        # torch.export specialises shapes (and shape-dependent Python control
        # flow) on the example inputs: say so, with what they were.
        graph["specialized"] = {"capture": "aten", "torch": torch.__version__.split("+")[0],
                                "inputs": {d["name"]: d["shape"] for d in inputs}}
    # Inputs whose values forward's control flow read keep them ("value") and
    # where they were read ("value_read_at"): the graph holds for these values
    # only, and shardc run refuses others. An example value nothing read is
    # dropped: an ordinary input.
    read = getattr(low, "specialized", None) or {}
    for d in inputs:
        if d["name"] in read:
            if d["dtype"] != "int64" or any(not isinstance(v, int) for v in d["value"]):
                raise ExportError(
                    "forward's Python control flow reads the values of input %s at %s; "
                    "only int64 inputs with integer example values can be specialised "
                    "(this one is %s)" % (d["name"], read[d["name"]], d["dtype"]))
            d["value_read_at"] = read[d["name"]]
        elif "value" in d:
            del d["value"]
    return graph, factory, kwargs, model


def render(graph):
    """One parameter / buffer / input / node per line (as examples/make_models.py)."""
    def dump(v):
        # JSON has no infinity or NaN: such a float left unconverted (graph
        # floats are json_float's strings) is the exporter's bug, said here
        # rather than written as an unreadable file
        try:
            return json.dumps(v, separators=(", ", ": "), allow_nan=False)
        except ValueError as e:
            raise ExportError("the graph holds a float JSON cannot write (%s) in %s"
                              % (e, json.dumps(v, separators=(", ", ": "))[:200]))
    out = ["{"]
    keys = list(graph)
    for i, key in enumerate(keys):
        comma = "," if i + 1 < len(keys) else ""
        val = graph[key]
        if isinstance(val, list) and val and isinstance(val[0], dict):
            out.append("  %s: [" % json.dumps(key))
            for j, item in enumerate(val):
                out.append("    " + dump(item) + ("," if j + 1 < len(val) else ""))
            out.append("  ]" + comma)
        else:
            out.append("  %s: %s%s" % (json.dumps(key), dump(val), comma))
    out.append("}")
    return "\n".join(out) + "\n"


def write_text(path, text):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def eager_state(factory, kwargs, args, graph):
    model = construct_eager(factory, kwargs, args.seed)
    if args.state_dict:
        sd = torch.load(args.state_dict, map_location="cpu")
        if isinstance(sd, dict) and "state_dict" in sd and isinstance(sd["state_dict"], dict):
            sd = sd["state_dict"]
        missing, unexpected = model.load_state_dict(sd, strict=False)
        names = {d["name"] for d in graph["parameters"]}
        miss = sorted(set(missing) & names)
        if miss:
            raise ExportError("--state-dict %s lacks %s" % (args.state_dict, miss))
    return model


def write_weights(path, model, graph):
    named = dict(model.named_parameters())
    named.update(dict(model.named_buffers()))
    out = {}
    for d in graph["parameters"] + graph["buffers"]:
        t = named.get(d["name"])
        if t is None:
            continue  # exporter-made constants (const.*): shardc makes them from init
        out[d["name"]] = t.detach().to("cpu").contiguous()
    tr.write_safetensors(path, out, {"format": "pt", "exporter": "shardc export_torch"})


def run_eager(args, factory, kwargs):
    """Runs the module eagerly with parameters from a safetensors file (e.g.
    shardc run --save-params) and writes its outputs named as in the graph."""
    graph = tr.load_graph(args.eager)
    model = construct_eager(factory, kwargs, args.seed)
    model.train(bool(args.train))
    params = tr.read_safetensors(args.params)
    by_name = dict(model.named_parameters())
    by_name.update(dict(model.named_buffers()))
    with torch.no_grad():
        for d in graph["parameters"]:
            t = params.get(d["name"])
            if t is None:
                raise ExportError("%s: parameter %s missing" % (args.params, d["name"]))
            by_name[d["name"]].copy_(t)
        for d in graph.get("buffers", []):  # running statistics, as the run loads them
            if d["name"] in params and d["name"] in by_name:
                by_name[d["name"]].copy_(params[d["name"]])
    # Master weights (--param-dtype): the module runs in each parameter's
    # graph dtype, as FSDP2 runs its unsharded parameters; gradients come
    # back in the master dtype (below), as FSDP2's reduce_dtype.
    master = {d["name"]: _DTYPE_NAMES[d["master_dtype"]] for d in graph["parameters"]
              if "master_dtype" in d}
    stored = {name: by_name[name].data for name in master}  # --state-after writes these
    with torch.no_grad():
        for d in graph["parameters"]:
            if d["name"] in master:
                by_name[d["name"]].data = by_name[d["name"]].data.to(_DTYPE_NAMES[d["dtype"]])
    inputs = tr.read_safetensors(args.inputs)
    sig = inspect.signature(model.forward)
    call = {}
    for d in graph["inputs"]:
        call[d["name"]] = inputs[d["name"]]
    if args.grad:
        for d in graph["parameters"]:
            by_name[d["name"]].requires_grad_(True)
        res = model(**call)
    else:
        with torch.no_grad():
            res = model(**call)
    flat = []

    def collect(v):
        if isinstance(v, torch.Tensor):
            flat.append(v)
        elif isinstance(v, (tuple, list)):
            for x in v:
                collect(x)
        elif isinstance(v, dict):
            for x in v.values():
                collect(x)
    collect(res)
    if len(flat) != len(graph["outputs"]):
        raise ExportError("forward returned %d tensors, the graph has %d outputs"
                          % (len(flat), len(graph["outputs"])))
    del sig
    out = {n: t.detach().contiguous() for n, t in zip(graph["outputs"], flat)}
    if args.grad:
        # shardc run --grad's outputs: LOSS, then grad.NAME per parameter
        # the loss depends on (torch leaves the others' .grad None).
        if args.grad not in out:
            raise ExportError("--grad %s: not one of the graph's outputs %s"
                              % (args.grad, graph["outputs"]))
        loss = flat[graph["outputs"].index(args.grad)]
        names = [d["name"] for d in graph["parameters"]]
        grads = torch.autograd.grad(loss, [by_name[n] for n in names], allow_unused=True)
        for name, g in zip(names, grads):
            if g is not None:
                out["grad." + name] = g.to(master.get(name, g.dtype)).contiguous()
    tr.write_safetensors(args.outputs, out)
    if args.state_after:
        for name, data in stored.items():  # master weights: their stored values
            by_name[name].data = data
        write_weights(args.state_after, model, graph)


def parser():
    ap = argparse.ArgumentParser(
        prog="export_torch.py",
        description="Export a torch.nn.Module's init and forward as a shardc graph "
                    "(docs/exporter.md).")
    ap.add_argument("model", help="package.module:Class (or a function returning a module)")
    ap.add_argument("--kwargs", help="constructor keyword arguments as a JSON object")
    ap.add_argument("-o", "--output", help="graph file to write (default: stdout)")
    ap.add_argument("--weights", help="also write the weights of an eager instance "
                    "(or of --state-dict) as safetensors, named as the graph's parameters")
    ap.add_argument("--seed", type=int, default=0,
                    help="torch.manual_seed for the eager instance (--weights, --eager)")
    ap.add_argument("--state-dict", help="a torch.save'd state_dict for --weights")
    ap.add_argument("--batch", type=int, help="with --seq: every forward argument is "
                    "int64 token ids [B, T]")
    ap.add_argument("--seq", type=int)
    ap.add_argument("--input-shapes", help="JSON: {arg: [shape]} (float32) or "
                    "{arg: {\"shape\": [...], \"dtype\": ..., \"high\": N}}")
    ap.add_argument("--device", help="the device parameters are meant for "
                    "(default: the constructor's device= kwarg, else cpu)")
    ap.add_argument("--units-from-modules", action="append", metavar="CLASS",
                    help="each module of this class is an FSDP unit (repeatable); "
                         "default: leave units to shardc's rule")
    ap.add_argument("--capture", choices=["aten", "fx"],
                    help="how forward is traced: aten (torch.export + Core ATen "
                         "decompositions, torch >= 2, the default there) or fx (per module "
                         "and function, the default on torch 1.x)")
    ap.add_argument("--train", action="store_true",
                    help="trace forward in training mode (model.train()): batch norm by "
                         "the batch's statistics, its running statistics updated (the "
                         "graph's \"updates\"); with --eager, run the module so and write "
                         "its state after forward to --state-after")
    ap.add_argument("--state-after", metavar="FILE.safetensors",
                    help="with --eager: the module's parameters and buffers after forward, "
                         "named as the graph's (shardc run --save)")
    ap.add_argument("--param-dtype", choices=["bfloat16", "float16"],
                    help="master weights (docs/graph-format.md): trace forward with the "
                    "parameters in this dtype and floating inputs cast to it, as FSDP2's "
                    "MixedPrecisionPolicy(param_dtype=...); shardc keeps each parameter in "
                    "its own dtype (init, shards, optimizer, checkpoints)")
    ap.add_argument("--keep-attention-ops", action="store_true",
                    help="leave hand-written attention (matmul, softmax, matmul) as those "
                         "ops instead of the graph's scaled_dot_product_attention "
                         "(docs/exporter.md, \"Hand-written attention\")")
    ap.add_argument("--name", help="the graph's name (default: the class name)")
    ap.add_argument("--output-names", help="comma-separated names of forward's outputs "
                    "(default output, output.N)")
    ap.add_argument("--python-path", action="append", default=[],
                    help="directory to put on sys.path first (repeatable)")
    ap.add_argument("--eager", metavar="GRAPH.json",
                    help="instead of exporting: run the module eagerly with --params and "
                         "--inputs (safetensors), write --outputs named as GRAPH's outputs")
    ap.add_argument("--params")
    ap.add_argument("--grad", metavar="LOSS",
                    help="with --eager: also write grad.NAME per parameter, the "
                         "gradients of output LOSS by torch.autograd (shardc run --grad)")
    ap.add_argument("--inputs")
    ap.add_argument("--outputs")
    return ap


def main(argv=None):
    ap = parser()
    args = ap.parse_args(argv)
    for p in reversed(args.python_path):
        sys.path.insert(0, os.path.abspath(p))
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    if (args.batch is None) != (args.seq is None):
        ap.error("--batch and --seq go together")
    try:
        if args.eager:
            if not (args.params and args.inputs and args.outputs):
                ap.error("--eager needs --params, --inputs and --outputs")
            factory = load_factory(args.model)
            kwargs, _ = build_kwargs(args)
            run_eager(args, factory, kwargs)
            return 0
        graph, factory, kwargs, _ = export(args)
        const_data = graph.pop("_const_data", None)
        if const_data:
            if not args.output:
                raise ExportError("the graph has constant data (const_data.py) written "
                                  "beside the graph file: give -o")
            from .const_data import write_and_attach
            write_and_attach(graph, const_data, args.output, tr.write_safetensors)
        text = render(graph)
        if args.output:
            write_text(args.output, text)
        else:
            sys.stdout.write(text)
        if args.weights:
            model = eager_state(factory, kwargs, args, graph)
            write_weights(args.weights, model, graph)
        return 0
    except ExportError as e:
        print("export_torch: error: %s" % e, file=sys.stderr)
        return 2
    except (OSError, ValueError, KeyError) as e:
        print("export_torch: error: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        return 2
