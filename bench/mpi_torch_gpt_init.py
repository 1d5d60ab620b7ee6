#!/usr/bin/python3
"""PyTorch (Debian python3-torch 1.13) builds a GPT on CPU in one process, the
way nanoGPT does (model.py: normal(0, 0.02) for Linear and Embedding weights,
zero biases, LayerNorm ones/zeros, c_proj weights std 0.02/sqrt(2 * layers),
lm_head tied to wte), and prints its peak RSS. The baseline of
bench/mpi_init_rss.sh.

Usage: /usr/bin/python3 bench/mpi_torch_gpt_init.py --layers L --hidden H
       --heads A --seq S [--vocab V]
Prints: "params N", "param_bytes B", "peak_rss_bytes R".
"""
import argparse
import math
import resource

import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.ln_1 = nn.LayerNorm(h)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(h, 3 * h)
        self.attn.c_proj = nn.Linear(h, h)
        self.ln_2 = nn.LayerNorm(h)
        self.mlp = nn.Module()
        self.mlp.c_fc = nn.Linear(h, 4 * h)
        self.mlp.c_proj = nn.Linear(4 * h, h)


class GPT(nn.Module):
    def __init__(self, layers, hidden, vocab, seq):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, hidden),
            wpe=nn.Embedding(seq, hidden),
            h=nn.ModuleList([Block(hidden) for _ in range(layers)]),
            ln_f=nn.LayerNorm(hidden)))
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied, as nanoGPT
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * layers))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--hidden", type=int, required=True)
    parser.add_argument("--heads", type=int, required=True)
    parser.add_argument("--seq", type=int, required=True)
    parser.add_argument("--vocab", type=int, default=50257)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = GPT(args.layers, args.hidden, args.vocab, args.seq)
    params = sum(p.numel() for p in model.parameters())
    print(f"torch {torch.__version__}")
    print(f"params {params}")
    print(f"param_bytes {params * 4}")
    print(f"peak_rss_bytes {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}")


if __name__ == "__main__":
    main()
