#!/usr/bin/python3
"""Single-thread throughput of PyTorch's init ops (Debian python3-torch 1.13),
the comparison for shardc-init-bench. Prints "op GB/s" lines (best of repeats).

Usage: /usr/bin/python3 bench/torch_init.py [elements] [repeats]
"""
import sys
import time

import torch


def best_seconds(repeats, body):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        body()
        best = min(best, time.perf_counter() - start)
    return best


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 64 << 20
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    torch.set_num_threads(1)
    torch.manual_seed(42)
    t = torch.empty(n, dtype=torch.float32)
    t.zero_()  # fault the pages in once
    nbytes = n * 4
    print(f"# torch {torch.__version__}, elements {n} float32, best of {repeats}, threads {torch.get_num_threads()}")
    ops = {
        "fill": lambda: t.fill_(0.5),
        "uniform": lambda: t.uniform_(-1, 1),
        "normal": lambda: t.normal_(0, 1),
        "trunc_normal": lambda: torch.nn.init.trunc_normal_(t, mean=0.0, std=0.02, a=-0.04, b=0.04),
    }
    for name, body in ops.items():
        print(f"{name} {nbytes / best_seconds(repeats, body) / 1e9:.3f}", flush=True)


if __name__ == "__main__":
    main()
