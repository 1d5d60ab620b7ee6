#!/usr/bin/python3
"""Constructs a GPT-3-shaped nanoGPT model on PyTorch's meta device and
prints the wall time and peak RSS, for bench/compile_bench.sh.

    /usr/bin/python3 bench/torch_meta_gpt.py --layers 96 --hidden 12288 --heads 96

PyTorch 1.13 has no `with torch.device("meta")`, so every module gets
device="meta" explicitly (what a user constructing a model for deferred
init does). The nanoGPT init (normal 0.02, zero biases) runs too: on meta
tensors it records nothing and allocates nothing.
"""

import argparse
import resource
import time

import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d, device):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d, device=device)
        self.c_attn = nn.Linear(d, 3 * d, device=device)
        self.c_proj = nn.Linear(d, d, device=device)
        self.ln_2 = nn.LayerNorm(d, device=device)
        self.c_fc = nn.Linear(d, 4 * d, device=device)
        self.mlp_proj = nn.Linear(4 * d, d, device=device)


class GPT(nn.Module):
    def __init__(self, layers, d, vocab, seq, device):
        super().__init__()
        self.wte = nn.Embedding(vocab, d, device=device)
        self.wpe = nn.Embedding(seq, d, device=device)
        self.h = nn.ModuleList(Block(d, device) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d, device=device)
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, 0.0, 0.02)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--hidden", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--seq", type=int, default=2048)
    args = ap.parse_args()
    start = time.perf_counter()
    model = GPT(args.layers, args.hidden, args.vocab, args.seq, "meta")
    seconds = time.perf_counter() - start
    params = sum(p.numel() for p in model.parameters())
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("torch_meta seconds=%.3f peak_rss_mib=%.1f params=%d" % (seconds, rss_mib, params))


if __name__ == "__main__":
    main()
