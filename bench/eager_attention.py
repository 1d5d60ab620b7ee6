"""Hand-written attention fused by the exporter (bench/README.md, "Eager
attention fused").

GPT-2 with transformers' `attn_implementation="eager"` (matmul, scale,
causal mask, softmax, matmul, as research code and nanoGPT's slow path
write attention) at width 768, 12 heads, 2 layers, vocabulary 1024, one
sequence of T tokens, exported through ATen capture twice: as the exporter
writes it by default (the attention op, docs/exporter.md "Hand-written
attention") and with `--keep-attention-ops` (the ops as written, the
baseline). Each runs `shardc run --threads 1 --repeat 3` at N = 1; the
table prints both forward peaks (exact: predicted == measured is
required), the fused one as a ratio of the kept one, both warm forward
medians and their ratio, the outputs' largest difference, and torch eager's
warm forward of the same module (median of 3, one thread).

    /opt/shardc-venv/bin/python bench/eager_attention.py [--seq 512 1024 2048]
        [--build DIR] [--workdir DIR]
"""

import json
import os
import subprocess
import sys

from hf_llama_runs import ROOT, parse_args, run_shardc, torch_warm_seconds

CONFIG = {"n_embd": 768, "n_head": 12, "n_layer": 2, "vocab_size": 1024,
          "bos_token_id": 0, "eos_token_id": 0}


def gpt2_eager(**kw):
    """GPT-2 from a config, attention written by hand (eager), eval mode."""
    import transformers
    config = transformers.GPT2Config(**dict(CONFIG, use_cache=False, **kw))
    config._attn_implementation = "eager"
    return transformers.AutoModelForCausalLM.from_config(
        config, attn_implementation="eager").eval()


def export(seq, out, *extra):
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "export_torch.py"),
                    "eager_attention:gpt2_eager", "--python-path", os.path.join(ROOT, "bench"),
                    "--kwargs", json.dumps({"n_positions": seq}),
                    "--input-shapes", json.dumps({"input_ids": {"shape": [1, seq],
                                                                "dtype": "int64",
                                                                "high": 1024}}),
                    "-o", out, *extra], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def ops(graph):
    with open(graph) as f:
        return [n["op"] for n in json.load(f)["nodes"]]


def largest_difference(a, b):
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from torch_reference import read_safetensors
    x, y = read_safetensors(a), read_safetensors(b)
    return max(float((x[k] - y[k]).abs().max()) for k in x)


def torch_seconds(seq):
    import torch
    ids = torch.randint(0, 1024, (1, seq), generator=torch.Generator().manual_seed(0))
    return torch_warm_seconds(gpt2_eager(n_positions=seq), input_ids=ids)


def main():
    args, shardc, work = parse_args(__doc__, [512, 1024, 2048], "shardc-eager-attention-")
    print("| T | fused peak B | kept peak B | fused / kept peak | fused fwd s | kept fwd s | "
          "fused / kept s | max abs difference | torch eager fwd s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for seq in args.seq:
        fused, kept = (os.path.join(work, "gpt2-%d-%s.json" % (seq, kind))
                       for kind in ("fused", "kept"))
        export(seq, fused)
        export(seq, kept, "--keep-attention-ops")
        if ops(fused).count("scaled_dot_product_attention") != CONFIG["n_layer"] or \
                "scaled_dot_product_attention" in ops(kept):
            raise SystemExit("T = %d: the default export did not fuse every layer's attention"
                             % seq)
        outs = [os.path.join(work, "out-%d-%d.st" % (seq, i)) for i in (0, 1)]
        (fused_peak, fused_s), (kept_peak, kept_s) = (
            run_shardc(shardc, g, 1, repeat=3, outputs=o) for g, o in zip((fused, kept), outs))
        print("| %d | %d | %d | %.2f | %.3f | %.3f | %.2f | %.1e | %.3f |" % (
            seq, fused_peak, kept_peak, fused_peak / kept_peak, fused_s, kept_s,
            fused_s / kept_s, largest_difference(*outs), torch_seconds(seq)), flush=True)


if __name__ == "__main__":
    main()
