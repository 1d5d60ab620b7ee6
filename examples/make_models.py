#!/usr/bin/env python3
"""Write the transformer example graphs (docs/graph-format.md, version 1).

    python3 examples/make_models.py            # regenerate all four files
    python3 examples/make_models.py --check    # exit 1 if a file is stale
    python3 examples/make_models.py --only gpt2-tiny --stdout
    python3 examples/make_models.py --only gpt2 --batch 4 --seq 128 --out-dir /tmp

Standard library only. The output is deterministic (keys in a fixed order,
floats formatted by json (repr)), so the JSON files are committed and this
script regenerates them byte for byte.

Models
------
gpt2, gpt2-tiny
    nanoGPT's GPT (karpathy/nanoGPT model.py) with GPT-2 defaults: parameter
    names as in its state_dict, LayerNorm and Linear biases, GELU (exact,
    approximate "none", as nanoGPT's nn.GELU()), causal attention, lm_head
    tied to transformer.wte.weight (the final `linear` uses the wte weight;
    there is no separate lm_head parameter, so it is sharded and gathered
    once). Positions: `slice` of transformer.wpe.weight rows [0, T), which is
    exactly wpe(arange(T)) without an extra input. Init as nanoGPT's
    _init_weights: normal(0, 0.02) for Linear and Embedding weights, zero
    biases, LayerNorm weight 1 / bias 0, and every `c_proj.weight`
    (attn and mlp) normal(0, 0.02 / sqrt(2 * n_layer)).

    The scaled projections are written as ONE generator with the scaled std,
    not as [normal(0.02), div(sqrt(2 n_layer))]: nanoGPT calls
    torch.nn.init.normal_(p, std=0.02/math.sqrt(2*n_layer)) once, overwriting
    the earlier normal_(std=0.02) from _init_weights, so the effective init
    program of those parameters is a single normal draw; a tracing exporter
    of nanoGPT would record the same.

llama, llama-tiny
    Hugging Face LlamaForCausalLM names (model.embed_tokens.weight,
    model.layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj,
    post_attention_layernorm, mlp.{gate,up,down}_proj}.weight, model.norm.weight,
    lm_head.weight, untied), no biases, RMSNorm (eps 1e-6, weight ones),
    rotary embedding (theta 10000, rotate-half) on q and k in [B, H, T, hd],
    causal attention, SwiGLU MLP down(silu(gate(x)) * up(x)). Init as HF's
    _init_weights with initializer_range 0.02: normal(0, 0.02) for every
    Linear and the embedding. The builder also takes n_kv_head (grouped-
    query attention: k_proj/v_proj [n_kv_head * head_dim, d], read in
    place by the attention op per query group, as HF's repeat_kv copies
    would be read), eps, theta and the
    parameter dtype; examples/make_llama.py uses them for Llama 2/3 sizes.

Every model takes one input, `idx` (int64 [B, T], "high": vocabulary size)
and returns `logits` [B, T, V]. Units are left to the default rule
(each transformer.h.N / model.layers.N block is a unit, the rest is root).
"""

import argparse
import json
import math
import os
import sys

DEVICE = "cuda:0"  # where the user meant the model to live (kept in the IR)
DTYPE = "float32"

CONFIGS = {
    "gpt2": dict(kind="gpt2", n_layer=12, n_head=12, d=768, vocab=50257,
                 block=1024, B=1, T=16),
    "gpt2-tiny": dict(kind="gpt2", n_layer=2, n_head=2, d=32, vocab=101,
                      block=16, B=2, T=8),
    "llama": dict(kind="llama", n_layer=8, n_head=12, d=768, ffn=2048,
                  vocab=32001, B=1, T=16),
    "llama-tiny": dict(kind="llama", n_layer=2, n_head=4, d=32, ffn=64,
                       vocab=97, B=2, T=8),
}


