"""Constants built in __init__ or forward whose values no init op expresses
(Swin's shifted-window attention mask: 0 / -100 by region) become graph
buffers with bounded data: a non-persistent buffer whose init is a `load`
from a safetensors file written next to the graph (`<graph>.consts.safetensors`,
docs/graph-format.md, "Constant data"). `--save` never writes them."""

import os

import torch

from .graph_emitter import GRAPH_DTYPES, G

# At most this many elements per constant (4 MiB of float32): a mask or a
# coordinate table, never a weight.
MAX_DATA_ELEMENTS = 1 << 20
FILE_SUFFIX = ".consts.safetensors"

# A model whose buffers come out on meta, or whose parameters may be constant
# data (export.py), is built again with real parameters, up to this many
# parameter bytes (1 GiB of float32: any image model; a language model's
# buffers never depend on its parameters).
MAX_REBUILD_PARAM_BYTES = 1 << 30


def data_buffer(low, t, dtype):
    """A graph buffer holding t's values (converted to dtype), or None when t
    is too large or of a dtype the graph cannot hold."""
    if dtype == torch.int64:
        return None
    return _buffer(low, t, dtype)


def leading_period(t):
    """(block, copies): t is `copies` copies of `block` along dim 0, the
    fewest rows that repeat (Swin's shifted-window mask repeated for each
    image of the batch); (t, 1) when no shorter block repeats. Held as the
    block and a `cat` of its copies, the graph says the rows are copies:
    `--data-parallel` gives each rank copies for its own rows."""
    if t.dim() == 0 or t.shape[0] < 2:
        return t, 1
    n = t.shape[0]
    for p in range(1, n // 2 + 1):
        if n % p == 0 and torch.equal(t, t[:p].repeat(n // p, *[1] * (t.dim() - 1))):
            return t[:p], n // p
    return t, 1


def index_buffer(low, t):
    """A graph buffer holding the int64 index t (an index table built in
    __init__ that no strided read expresses: BEiT's relative position index
    with its class-token entries, LeViT's attention bias offsets), or None
    when t is too large. int64 buffers are constant data only: the graph
    reader takes them non-persistent and loaded, never computed."""
    return _buffer(low, t, torch.int64)


def _buffer(low, t, dtype):
    if t.numel() > MAX_DATA_ELEMENTS or dtype not in GRAPH_DTYPES:
        return None
    if not hasattr(low, "const_tensors"):
        low.const_tensors, low.const_by_value = {}, {}
    shape = list(t.shape)
    data = t.detach().to(dtype).contiguous().reshape(shape)
    # equal constants (one per block: swin_v2's coordinate table) share a buffer
    key = (str(dtype), tuple(shape), data.reshape(-1).view(torch.uint8).numpy().tobytes()
           if data.numel() else b"")
    if key in low.const_by_value:
        return G(low.const_by_value[key], torch.empty(shape, dtype=dtype, device="meta"))
    name = low.fresh("const.data.%s" % "x".join(str(s) for s in shape))
    low.const_by_value[key] = name
    low.const_tensors[name] = data
    # "file" is set when the graph is written (attach_file)
    low.graph_buffers[name] = {"name": name, "shape": shape, "dtype": GRAPH_DTYPES[dtype],
                               "device": low.device,
                               "init": [{"op": "load", "tensor": name}]}
    return G(name, torch.empty(shape, dtype=dtype, device="meta"))


def write_and_attach(graph, tensors, graph_path, write_safetensors):
    """Writes the live constants next to graph_path and points their buffers'
    load at that file (relative: the graph reader resolves it against the
    graph's directory)."""
    live = {b["name"] for b in graph["buffers"]}
    live |= {p["name"] for p in graph["parameters"] if p["init"][0]["op"] == "load"}
    tensors = {n: t for n, t in tensors.items() if n in live}
    if not tensors:
        return None
    path = graph_path + FILE_SUFFIX
    tmp = "%s.tmp.%d" % (path, os.getpid())
    write_safetensors(tmp, tensors)
    os.replace(tmp, path)
    for b in graph["buffers"] + graph["parameters"]:
        if b["name"] in tensors and b["init"][0]["op"] == "load":
            b["init"][0]["file"] = os.path.basename(path)
    return path
