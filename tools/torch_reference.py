#!/usr/bin/python3
"""PyTorch eager reference for shardc graphs (docs/graph-format.md).

Run it with Debian's python (PyTorch 1.13): /usr/bin/python3.

Forward (the default mode): interpret MODEL.json's nodes with torch eager ops
on the given parameters and inputs, write the outputs as safetensors:

    /usr/bin/python3 tools/torch_reference.py MODEL.json \
        --params PARAMS.safetensors --inputs INPUTS.safetensors \
        --outputs OUT.safetensors [--threads N] [--time REPEATS]

  --time R      also time the forward: --warmup W runs (default 2, the
                first being the run whose outputs are written), then R runs; prints the
                median (and min / max) wall seconds; --time-json FILE writes
                {"forward_seconds": median, ...}.
  --threads N   torch.set_num_threads(N) (default: torch's default).
  --compute-dtype float32|float64
                cast every floating parameter / input to this dtype first
                (float64 gives a ground truth to judge float32 results by);
                outputs are written in the dtype they are computed in.

Helpers for tests and benchmarks:

    --make-inputs MODEL.json --seed S --out INPUTS.safetensors
        int64 inputs uniform in [0, high) ("high" from the graph, else 2),
        an input with a recorded "value" (specialised) those values,
        float inputs uniform in [-1, 1), from torch.Generator(seed).
    --make-params MODEL.json --seed S --out PARAMS.safetensors
        parameters drawn with torch from their init chains (same
        distributions as shardc, NOT the same bits: shardc uses Philox);
        for timing torch when shardc cannot run the model yet.
    --compare A.safetensors B.safetensors [--rtol 1e-5] [--metric M]
        per tensor: max |a-b|, the norm-based relative error
        max|a-b| / max|b| ("max-norm", the default criterion) and the
        elementwise max |a-b| / max(|b|, 1e-6) ("elementwise"). Exits 1 when
        the chosen metric exceeds rtol for any tensor, when the tensor names,
        shapes differ, or when NaN / Inf positions differ; integer tensors
        must be equal. B is the reference.

Semantics of each node follow docs/graph-format.md and the torch modules they
come from: linear = F.linear (nn.Linear), gelu = F.gelu(approximate=...),
layer_norm = F.layer_norm, rms_norm = Hugging Face LlamaRMSNorm
(x * rsqrt(mean(x^2) + eps) * weight), rotary_embedding = Hugging Face
rotate-half RoPE (inv_freq = 1 / theta^(arange(0, D, 2) / D), positions
0..T-1, emb = cat(freqs, freqs)), scaled_dot_product_attention = nanoGPT's
explicit path softmax((q @ k^T) * scale, causal mask top-left as torch's
is_causal) @ v (torch 1.13 has no F.scaled_dot_product_attention), k and v
with fewer heads repeated in place (grouped-query attention).
bfloat16 / float16 operands are computed in float32 and the result rounded
back (bf16 storage, f32 accumulation), as shardc does.
"""

import argparse
import json
import math
import os
import re
import statistics
import struct
import sys
import time
import zlib

import numpy as np
import torch
import torch.nn.functional as F

# ---------------------------------------------------------------- safetensors

