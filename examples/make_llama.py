#!/usr/bin/env python3
"""Writes a Llama-shaped graph at a published size (Llama 2 / Llama 3).

    python3 examples/make_llama.py --preset llama3-70b -o llama3-70b.json
    python3 examples/make_llama.py --preset llama3.1-405b --dtype bfloat16 -o x.json
    python3 examples/make_llama.py --layers 2 --hidden 64 --heads 8 --kv-heads 2 \\
        --ffn 128 --vocab 97 -o small.json
    python3 examples/make_llama.py --preset llama3-70b --dtype bfloat16 \\
        --seq 4096 --loss -o llama3-70b-loss.json   # for shardc run --grad loss

Presets are the Hugging Face config.json of each model (num_hidden_layers,
hidden_size, num_attention_heads, num_key_value_heads, intermediate_size,
vocab_size, rms_norm_eps, rope_theta); untied lm_head. Parameter counts
match the published ones (Llama-2-7b-hf 6,738,415,616; Meta-Llama-3-8B
8,030,261,248; Meta-Llama-3-70B 70,553,706,496; Llama-3.1-405B
405,853,388,800). Llama 3.1's rope_scaling changes the forward's rotary
frequencies only, not the parameters or their init; the graph's
rotary_embedding has no scaling, so the 405B forward is Llama 3's.
The model itself is examples/make_models.py's `llama` builder (HF names,
RMSNorm, RoPE, SwiGLU, grouped-query attention, normal(0, 0.02) init).
--loss adds an input `targets` [B, T] and makes the graph's one output
`loss`, the next-token cross entropy of the logits cast to float32 (as
Hugging Face's LlamaForCausalLM computes its loss: logits.float()).
--padding-mask adds an input `padding_mask` [B, 1, 1, T] of the parameter
dtype (0 for a real token, -inf for padding), added by every attention to
its scores on top of the causal mask: a padded batch.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_models  # noqa: E402  (the Llama builder)

PRESETS = {
    "llama2-7b": dict(layers=32, hidden=4096, heads=32, kv_heads=32,
                      ffn=11008, vocab=32000, eps=1e-5, theta=10000.0),
    "llama3-8b": dict(layers=32, hidden=4096, heads=32, kv_heads=8,
                      ffn=14336, vocab=128256, eps=1e-5, theta=500000.0),
    "llama3-70b": dict(layers=80, hidden=8192, heads=64, kv_heads=8,
                       ffn=28672, vocab=128256, eps=1e-5, theta=500000.0),
    "llama3.1-405b": dict(layers=126, hidden=16384, heads=128, kv_heads=8,
                          ffn=53248, vocab=128256, eps=1e-5,
                          theta=500000.0),
}
SHAPE_KEYS = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab")


def build(config, dtype="float32", batch=1, seq=16, name="llama"):
    """The graph (docs/graph-format.md) of one config dict (PRESETS' keys;
    kv_heads defaults to heads, eps to 1e-5, theta to 10000)."""
    return make_models.llama(
        name, n_layer=config["layers"], n_head=config["heads"],
        d=config["hidden"], ffn=config["ffn"], vocab=config["vocab"], B=batch,
        T=seq, n_kv_head=config.get("kv_heads") or config["heads"],
        eps=config.get("eps", 1e-5), theta=config.get("theta", 10000.0),
        dtype=dtype).to_json()


def with_loss(graph, batch, seq, vocab):
    """`graph`'s logits [B, T, V] under a next-token loss: targets [B, T],
    cross_entropy of the logits cast to float32, the one output "loss"."""
    tokens = batch * seq
    graph["inputs"].append({"name": "targets", "shape": [batch, seq], "dtype": "int64",
                            "high": vocab})
    graph["nodes"] += [
        {"name": "logits.float", "op": "cast", "inputs": ["logits"], "dtype": "float32"},
        {"name": "logits.flat", "op": "reshape", "inputs": ["logits.float"],
         "shape": [tokens, vocab]},
        {"name": "targets.flat", "op": "reshape", "inputs": ["targets"], "shape": [tokens]},
        {"name": "loss", "op": "cross_entropy", "inputs": ["logits.flat", "targets.flat"]},
    ]
    graph["outputs"] = ["loss"]


def with_padding_mask(graph, batch, seq, dtype):
    """Every attention of `graph` also reads `padding_mask` [B, 1, 1, T]:
    sdpa's additive mask over the keys (a padded batch)."""
    graph["inputs"].append({"name": "padding_mask", "shape": [batch, 1, 1, seq],
                            "dtype": dtype})
    for node in graph["nodes"]:
        if node["op"] == "scaled_dot_product_attention":
            node["inputs"].append("padding_mask")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS))
    for key in SHAPE_KEYS:
        ap.add_argument("--" + key.replace("_", "-"), type=int)
    ap.add_argument("--dtype", choices=("float32", "bfloat16"),
                    default="float32", help="parameter dtype")
    ap.add_argument("--seq", type=int, default=16,
                    help="forward input length T (default 16: init is the "
                    "point; the forward's activations grow with it)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--loss", action="store_true",
                    help="output the mean next-token loss over targets [B, T] "
                    "instead of the logits")
    ap.add_argument("--padding-mask", action="store_true",
                    help="add an input padding_mask [B, 1, 1, T] that every "
                    "attention adds to its scores (a padded batch)")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args(argv)
    config = dict(PRESETS[args.preset]) if args.preset else {}
    for key in SHAPE_KEYS:
        if getattr(args, key) is not None:
            config[key] = getattr(args, key)
    missing = [k for k in SHAPE_KEYS if k not in config and k != "kv_heads"]
    if missing:
        ap.error("give --preset or all of --layers, --hidden, --heads, --ffn, "
                 "--vocab (missing: %s)" % ", ".join(missing))
    heads, kv = config["heads"], config.get("kv_heads") or config["heads"]
    if config["hidden"] % heads or (config["hidden"] // heads) % 2:
        ap.error("--hidden must be a multiple of --heads with an even head "
                 "dimension (rotary embedding)")
    if heads % kv:
        ap.error("--heads must be a multiple of --kv-heads (query groups)")
    name = args.preset or "llama"
    graph = build(config, args.dtype, args.batch, args.seq, name)
    if args.loss:
        with_loss(graph, args.batch, args.seq, config["vocab"])
    if args.padding_mask:
        with_padding_mask(graph, args.batch, args.seq, args.dtype)
    make_models.write_graph(graph, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
