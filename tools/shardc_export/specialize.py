"""Specialising the ATen capture on an input's values (docs/exporter.md,
"Specialising on input values").

torch.export traces forward on fake tensors, which have shapes but no
values: Python control flow that reads an input's values (`.item()`,
`int(lengths.max())`, torchaudio's Conformer building its padding mask) stops
the trace. An input given example values (`"value": [...]` in
--input-shapes) gets a *shadow*: its real values on CPU. Every torch call
whose tensor operands all have shadows is run on the shadows too, so a
value read (`.item()`, `int()`, `bool()`, `tolist()`) of a tensor computed
only from such inputs returns the concrete Python value instead of an
unknown one. The inputs whose values were read this way are *specialised*:
the lowering treats them as constants of those values, the graph records
them (which input, its values, the source line that read them) and shardc
refuses other values at run time.
"""

import contextlib
import functools
import traceback
import weakref

import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import _disable_current_modes

# Tensor methods that hand a tensor's values to Python.
_VALUE_READS = {torch.Tensor.item, torch.Tensor.__int__, torch.Tensor.__bool__,
                torch.Tensor.__float__, torch.Tensor.__index__, torch.Tensor.tolist}


def _user_line():
    """file:line in function (`code`) of the innermost frame of the model's
    own code (not torch's, not the exporter's)."""
    frames = [f for f in traceback.extract_stack()
              if "/torch/" not in f.filename and "shardc_export" not in f.filename]
    if not frames:
        return "an unknown place"
    f = frames[-1]
    return "%s:%d in %s (`%s`)" % (f.filename.split("/site-packages/")[-1], f.lineno,
                                   f.name, (f.line or "").strip())


class ValueShadows(TorchFunctionMode):
    """Runs each torch call on the shadows (real values) of its operands as
    well, when every tensor operand has one; a value read of a shadowed
    tensor returns the real value and records which inputs it came from."""

    def __init__(self):
        super().__init__()
        self.shadow = {}  # id(fake tensor) -> (weakref, real tensor, input names)
        self.read = {}    # input name -> the first source line that read its values

    def get(self, t):
        e = self.shadow.get(id(t))
        return e if e is not None and e[0]() is t else None

    def set(self, t, real, origins):
        self.shadow[id(t)] = (weakref.ref(t), real, origins)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat, spec = pytree.tree_flatten((args, kwargs))
        tensors = [a for a in flat if isinstance(a, torch.Tensor)]
        shadows = [self.get(a) for a in tensors]
        if not tensors or not all(shadows):
            return func(*args, **kwargs)
        origins = set().union(*(s[2] for s in shadows))
        real = [self.get(a)[1] if isinstance(a, torch.Tensor) else a for a in flat]
        rargs, rkwargs = pytree.tree_unflatten(real, spec)
        if "device" in rkwargs:
            rkwargs["device"] = torch.device("cpu")
        # the real computation: outside fake mode and the tracer
        with _disable_current_modes(), torch._C.DisableTorchFunction():
            rout = func(*rargs, **rkwargs)
        if func in _VALUE_READS:
            where = _user_line()
            for name in sorted(origins):
                self.read.setdefault(name, where)
            return rout
        out = func(*args, **kwargs)
        if isinstance(out, torch.Tensor) and isinstance(rout, torch.Tensor):
            self.set(out, rout, origins)
        return out


@contextlib.contextmanager
def shadowed_forward(model, values):
    """model.forward, while the context lasts, gives each keyword argument
    named in `values` ({name: CPU tensor}) its shadow. Yields the mode, whose
    `read` says afterwards which inputs' values control flow read."""
    mode = ValueShadows()
    if not values:
        yield mode
        return
    orig = model.forward

    @functools.wraps(orig)
    def forward(*args, **kwargs):
        with mode:
            for name, real in values.items():
                if isinstance(kwargs.get(name), torch.Tensor):
                    mode.set(kwargs[name], real, {name})
            return orig(*args, **kwargs)
    model.forward = forward
    try:
        yield mode
    finally:
        del model.forward


def example_values(input_decls):
    """{name: CPU tensor} of the inputs given example values."""
    from .export import _DTYPE_NAMES
    out = {}
    for d in input_decls:
        if "value" in d:
            out[d["name"]] = torch.tensor(d["value"], dtype=_DTYPE_NAMES[d["dtype"]])
    return out