_ST_TO_NP = {"F64": np.float64, "F32": np.float32, "F16": np.float16,
             "I64": np.int64, "I32": np.int32, "I16": np.int16,
             "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
_TORCH_TO_ST = {torch.float64: "F64", torch.float32: "F32",
                torch.float16: "F16", torch.bfloat16: "BF16",
                torch.int64: "I64", torch.int32: "I32", torch.int16: "I16",
                torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL"}
_GRAPH_DTYPES = {"float32": torch.float32, "float64": torch.float64,
                 "float16": torch.float16, "bfloat16": torch.bfloat16,
                 "int64": torch.int64}


def read_safetensors(path):
    """Returns {name: torch tensor} (own memory, little-endian, CPU)."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError("%s: not a safetensors file (shorter than 8 bytes)" % path)
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError("%s: header length %d runs past the end" % (path, n))
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = memoryview(raw)[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt, shape = info["dtype"], [int(s) for s in info["shape"]]
        begin, end = info["data_offsets"]
        buf = data[begin:end]
        count = 1
        for s in shape:
            count *= s
        if dt == "BF16":
            if end - begin != 2 * count:
                raise ValueError("%s: %s: %d bytes for %d bf16 elements"
                                 % (path, name, end - begin, count))
            u16 = np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16
            t = torch.from_numpy(u16.view(np.float32).copy()).to(torch.bfloat16)
        elif dt in _ST_TO_NP:
            npdt = np.dtype(_ST_TO_NP[dt]).newbyteorder("<")
            if end - begin != npdt.itemsize * count:
                raise ValueError("%s: %s: %d bytes for %d %s elements"
                                 % (path, name, end - begin, count, dt))
            arr = np.frombuffer(buf, dtype=npdt).astype(npdt.newbyteorder("="))
            t = torch.from_numpy(arr.copy())
        else:
            raise ValueError("%s: %s: unsupported dtype %s" % (path, name, dt))
        out[name] = t.reshape(shape)
    return out


def _tensor_bytes(t):
    t = t.detach().to("cpu").contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().astype("<i2").tobytes()
    if t.dtype not in _TORCH_TO_ST:
        raise ValueError("cannot write dtype %s" % t.dtype)
    a = t.numpy()
    return a.astype(a.dtype.newbyteorder("<")).tobytes()


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: tensor}, written in sorted name order; atomic rename."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name in sorted(tensors):
        t = tensors[name]
        b = _tensor_bytes(t)
        header[name] = {"dtype": _TORCH_TO_ST[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


# ---------------------------------------------------------------- interpreter

# Family ops of the unary family (docs/ops.md) the reference knows.
_UNARY = {
    "sigmoid": lambda x, n: torch.sigmoid(x),
    "tanh": lambda x, n: torch.tanh(x),
    "exp": lambda x, n: torch.exp(x),
    "log": lambda x, n: torch.log(x),
    "sqrt_out": lambda x, n: torch.sqrt(x),
    "rsqrt": lambda x, n: torch.rsqrt(x),
    "neg_out": lambda x, n: -x,
    "reciprocal": lambda x, n: torch.reciprocal(x),
    "pow_scalar": lambda x, n: torch.pow(x, n["exponent"]),
}


def _dims(n, x):
    return n.get("dims") or list(range(x.dim()))


def _compare(fn):
    # float(): the value may be one of the JSON strings "inf", "-inf", "nan"
    return lambda a, n: fn(a[0], a[1] if len(a) > 1 else float(n["value"])).long()


def _conv(a, n):
    spatial = a[0].dim() - 2
    fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[spatial]
    if n.get("transposed"):
        fn = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[spatial]
        return fn(a[0], a[1], a[2] if len(a) > 2 else None, n["stride"], n["padding"],
                  n.get("output_padding", 0), n["groups"], n["dilation"])
    return fn(a[0], a[1], a[2] if len(a) > 2 else None, n["stride"], n["padding"],
              n["dilation"], n["groups"])


def _pool(fn_by_rank):
    return lambda a, n: fn_by_rank[a[0].dim() - 2](a[0], **n)


# Family ops (docs/ops.md) beyond the unary ones, with the graph's attributes.
def _philox4x32_10(blocks, stream, step, seed):
    """Philox4x32-10 (runtime/Philox.h) of counters (block lo, block hi,
    stream, step) under key (seed lo, seed hi): [len(blocks), 4] uint32
    words, in numpy uint64 (a product of two 32-bit words is exact there)."""
    import numpy as np
    m32 = np.uint64(0xffffffff)
    blocks = np.asarray(blocks, dtype=np.uint64)
    c0, c1 = blocks & m32, blocks >> np.uint64(32)
    c2 = np.full_like(c0, stream & 0xffffffff)
    c3 = np.full_like(c0, step & 0xffffffff)
    k0, k1 = seed & 0xffffffff, (seed >> 32) & 0xffffffff
    for r in range(10):
        if r > 0:
            k0, k1 = (k0 + 0x9E3779B9) & 0xffffffff, (k1 + 0xBB67AE85) & 0xffffffff
        p0 = np.uint64(0xD2511F53) * c0
        p1 = np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ np.uint64(k0), p1 & m32,
                          (p0 >> np.uint64(32)) ^ c3 ^ np.uint64(k1), p0 & m32)
    return np.stack([c0, c1, c2, c3], axis=1)


def _dropout(a, n, seed):
    """shardc's dropout (docs/rng.md, "Dropout masks"), from the spec."""
    import numpy as np
    x, step = a[0], a[1]
    p = float(n["p"])
    count = x.numel()
    index = np.arange(count, dtype=np.uint64)
    words = _philox4x32_10(np.arange((count + 3) // 4), int(n["stream"]), int(step.item()), seed)
    word = words[(index // np.uint64(4)).astype(np.int64), (index % np.uint64(4)).astype(np.int64)]
    threshold = 0 if p <= 0 else (1 << 24 if p >= 1 else math.ceil(p * 16777216.0))
    keep = torch.from_numpy((word >> np.uint64(8)) >= np.uint64(threshold)).reshape(x.shape)
    scale = 1.0 / (1.0 - p) if p < 1 else 0.0
    return torch.where(keep, x * scale, torch.zeros_like(x))


def _moe_experts(a, n):
    """moe_experts (docs/ops.md): each expert on its tokens in ascending
    order, added as Hugging Face's looping forward adds them
    (tools/shardc_export/moe.py's reference)."""
    x, index, weights, gate_up, down = a
    act = {"silu": F.silu, "relu": torch.relu, "gelu": F.gelu,
           "gelu_tanh": lambda v: F.gelu(v, approximate="tanh")}[n.get("activation", "silu")]
    out = torch.zeros_like(x)
    for e in range(gate_up.shape[0]):
        token, slot = torch.where(index == e)
        if token.numel() == 0:
            continue
        gate, up = F.linear(x[token], gate_up[e]).chunk(2, dim=-1)
        y = F.linear(act(gate) * up, down[e])
        out = out.index_add(0, token, y * weights[token, slot, None])
    return out


def _embedding_backward(a, n):
    """Row v: the sum of the src rows whose index is v (torch's index_add);
    the padding_idx row none; plus acc, the optional third operand."""
    src, index = a[0], a[1]
    if n.get("padding_idx", -1) >= 0:
        src = src * (index != n["padding_idx"]).to(src.dtype)[:, None]
    sums = src.new_zeros([n["rows"]] + list(src.shape[1:])).index_add(0, index, src)
    return sums + a[2] if len(a) > 2 else sums


_FAMILY = {
    "conv": _conv,
    "topk": lambda a, n: torch.topk(a[0], n["k"], n["dim"],
                                    largest=bool(n.get("largest", 1))).indices,
    "gather": lambda a, n: torch.gather(a[0], n["dim"], a[1]),
    "moe_experts": _moe_experts,
    "batch_norm": lambda a, n: F.batch_norm(a[0], a[1], a[2], a[3] if len(a) > 3 else None,
                                            a[4] if len(a) > 4 else None, False, 0.0,
                                            n.get("eps", 1e-5)),
    "group_norm": lambda a, n: F.group_norm(a[0], n["groups"], a[1] if len(a) > 1 else None,
                                            a[2] if len(a) > 2 else None, n.get("eps", 1e-5)),
    "max_pool": lambda a, n: {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[a[0].dim() - 2](
        a[0], n["kernel"], n["stride"], n["padding"], n.get("dilation", 1),
        ceil_mode=bool(n.get("ceil_mode", 0))),
    "avg_pool": lambda a, n: {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[a[0].dim() - 2](
        a[0], n["kernel"], n["stride"], n["padding"], bool(n.get("ceil_mode", 0)),
        bool(n.get("count_include_pad", 1)),
        **({"divisor_override": n["divisor_override"]} if n.get("divisor_override") else {})),
    "adaptive_avg_pool": lambda a, n: {1: F.adaptive_avg_pool1d, 2: F.adaptive_avg_pool2d,
                                       3: F.adaptive_avg_pool3d}[a[0].dim() - 2](
        a[0], n["output_size"]),
    "amax": lambda a, n: torch.amax(a[0], _dims(n, a[0]), bool(n.get("keepdim", 0))),
    "amin": lambda a, n: torch.amin(a[0], _dims(n, a[0]), bool(n.get("keepdim", 0))),
    "var": lambda a, n: torch.var(a[0], _dims(n, a[0]), unbiased=bool(n.get("correction", 1)),
                                  keepdim=bool(n.get("keepdim", 0))),
    "abs": lambda a, n: torch.abs(a[0]),
    "erf": lambda a, n: torch.erf(a[0]),
    "sin": lambda a, n: torch.sin(a[0]),
    "cos": lambda a, n: torch.cos(a[0]),
    "clamp_out": lambda a, n: torch.clamp(a[0], *(None if n.get(k) is None else float(n[k])
                                                  for k in ("min", "max"))),
    "leaky_relu": lambda a, n: F.leaky_relu(a[0], n.get("negative_slope", 0.01)),
    "hardswish": lambda a, n: F.hardswish(a[0]),
    "hardsigmoid": lambda a, n: F.hardsigmoid(a[0]),
    "softplus": lambda a, n: F.softplus(a[0], n.get("beta", 1.0), n.get("threshold", 20.0)),
    "elu": lambda a, n: torch.ops.aten.elu(a[0], n.get("alpha", 1.0), 1.0, n.get("input_scale", 1.0)),
    "mish": lambda a, n: F.mish(a[0]),
    "as_strided": lambda a, n: torch.as_strided(a[0].contiguous(), n["size"], n["stride"],
                                                n.get("offset", 0)),
    "where": lambda a, n: torch.where(a[0] != 0, a[1], a[2]),
    "cumsum": lambda a, n: (a[0].flip(n["dim"]).cumsum(n["dim"]).flip(n["dim"])
                            if n.get("reverse", 0) else a[0].cumsum(n["dim"])),
    "embedding_backward": _embedding_backward,
    "cast": lambda a, n: a[0].to(_GRAPH_DTYPES[n["dtype"]]),
    "eq": _compare(torch.eq), "ne": _compare(torch.ne), "lt": _compare(torch.lt),
    "le": _compare(torch.le), "gt": _compare(torch.gt), "ge": _compare(torch.ge),
}


def _low_precision(t):
    return isinstance(t, torch.Tensor) and t.dtype in (torch.bfloat16, torch.float16)


class Interpreter:
    """Runs a graph's forward nodes. Caches RoPE tables and causal masks
    across calls (as the torch modules do: HF keeps cos/sin caches, nanoGPT a
    tril buffer), so timed runs measure the forward only."""

    def __init__(self, graph):
        self.graph = graph
        # Master weights (docs/graph-format.md): such a parameter is held in
        # its "master_dtype" and every forward reads it converted to its
        # "dtype" (FSDP2's param_dtype); autograd returns the gradient in
        # the master dtype through the conversion.
        self.compute = {d["name"]: _GRAPH_DTYPES[d["dtype"]]
                        for d in graph.get("parameters", []) if "master_dtype" in d}
        self.nodes = graph.get("nodes", [])
        self.outputs = graph.get("outputs", [])
        self._rope = {}
        self._mask = {}

    # -- op helpers
    def _causal_mask(self, L, S, device):
        key = (L, S, str(device))
        m = self._mask.get(key)
        if m is None:
            m = torch.ones(L, S, dtype=torch.bool, device=device).tril(diagonal=0)
            self._mask[key] = m
        return m

    def _rope_tables(self, T, D, theta, dtype, device):
        key = (T, D, float(theta), dtype, str(device))
        cs = self._rope.get(key)
        if cs is None:
            inv_freq = 1.0 / (theta ** (torch.arange(0, D, 2, device=device).float() / D))
            t = torch.arange(T, device=device).type_as(inv_freq)
            freqs = torch.einsum("i,j->ij", t, inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            cs = (emb.cos().to(dtype), emb.sin().to(dtype))
            self._rope[key] = cs
        return cs

    @staticmethod
    def _rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def _sdpa(self, q, k, v, causal, scale, mask=None):
        if k.shape[-3] != q.shape[-3]:
            # grouped-query attention: query head h reads head h // g
            g = q.shape[-3] // k.shape[-3]
            k, v = k.repeat_interleave(g, dim=-3), v.repeat_interleave(g, dim=-3)
        E = q.shape[-1]
        if scale is None:
            scale = 1.0 / math.sqrt(E)
        att = (q @ k.transpose(-2, -1)) * scale
        if mask is not None:
            att = att + mask
        if causal:
            L, S = q.shape[-2], k.shape[-2]
            att = att.masked_fill(~self._causal_mask(L, S, att.device), float("-inf"))
        att = F.softmax(att, dim=-1)
        return att @ v

    def _apply(self, n, a):
        op = n["op"]
        if op == "add":
            return [a[0] + a[1]]
        if op == "sub":
            return [a[0] - a[1]]
        if op == "mul":
            return [a[0] * a[1]]
        if op == "div":
            return [a[0] / a[1]]
        if op == "embedding":
            return [F.embedding(a[1], a[0])]
        if op == "linear":
            return [F.linear(a[0], a[1], a[2] if len(a) > 2 else None)]
        if op == "matmul":
            return [torch.matmul(a[0], a[1])]
        if op == "gelu":
            return [F.gelu(a[0], approximate=n.get("approximate", "none"))]
        if op == "silu":
            return [F.silu(a[0])]
        if op == "relu":
            return [F.relu(a[0])]
        if op == "layer_norm":
            x, w, b = a
            return [F.layer_norm(x, (x.shape[-1],), w, b, n.get("eps", 1e-5))]
        if op == "rms_norm":
            x, w = a
            var = x.pow(2).mean(-1, keepdim=True)
            return [w * (x * torch.rsqrt(var + n.get("eps", 1e-6)))]
        if op == "softmax":
            return [F.softmax(a[0], dim=n.get("dim", -1))]
        if op == "scaled_dot_product_attention":
            return [self._sdpa(a[0], a[1], a[2], bool(n.get("causal", False)),
                               n.get("scale"), a[3] if len(a) > 3 else None)]
        if op == "rotary_embedding":
            x = a[0]
            T, D = x.shape[-2], x.shape[-1]
            cos, sin = self._rope_tables(T, D, n.get("theta", 10000.0), x.dtype, x.device)
            return [x * cos + self._rotate_half(x) * sin]
        if op == "reshape":
            return [a[0].reshape(n["shape"])]
        if op == "transpose":
            return [a[0].transpose(n["dim0"], n["dim1"])]
        if op == "permute":
            return [a[0].permute(*n["dims"])]
        if op == "slice":
            x = a[0]
            dim = n["dim"] % x.dim()
            idx = [slice(None)] * x.dim()
            idx[dim] = slice(n.get("start", 0), n.get("end"), n.get("step", 1))
            return [x[tuple(idx)]]
        if op == "split":
            return list(torch.split(a[0], list(n["sizes"]), dim=n["dim"]))
        if op == "cat":
            return [torch.cat(list(a), dim=n["dim"])]
        if op == "cross_entropy":
            return [F.cross_entropy(a[0], a[1], ignore_index=int(n.get("ignore_index", -100)))]
        if op in ("sum", "mean"):
            dims = n.get("dims") or list(range(a[0].dim()))
            fn = torch.sum if op == "sum" else torch.mean
            return [fn(a[0], dim=dims, keepdim=bool(n.get("keepdim", 0)))]
        if op in _UNARY:
            return [_UNARY[op](a[0], n)]
        if op == "dropout":  # shardc run's default --seed
            return [_dropout(a, n, getattr(self, "seed", 0))]
        if op in _FAMILY:
            return [_FAMILY[op](a, n)]
        raise ValueError("node %r: unknown op %r" % (n.get("name", n.get("names")), op))

    def run(self, env):
        """env: {name: tensor} with every parameter, buffer and input."""
        env = dict(env)
        for name, dtype in self.compute.items():
            env[name] = env[name].to(dtype)
        for i, n in enumerate(self.nodes):
            try:
                args = [env[x] for x in n["inputs"]]
            except KeyError as e:
                raise ValueError("nodes[%d]: input %s is not defined" % (i, e))
            low = [t.dtype for t in args if _low_precision(t)]
            if low:
                args = [t.float() if _low_precision(t) else t for t in args]
            res = self._apply(n, args)
            if low:
                res = [r.to(low[0]) if r.is_floating_point() else r for r in res]
            names = n["names"] if "names" in n else [n["name"]]
            if len(names) != len(res):
                raise ValueError("nodes[%d]: %d names for %d results" % (i, len(names), len(res)))
            env.update(zip(names, res))
        # The graph's "updates": the buffers' values after this forward
        # (a training-mode batch norm's running statistics).
        self.new_buffers = {u["buffer"]: env[u["value"]].detach()
                            for u in self.graph.get("updates", [])}
        return {o: env[o] for o in self.outputs}


# ---------------------------------------------------------------- graph I/O

def load_graph(path):
    with open(path) as f:
        g = json.load(f)
    if g.get("format") != "shardc-graph" or g.get("version") != 1:
        raise ValueError("%s: not a shardc-graph version 1 file" % path)
    return g


def stored_dtype(d):
    """The dtype a parameter is stored in: its master dtype when it has
    master weights (docs/graph-format.md), else its dtype."""
    return _GRAPH_DTYPES[d.get("master_dtype", d["dtype"])]


def check_tensors(kind, decls, tensors, path):
    for d in decls:
        name = d["name"]
        if name not in tensors:
            raise ValueError("%s: %s %r missing" % (path, kind, name))
        t = tensors[name]
        want_dt = stored_dtype(d)
        if list(t.shape) != list(d["shape"]) or t.dtype != want_dt:
            raise ValueError("%s: %s %r is %s %s, the graph says %s %s" % (
                path, kind, name, t.dtype, list(t.shape), want_dt, d["shape"]))


def build_env(graph, params, inputs, args, compute_dtype=None):
    check_tensors("parameter", graph.get("parameters", []), params, args.params)
    # --accumulate K: the inputs are K micro-batches of the graph's rows (a
    # 0-d input is every micro-batch's)
    k = getattr(args, "accumulate", None) or 1
    check_tensors("input", [dict(d, shape=[d["shape"][0] * k] + d["shape"][1:])
                            if d["shape"] else d
                            for d in graph.get("inputs", [])], inputs, args.inputs)
    env = {}
    files = {}
    for d in graph.get("parameters", []) + graph.get("buffers", []):
        init = d["init"][0] if d.get("init") else {}
        if d["name"] not in params and d.get("persistent", True) is False and \
                init.get("op") == "load" and init.get("file"):
            # constant data the exporter wrote next to the graph
            # (docs/graph-format.md, "Constant data")
            path = os.path.join(os.path.dirname(os.path.abspath(args.model or "")),
                                init["file"])
            if path not in files:
                files[path] = read_safetensors(path)
            env[d["name"]] = files[path][init.get("tensor", d["name"])].reshape(d["shape"])
            continue
        if d["name"] not in params and d.get("persistent", True) is False and \
                d["init"][0]["op"] in ("fill", "zeros", "ones"):
            # an exporter's constant (const.0.9), which no checkpoint holds
            t = _init_chain(d["init"], d["shape"], torch.Generator())
            env[d["name"]] = t.reshape(d["shape"]).to(_GRAPH_DTYPES[d["dtype"]])
            continue
        env[d["name"]] = params[d["name"]]
    for d in graph.get("inputs", []):
        env[d["name"]] = inputs[d["name"]]
    if compute_dtype is not None:
        env = {k: (v.to(compute_dtype) if v.is_floating_point() else v)
               for k, v in env.items()}
    return env


# ---------------------------------------------------------------- generators

def _seed_for(seed, name):
    return (int(seed) * 1000003 + zlib.crc32(name.encode("utf-8"))) & ((1 << 63) - 1)


def make_inputs(graph, seed):
    out = {}
    for d in graph.get("inputs", []):
        gen = torch.Generator().manual_seed(_seed_for(seed, d["name"]))
        dt = _GRAPH_DTYPES[d["dtype"]]
        if "value" in d:
            # an input the graph is specialised on: only its recorded values run
            out[d["name"]] = torch.tensor(d["value"], dtype=dt).reshape(d["shape"])
        elif dt == torch.int64:
            out[d["name"]] = torch.randint(0, int(d.get("high", 2)), d["shape"],
                                           generator=gen, dtype=torch.int64)
        else:
            x = torch.rand(d["shape"], generator=gen, dtype=torch.float32) * 2 - 1
            out[d["name"]] = x.to(dt)
    return out


def _init_chain(chain, shape, gen):
    import torch.nn.init as I
    g0 = chain[0]
    gshape = list(g0.get("shape", shape))
    t = torch.empty(gshape, dtype=torch.float32)
    op = g0["op"]
    if op == "fill":
        t.fill_(float(g0["value"]))  # also the JSON strings "inf", "-inf", "nan"
    elif op == "zeros":
        t.zero_()
    elif op == "ones":
        t.fill_(1)
    elif op == "uniform":
        t.uniform_(g0.get("a", 0.0), g0.get("b", 1.0), generator=gen)
    elif op == "normal":
        t.normal_(g0.get("mean", 0.0), g0.get("std", 1.0), generator=gen)
    elif op == "trunc_normal":
        m, s = g0.get("mean", 0.0), g0.get("std", 1.0)
        t.normal_(m, s, generator=gen).clamp_(g0.get("a", -2.0), g0.get("b", 2.0))
    elif op == "eye":
        t = torch.eye(*gshape)
    elif op == "arange":
        n = t.numel()
        t = (g0.get("start", 0.0) + g0.get("step", 1.0) *
             torch.arange(n, dtype=torch.float64)).float().reshape(gshape)
    elif op in ("kaiming_uniform", "kaiming_normal", "xavier_uniform",
                "xavier_normal", "orthogonal"):
        # torch.nn.init draws from the global generator.
        torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=gen)))
        kw = {k: v for k, v in g0.items() if k not in ("op", "shape")}
        getattr(I, op + "_")(t, **kw)
    else:
        raise ValueError("unknown init generator %r" % op)
    for p in chain[1:]:
        op = p["op"]
        if op == "mul":
            t = t * p["value"]
        elif op == "add":
            t = t + p["value"]
        elif op == "sub":
            t = t - p["value"]
        elif op == "div":
            t = t / p["value"]
        elif op == "clamp":
            t = t.clamp(p.get("min", -math.inf), p.get("max", math.inf))
        elif op == "erfinv":
            t = torch.erfinv(t)
        elif op == "sqrt":
            t = torch.sqrt(t)
        elif op == "neg":
            t = -t
        elif op == "fill_rows":
            t = t.clone()
            t[int(p["start"]):int(p["end"])] = p["value"]
        elif op == "reshape":
            t = t.reshape(p["shape"])
        elif op == "transpose":
            t = t.transpose(p["dim0"], p["dim1"])
        elif op == "permute":
            t = t.permute(*p["dims"])
        elif op == "slice":
            dim = p["dim"] % t.dim()
            idx = [slice(None)] * t.dim()
            idx[dim] = slice(p.get("start", 0), p.get("end"), p.get("step", 1))
            t = t[tuple(idx)]
        else:
            raise ValueError("unknown init op %r" % op)
    return t.contiguous()


def make_params(graph, seed):
    out = {}
    for d in graph.get("parameters", []) + graph.get("buffers", []):
        gen = torch.Generator().manual_seed(_seed_for(seed, d["name"]))
        t = _init_chain(d["init"], d["shape"], gen)
        out[d["name"]] = t.reshape(d["shape"]).to(stored_dtype(d))
    return out


# ---------------------------------------------------------------- compare

def compare(a_path, b_path, rtol, metric):
    A, B = read_safetensors(a_path), read_safetensors(b_path)
    ok = True
    if set(A) != set(B):
        print("tensor names differ: only in %s: %s; only in %s: %s" % (
            a_path, sorted(set(A) - set(B)), b_path, sorted(set(B) - set(A))))
        ok = False
    print("%-40s %-16s %12s %12s %12s  %s" % ("tensor", "shape", "max|a-b|",
                                             "max-norm", "elementwise", "ok"))
    for name in sorted(set(A) & set(B)):
        a, b = A[name], B[name]
        shape = "x".join(str(s) for s in b.shape) or "scalar"
        if list(a.shape) != list(b.shape):
            print("%-40s shapes differ: %s vs %s" % (name, list(a.shape), list(b.shape)))
            ok = False
            continue
        if not a.is_floating_point() or not b.is_floating_point():
            same = a.dtype == b.dtype and torch.equal(a, b)
            print("%-40s %-16s %12s %12s %12s  %s" % (name, shape, "-", "-", "-",
                                                     "equal" if same else "DIFFERENT"))
            ok = ok and same
            continue
        a64, b64 = a.double(), b.double()
        fa, fb = torch.isfinite(a64), torch.isfinite(b64)
        nonfinite_ok = torch.equal(fa, fb) and torch.equal(a64[~fa].nan_to_num(0, 1, -1),
                                                          b64[~fb].nan_to_num(0, 1, -1))
        d = (a64 - b64).abs()[fb & fa]
        bf = b64.abs()[fb & fa]
        maxabs = d.max().item() if d.numel() else 0.0
        maxnorm = maxabs / max(bf.max().item() if bf.numel() else 0.0, 1e-30)
        elem = (d / bf.clamp(min=1e-6)).max().item() if d.numel() else 0.0
        err = maxnorm if metric == "max-norm" else elem
        good = nonfinite_ok and err <= rtol
        ok = ok and good
        print("%-40s %-16s %12.3e %12.3e %12.3e  %s%s" % (
            name, shape, maxabs, maxnorm, elem, "ok" if good else "ABOVE rtol",
            "" if nonfinite_ok else " (NaN/Inf positions differ)"))
    print("%s: %s (metric %s, rtol %g)" % ("PASS" if ok else "FAIL",
                                           "%s vs reference %s" % (a_path, b_path),
                                           metric, rtol))
    return 0 if ok else 1


# ---------------------------------------------------------------- main

def gradients(graph, interp, env, loss):
    """The forward outputs, LOSS and grad.NAME for every parameter LOSS
    depends on (shardc run --grad's outputs), by torch.autograd."""
    params = [d["name"] for d in graph.get("parameters", [])]
    for name in params:
        env[name] = env[name].detach().requires_grad_(True)
    interp.outputs = list(dict.fromkeys(list(graph["outputs"]) + [loss]))
    out = interp.run(env)
    if out[loss].dim() != 0:
        raise ValueError("--grad %s: the loss must be 0-d" % loss)
    leaves = [n for n in params]
    grads = torch.autograd.grad(out[loss], [env[n] for n in leaves], allow_unused=True)
    result = {k: v.detach() for k, v in out.items()}
    for name, g in zip(leaves, grads):
        if g is not None:
            result["grad." + name] = g
    return result


def train(graph, interp, env, args):
    """shardc run --grad LOSS --optimizer ... --steps K: K steps of
    torch.optim.SGD / AdamW (single-tensor) on the same inputs. Prints each
    step's loss as shardc does; returns the trained parameters and the last
    step's outputs (forward before its update, as shardc's --outputs)."""
    loss = args.grad
    names = [d["name"] for d in graph.get("parameters", [])
             if not d.get("buffer", False)]
    for name in names:
        env[name] = env[name].detach().clone().requires_grad_(True)
    interp.outputs = list(dict.fromkeys(list(graph["outputs"]) + [loss]))
    leaves = [env[n] for n in names]
    # shardc's --no-weight-decay: a second parameter group without decay.
    exempt = [n for n in names if any(re.search(p, n) for p in args.no_weight_decay or [])]
    groups = [{"params": [env[n] for n in names if n not in exempt]}]
    if exempt:
        groups.append({"params": [env[n] for n in exempt], "weight_decay": 0.0})
    if args.train == "sgd":
        optimizer = torch.optim.SGD(groups, lr=args.lr, momentum=args.momentum or 0.0,
                                    weight_decay=args.weight_decay or 0.0,
                                    nesterov=args.nesterov, foreach=False)
    else:
        b1, b2 = (float(b) for b in (args.betas or "0.9,0.999").split(","))
        decay = 0.01 if args.weight_decay is None else args.weight_decay
        optimizer = torch.optim.AdamW(groups, lr=args.lr, betas=(b1, b2),
                                      eps=args.eps or 1e-8, weight_decay=decay,
                                      foreach=False)
    # shardc's --warmup-steps / --decay-steps / --min-lr (runtime/Optimizers.h
    # scheduledLr): the same factor with the same double operations.
    warmup, decay_steps = args.warmup_steps or 0, args.decay_steps or 0
    floor = (args.min_lr or 0.0) / args.lr

    def factor(epoch):
        step = epoch + 1  # LambdaLR's epoch 0 is the first optimizer.step()
        if warmup > 0 and step <= warmup:
            return step / warmup
        if decay_steps <= 0:
            return 1.0
        progress = min(1.0, (step - warmup) / decay_steps)
        return floor + (1 - floor) * (0.5 * (1 + math.cos(math.pi * progress)))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    out = {}
    seconds = []
    # --accumulate K (shardc run --accumulate): the inputs hold K micro-batches
    # of the graph's rows; each runs forward and backward of its loss / K, as
    # a torch loop accumulates, then one optimizer step.
    micro = args.accumulate or 1
    rows = {d["name"]: d["shape"][0] for d in graph.get("inputs", []) if d["shape"]}
    for step in range(1, args.steps + 1):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        parts = []
        for k in range(micro):
            run_env = dict(env)
            for name, b in rows.items():
                run_env[name] = env[name][k * b:(k + 1) * b]
            part = interp.run(run_env)
            env.update(interp.new_buffers)
            (part[loss] / micro).backward()
            parts.append(part)
        out = {name: (sum(p[name] for p in parts) / micro if parts[0][name].dim() == 0
                      else torch.cat([p[name] for p in parts]))
               for name in parts[0]}
        norm = None
        if args.clip_grad_norm:  # shardc's --clip-grad-norm
            norm = torch.nn.utils.clip_grad_norm_(leaves, args.clip_grad_norm)
        optimizer.step()
        scheduler.step()
        seconds.append(time.perf_counter() - start)
        print("step %d: %s = %.9g" % (step, loss, out[loss].item())
              + ("" if norm is None else ", grad_norm = %.9g" % norm.item()))
    if args.time_json:  # bench/train_step.py: every step's wall time
        with open(args.time_json, "w") as f:
            json.dump({"step_seconds": seconds, "threads": torch.get_num_threads(),
                       "torch": torch.__version__}, f)
            f.write("\n")
    trained = {name: env[name].detach() for name in names}
    # The model's state as shardc --save writes it: persistent buffers too.
    for d in graph.get("buffers", []):
        if d.get("persistent", True):
            trained[d["name"]] = env[d["name"]].detach()
    return trained, {k: v.detach() for k, v in out.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="PyTorch eager reference for shardc graphs",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("model", nargs="?", help="graph JSON (forward mode)")
    ap.add_argument("--params", help="parameters (safetensors)")
    ap.add_argument("--inputs", help="forward inputs (safetensors)")
    ap.add_argument("--outputs", help="where to write the forward outputs")
    ap.add_argument("--threads", type=int, help="torch.set_num_threads(N)")
    ap.add_argument("--time", type=int, metavar="REPEATS", help="time the forward")
    ap.add_argument("--warmup", type=int, default=2, metavar="W",
                    help="untimed runs before --time's (default 2)")
    ap.add_argument("--time-json", metavar="FILE", help="write the timing as JSON")
    ap.add_argument("--compute-dtype", choices=["float32", "float64"])
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"))
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--metric", choices=["max-norm", "elementwise"], default="max-norm")
    ap.add_argument("--make-inputs", metavar="MODEL")
    ap.add_argument("--make-params", metavar="MODEL")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="output file for --make-inputs / --make-params")
    ap.add_argument("--grad", metavar="LOSS",
                    help="also write LOSS and grad.NAME per parameter (torch.autograd)")
    ap.add_argument("--train", choices=["sgd", "adamw"],
                    help="with --grad: --steps optimizer steps; --outputs gets the "
                         "trained parameters, --step-outputs the last step's outputs")
    ap.add_argument("--step-outputs", metavar="FILE")
    ap.add_argument("--lr", type=float)
    ap.add_argument("--momentum", type=float)
    ap.add_argument("--weight-decay", type=float)
    ap.add_argument("--nesterov", action="store_true", help="--train sgd: Nesterov momentum")
    ap.add_argument("--betas")
    ap.add_argument("--eps", type=float)
    ap.add_argument("--warmup-steps", type=int, help="--train: shardc's learning-rate schedule (LambdaLR)")
    ap.add_argument("--decay-steps", type=int)
    ap.add_argument("--min-lr", type=float)
    ap.add_argument("--no-weight-decay", action="append", metavar="REGEX",
                    help="--train: parameters matching REGEX in a group without weight decay")
    ap.add_argument("--clip-grad-norm", type=float,
                    help="--train: torch.nn.utils.clip_grad_norm_ before each step")
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--accumulate", type=int, metavar="K",
                    help="--train: the inputs are K micro-batches of MODEL's rows; each runs "
                         "forward and backward of its loss / K before the step")
    args = ap.parse_args(argv)

    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        if args.compare:
            return compare(args.compare[0], args.compare[1], args.rtol, args.metric)
        if args.make_inputs or args.make_params:
            if not args.out:
                ap.error("--make-inputs / --make-params need --out FILE")
            if args.make_inputs:
                t = make_inputs(load_graph(args.make_inputs), args.seed)
            else:
                t = make_params(load_graph(args.make_params), args.seed)
            write_safetensors(args.out, t, {"seed": args.seed})
            return 0
        if not (args.model and args.params and args.inputs):
            ap.error("forward mode needs MODEL.json --params FILE --inputs FILE")
        graph = load_graph(args.model)
        params = read_safetensors(args.params)
        inputs = read_safetensors(args.inputs)
        cdt = {"float32": torch.float32, "float64": torch.float64}.get(args.compute_dtype)
        env = build_env(graph, params, inputs, args, cdt)
        interp = Interpreter(graph)
        if args.train:
            if not (args.grad and args.lr):
                ap.error("--train needs --grad LOSS and --lr")
            trained, last = train(graph, interp, env, args)
            for path, tensors in ((args.outputs, trained), (args.step_outputs, last)):
                if path:
                    write_safetensors(path, {k: v.contiguous() for k, v in tensors.items()})
            return 0
        if args.grad:
            out = gradients(graph, interp, env, args.grad)
            if args.outputs:
                write_safetensors(args.outputs, {k: v.contiguous() for k, v in out.items()})
            return 0
        with torch.inference_mode():
            out = interp.run(env)
            if args.time:
                for _ in range(max(0, args.warmup - 1)):
                    interp.run(env)
                times = []
                for _ in range(args.time):
                    t0 = time.perf_counter()
                    interp.run(env)
                    times.append(time.perf_counter() - t0)
                med = statistics.median(times)
                print("torch forward %s: median %.6f s over %d run(s) (min %.6f, max %.6f), "
                      "%d thread(s)" % (graph.get("name", args.model), med, len(times),
                                        min(times), max(times), torch.get_num_threads()))
                if args.time_json:
                    with open(args.time_json, "w") as f:
                        json.dump({"forward_seconds": med, "runs": times,
                                   "warmup": max(1, args.warmup),
                                   "threads": torch.get_num_threads(),
                                   "torch": torch.__version__}, f)
                        f.write("\n")
        if args.outputs:
            write_safetensors(args.outputs, {k: v.contiguous() for k, v in out.items()})
        return 0
    except (ValueError, KeyError, OSError) as e:
        print("torch_reference: error: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