class Graph:
    def __init__(self, name, dtype=DTYPE):
        self.name = name
        self.dtype = dtype  # every parameter's
        self.parameters = []
        self.inputs = []
        self.nodes = []
        self.outputs = []

    def param(self, name, shape, init):
        self.parameters.append({"name": name, "shape": list(shape),
                                "dtype": self.dtype, "device": DEVICE,
                                "init": init})
        return name

    def input(self, name, shape, dtype, high=None):
        entry = {"name": name, "shape": list(shape), "dtype": dtype}
        if high is not None:
            entry["high"] = high
        self.inputs.append(entry)
        return name

    def node(self, name, op, inputs, **attrs):
        entry = {"name": name, "op": op, "inputs": list(inputs)}  # then attrs
        entry.update(attrs)
        self.nodes.append(entry)
        return name

    def split(self, names, x, dim, sizes):
        self.nodes.append({"names": list(names), "op": "split",
                           "inputs": [x], "dim": dim, "sizes": list(sizes)})
        return list(names)

    def to_json(self):
        return {"format": "shardc-graph", "version": 1, "name": self.name,
                "parameters": self.parameters, "buffers": [],
                "inputs": self.inputs, "nodes": self.nodes,
                "outputs": self.outputs}


def normal(std):
    return [{"op": "normal", "mean": 0.0, "std": std}]


ZEROS = [{"op": "zeros"}]
ONES = [{"op": "ones"}]


def attention_heads(g, p, x, B, T, H, hd):
    """x [B, T, H*hd] -> [B, H, T, hd] (view + transpose(1, 2))."""
    r = g.node(p + ".r", "reshape", [x], shape=[B, T, H, hd])
    return g.node(p + ".t", "transpose", [r], dim0=1, dim1=2)


def merge_heads(g, p, y, B, T, d):
    """y [B, H, T, hd] -> [B, T, d] (transpose(1, 2) + view)."""
    t = g.node(p + ".t", "transpose", [y], dim0=1, dim1=2)
    return g.node(p, "reshape", [t], shape=[B, T, d])


def gpt2(name, n_layer, n_head, d, vocab, block, B, T, **_):
    assert d % n_head == 0 and T <= block
    hd = d // n_head
    g = Graph(name)
    proj_std = 0.02 / math.sqrt(2 * n_layer)
    wte = g.param("transformer.wte.weight", [vocab, d], normal(0.02))
    wpe = g.param("transformer.wpe.weight", [block, d], normal(0.02))
    blocks = []
    for i in range(n_layer):
        p = "transformer.h.%d" % i
        w = {}
        for ln in ("ln_1", "ln_2"):
            w[ln + ".weight"] = g.param(p + "." + ln + ".weight", [d], ONES)
            w[ln + ".bias"] = g.param(p + "." + ln + ".bias", [d], ZEROS)
        for lin, out, inp, std in (("attn.c_attn", 3 * d, d, 0.02),
                                   ("attn.c_proj", d, d, proj_std),
                                   ("mlp.c_fc", 4 * d, d, 0.02),
                                   ("mlp.c_proj", d, 4 * d, proj_std)):
            w[lin + ".weight"] = g.param(p + "." + lin + ".weight",
                                         [out, inp], normal(std))
            w[lin + ".bias"] = g.param(p + "." + lin + ".bias", [out], ZEROS)
        blocks.append((p, w))
    lnf_w = g.param("transformer.ln_f.weight", [d], ONES)
    lnf_b = g.param("transformer.ln_f.bias", [d], ZEROS)

    idx = g.input("idx", [B, T], "int64", high=vocab)
    tok = g.node("tok_emb", "embedding", [wte, idx])
    pos = g.node("pos_emb", "slice", [wpe], dim=0, start=0, end=T)
    x = g.node("x.0", "add", [tok, pos])
    for i, (p, w) in enumerate(blocks):
        h1 = g.node(p + ".ln_1", "layer_norm",
                    [x, w["ln_1.weight"], w["ln_1.bias"]], eps=1e-5)
        qkv = g.node(p + ".attn.c_attn", "linear",
                     [h1, w["attn.c_attn.weight"], w["attn.c_attn.bias"]])
        q, k, v = g.split([p + ".attn.q", p + ".attn.k", p + ".attn.v"],
                          qkv, dim=-1, sizes=[d, d, d])
        qh = attention_heads(g, q, q, B, T, n_head, hd)
        kh = attention_heads(g, k, k, B, T, n_head, hd)
        vh = attention_heads(g, v, v, B, T, n_head, hd)
        y = g.node(p + ".attn.sdpa", "scaled_dot_product_attention",
                   [qh, kh, vh], causal=True)
        y = merge_heads(g, p + ".attn.y", y, B, T, d)
        a = g.node(p + ".attn.c_proj", "linear",
                   [y, w["attn.c_proj.weight"], w["attn.c_proj.bias"]])
        x = g.node(p + ".x.attn", "add", [x, a])
        h2 = g.node(p + ".ln_2", "layer_norm",
                    [x, w["ln_2.weight"], w["ln_2.bias"]], eps=1e-5)
        f = g.node(p + ".mlp.c_fc", "linear",
                   [h2, w["mlp.c_fc.weight"], w["mlp.c_fc.bias"]])
        f = g.node(p + ".mlp.gelu", "gelu", [f], approximate="none")
        m = g.node(p + ".mlp.c_proj", "linear",
                   [f, w["mlp.c_proj.weight"], w["mlp.c_proj.bias"]])
        x = g.node(p + ".x", "add", [x, m])
    h = g.node("transformer.ln_f", "layer_norm", [x, lnf_w, lnf_b], eps=1e-5)
    g.node("logits", "linear", [h, wte])  # lm_head tied to wte, no bias
    g.outputs = ["logits"]
    return g


