#!/usr/bin/env python3
"""torch's side of the device check's benchmarks (docs/gpu.md), on the GPU
machine's own torch: the same byte counts and shapes as shardc-gpu-tests'
`perf` section, so its rows can be read side by side.

    python3 torch_bench.py [--mib N] [--json FILE]

Rows: zero_ (cudaMemset) and fill_/uniform_/normal_/trunc_normal_ per dtype
in GB/s; one GPT-2-small MLP block (layer_norm, 768 -> 3072 linear, gelu,
3072 -> 768 linear, 4096 tokens, TF32 off) in ms. Figures are reported, not
asserted (speed goals live in benchmarks, never in pass/fail).
"""
import argparse
import json
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []

    def report(item, ok, detail):
        print("| %-10s | %-44s | %-4s | %s" % ("torch", item, "ok" if ok else "FAIL", detail), flush=True)
        rows.append({"section": "torch", "item": item, "ok": ok, "detail": detail})

    try:
        import torch
    except Exception as e:  # no torch: one failed row, not a crash
        report("import torch", False, repr(e))
        return finish(rows, args)
    if not torch.cuda.is_available():
        report("torch.cuda.is_available()", False, "no CUDA device visible to torch")
        return finish(rows, args)
    report("torch", True, "%s cuda %s on %s" % (torch.__version__, torch.version.cuda,
                                               torch.cuda.get_device_name(0)))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    def timed(fn, repeats=5):
        fn()
        torch.cuda.synchronize()
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(repeats):
            fn()
        b.record()
        torch.cuda.synchronize()
        return a.elapsed_time(b) / repeats

    nbytes = args.mib << 20
    buf = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    memset_ms = timed(lambda: buf.zero_())
    report("zero_ (cudaMemset) %d MiB" % args.mib, True, "%.1f GB/s" % (nbytes / memset_ms / 1e6))
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        t = buf.view(dtype)
        for name, fn in (("fill", lambda: t.fill_(0.1)),
                         ("uniform", lambda: t.uniform_(-0.25, 0.75)),
                         ("normal", lambda: t.normal_(0.5, 0.02)),
                         ("trunc_normal", lambda: torch.nn.init.trunc_normal_(t, 0.0, 1.0, -2.0, 2.0))):
            ms = timed(fn)
            report("%s %s" % (name, str(dtype).replace("torch.", "")), True,
                   "%.1f GB/s = %.0f%% of zero_" % (nbytes / ms / 1e6, 100 * memset_ms / ms))
    del buf
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.rand(4096, 768, dtype=dtype, device="cuda")
        ln = torch.nn.LayerNorm(768, bias=False).to("cuda", dtype)
        w1 = torch.nn.Linear(768, 3072, bias=False).to("cuda", dtype)
        w2 = torch.nn.Linear(3072, 768, bias=False).to("cuda", dtype)
        with torch.no_grad():
            ms = timed(lambda: w2(torch.nn.functional.gelu(w1(ln(x)))), 10)
        report("forward MLP block %s" % str(dtype).replace("torch.", ""), True,
               "%.3f ms per block (4096 tokens)" % ms)
    return finish(rows, args)


def finish(rows, args):
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
