#!/usr/bin/python3
"""Times PyTorch 1.13 (Debian's, /usr/bin/python3) initialising ONE decoder
layer of a Llama-shaped model on CPU, as Hugging Face's LlamaForCausalLM
would: every Linear weight torch.empty(...).normal_(0, 0.02) (its
_init_weights), the two RMSNorm weights ones. Each tensor is allocated,
initialised and freed in turn (a whole 405B layer is 12.8 GB in float32);
the time is the sum, best of REPEATS. A tensor above --max-elements
(default 2^26) is timed on a --max-elements tensor of the same dtype and
scaled by its element count (normal_ is linear in it; torch 1.13's
bfloat16 normal_ runs at tens of MB/s, so whole 405B layers would take
hours). Prints one JSON object: layer_seconds, layer_bytes, threads,
sampled (whether any tensor was scaled).

    /usr/bin/python3 bench/torch_llama_layer.py --preset llama3-70b \\
        --dtype float32 --threads 1 [--repeats 3]
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "examples"))
from make_llama import PRESETS  # noqa: E402


def layer_shapes(c):
    """(shape, init) of every parameter of one decoder layer."""
    d, hd = c["hidden"], c["hidden"] // c["heads"]
    kv = c["kv_heads"] * hd
    return [([d], "ones"), ([d, d], "normal"), ([kv, d], "normal"), ([kv, d], "normal"),
            ([d, d], "normal"), ([d], "ones"), ([c["ffn"], d], "normal"),
            ([c["ffn"], d], "normal"), ([d, c["ffn"]], "normal")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", choices=sorted(PRESETS), required=True)
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-elements", type=int, default=1 << 26)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    dtype = getattr(torch, args.dtype)
    shapes = layer_shapes(PRESETS[args.preset])
    best = float("inf")
    total_bytes, sampled = 0, False
    for _ in range(args.repeats):
        seconds, total_bytes = 0.0, 0
        for shape, init in shapes:
            numel = 1
            for n in shape:
                numel *= n
            timed = min(numel, args.max_elements)
            sampled = sampled or timed < numel
            start = time.perf_counter()
            t = torch.empty(timed, dtype=dtype)
            if init == "ones":
                t.fill_(1.0)
            else:
                t.normal_(0.0, 0.02)
            seconds += (time.perf_counter() - start) * numel / timed
            total_bytes += numel * t.element_size()
            del t
        best = min(best, seconds)
    print(json.dumps({"preset": args.preset, "dtype": args.dtype, "threads": args.threads,
                      "torch": torch.__version__, "layer_seconds": best,
                      "layer_bytes": total_bytes, "sampled": sampled}))


if __name__ == "__main__":
    main()