def llama(name, n_layer, n_head, d, ffn, vocab, B, T, n_kv_head=None,
          eps=1e-6, theta=10000.0, dtype=DTYPE, **_):
    """n_kv_head < n_head: grouped-query attention (k_proj and v_proj are
    [n_kv_head * head_dim, d]; query head h reads key / value head
    h // (n_head / n_kv_head), as HF's repeat_kv copies would give it)."""
    n_kv = n_kv_head or n_head
    assert d % n_head == 0 and (d // n_head) % 2 == 0 and n_head % n_kv == 0
    hd = d // n_head
    g = Graph(name, dtype)
    emb = g.param("model.embed_tokens.weight", [vocab, d], normal(0.02))
    layers = []
    for i in range(n_layer):
        p = "model.layers.%d" % i
        w = {}
        w["input_layernorm"] = g.param(p + ".input_layernorm.weight", [d], ONES)
        for proj, rows in (("q_proj", d), ("k_proj", n_kv * hd),
                           ("v_proj", n_kv * hd), ("o_proj", d)):
            w[proj] = g.param(p + ".self_attn." + proj + ".weight", [rows, d],
                              normal(0.02))
        w["post_attention_layernorm"] = g.param(
            p + ".post_attention_layernorm.weight", [d], ONES)
        for proj, shape in (("gate_proj", [ffn, d]), ("up_proj", [ffn, d]),
                            ("down_proj", [d, ffn])):
            w[proj] = g.param(p + ".mlp." + proj + ".weight", shape,
                              normal(0.02))
        layers.append((p, w))
    norm = g.param("model.norm.weight", [d], ONES)
    head = g.param("lm_head.weight", [vocab, d], normal(0.02))

    idx = g.input("idx", [B, T], "int64", high=vocab)
    x = g.node("model.embed_tokens", "embedding", [emb, idx])
    for p, w in layers:
        h = g.node(p + ".input_layernorm", "rms_norm",
                   [x, w["input_layernorm"]], eps=eps)
        sa = p + ".self_attn"
        heads = {}
        for proj, nh in (("q_proj", n_head), ("k_proj", n_kv),
                         ("v_proj", n_kv)):
            lin = g.node(sa + "." + proj, "linear", [h, w[proj]])
            heads[proj] = attention_heads(g, lin, lin, B, T, nh, hd)
        q = g.node(sa + ".q_rot", "rotary_embedding", [heads["q_proj"]],
                   theta=theta)
        k = g.node(sa + ".k_rot", "rotary_embedding", [heads["k_proj"]],
                   theta=theta)
        # grouped-query attention: the op reads the n_kv shared heads in
        # place (no repeat_kv copies)
        y = g.node(sa + ".sdpa", "scaled_dot_product_attention",
                   [q, k, heads["v_proj"]], causal=True)
        y = merge_heads(g, sa + ".y", y, B, T, d)
        o = g.node(sa + ".o_proj", "linear", [y, w["o_proj"]])
        x = g.node(p + ".x.attn", "add", [x, o])
        h2 = g.node(p + ".post_attention_layernorm", "rms_norm",
                    [x, w["post_attention_layernorm"]], eps=eps)
        mlp = p + ".mlp"
        gate = g.node(mlp + ".gate_proj", "linear", [h2, w["gate_proj"]])
        gate = g.node(mlp + ".act", "silu", [gate])
        up = g.node(mlp + ".up_proj", "linear", [h2, w["up_proj"]])
        gu = g.node(mlp + ".gate_up", "mul", [gate, up])
        down = g.node(mlp + ".down_proj", "linear", [gu, w["down_proj"]])
        x = g.node(p + ".x", "add", [x, down])
    h = g.node("model.norm", "rms_norm", [x, norm], eps=eps)
    g.node("logits", "linear", [h, head])
    g.outputs = ["logits"]
    return g


BUILDERS = {"gpt2": gpt2, "llama": llama}


def build(name, batch=None, seq=None):
    """The graph of CONFIGS[name]; batch / seq override the input shape
    [B, T] (the benchmarks' larger workloads; T must fit gpt2's block)."""
    cfg = dict(CONFIGS[name])
    if batch is not None:
        cfg["B"] = batch
    if seq is not None:
        if "block" in cfg and seq > cfg["block"]:
            sys.exit("make_models: --seq %d exceeds %s's block size %d"
                     % (seq, name, cfg["block"]))
        cfg["T"] = seq
    return BUILDERS[cfg["kind"]](name, **cfg).to_json()


def render(graph):
    """Stable text: keys in the builder's fixed order (name, op, inputs,
    attributes; the docs' order for parameters), one parameter / input /
    node per line."""
    def dump(v):
        return json.dumps(v, separators=(", ", ": "))

    out = ["{"]
    top = list(graph)
    for i, key in enumerate(top):
        comma = "," if i + 1 < len(top) else ""
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


def param_count(graph):
    n = 0
    for p in graph["parameters"]:
        c = 1
        for s in p["shape"]:
            c *= s
        n += c
    return n


def write_graph(graph, path, text=None):
    """Writes `graph` (rendered) to `path` through a temporary file, so a
    failed run never leaves a partial graph, and prints what it holds."""
    text = render(graph) if text is None else text
    tmp = path + ".tmp.%d" % os.getpid()
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    print("%s: %d parameters, %s elements, %d nodes" % (
        path, len(graph["parameters"]), format(param_count(graph), ","),
        len(graph["nodes"])))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=sorted(CONFIGS), action="append",
                    help="write only this model (repeatable)")
    ap.add_argument("--out-dir", default=os.path.dirname(os.path.abspath(__file__)),
                    help="directory for NAME.json (default: examples/)")
    ap.add_argument("--stdout", action="store_true",
                    help="print the graph(s) instead of writing files")
    ap.add_argument("--check", action="store_true",
                    help="compare with the files on disk; exit 1 if stale")
    ap.add_argument("--batch", type=int,
                    help="input batch size B (default: the model's own)")
    ap.add_argument("--seq", type=int,
                    help="input sequence length T (default: the model's own)")
    args = ap.parse_args(argv)
    if (args.batch or args.seq) and not (args.stdout or args.out_dir != ap.get_default("out_dir")):
        ap.error("--batch/--seq make variants: use them with --stdout or --out-dir "
                 "(the committed examples keep their own shapes)")
    stale = False
    for name in args.only or sorted(CONFIGS):
        graph = build(name, args.batch, args.seq)
        text = render(graph)
        assert json.loads(text) == graph
        path = os.path.join(args.out_dir, name + ".json")
        if args.stdout:
            sys.stdout.write(text)
            continue
        if args.check:
            try:
                with open(path) as f:
                    same = f.read() == text
            except OSError:
                same = False
            if not same:
                print("stale: %s (run python3 examples/make_models.py)" % path)
                stale = True
            continue
        write_graph(graph, path, text)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
