#!/usr/bin/env python3
"""torch's side of the device check's benchmarks (docs/gpu.md), on the GPU
machine's own torch: the same byte counts and shapes as shardc-gpu-tests'
`perf` section, so its rows can be read side by side.

    python3 torch_bench.py [--mib N] [--json FILE] [--gpt2 FILE] [--scale-shapes FILE]

Rows: zero_ (cudaMemset) and fill_/uniform_/normal_/trunc_normal_ per dtype
in GB/s; one GPT-2-small MLP block (layer_norm, 768 -> 3072 linear, gelu,
3072 -> 768 linear, 4096 tokens, TF32 off) in ms. With --scale-shapes FILE
(scale-shapes.json: Llama 3 70B rank 0 of 64): torch's init of the same
shards on the GPU, beside shardc's `scale` section. With --gpt2 FILE (the
safetensors file shardc-gpu-tests --section gpt2 --export wrote: GPT-2
124M's weights after shardc's init on the GPU, the input ids, shardc's
logits and its median forward time): nanoGPT's GPT in torch eager on the
same GPU with those weights, its logits against shardc's (a failed row
beyond 2e-4 relative to the logits' scale) and its median forward time
beside shardc's (the goal is shardc <= 1.2x torch; reported, not asserted:
speed goals live in benchmarks, never in pass/fail).
"""
import argparse
import json
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--json")
    parser.add_argument("--gpt2", help="gpt2-shardc.safetensors from shardc-gpu-tests --export")
    parser.add_argument("--gpt2-cpu-selftest", help="the --gpt2 comparison on the CPU only")
    parser.add_argument("--gpt2-heads", type=int, default=12, help="attention heads (GPT-2 124M: 12)")
    parser.add_argument("--scale-shapes", help="scale-shapes.json: one rank's shard shapes and init ops")
    args = parser.parse_args()
    rows = []

    def report(item, ok, detail):
        print("| %-10s | %-44s | %-4s | %s" % ("torch", item, "ok" if ok else "FAIL", detail), flush=True)
        rows.append({"section": "torch", "item": item, "ok": ok, "detail": detail})

    if args.gpt2_cpu_selftest:
        gpt2(args.gpt2_cpu_selftest, report, None, args.gpt2_heads, device="cpu")
        return finish(rows, args)
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
    if args.scale_shapes:
        try:
            scale(args.scale_shapes, report)
        except Exception as e:
            report("one 70B rank's shards", False, "exception: %r" % (e,))
    if args.gpt2:
        try:
            gpt2(args.gpt2, report, timed, args.gpt2_heads)
        except Exception as e:
            report("gpt2 124M eager", False, "exception: %r" % (e,))
    return finish(rows, args)


def scale(path, report):
    """torch's own init of one rank's shards (scale-shapes.json: Llama 3 70B
    at N = 64, rank 0): every shard allocated on the GPU and initialized by
    its init op (normal_, fill_, uniform_, zero_), the way a sharded
    reset_parameters would, timed wall to wall with the allocations (as
    shardc's init is); cold (the caching allocator empty) and warm."""
    import time
    import torch
    spec = json.load(open(path))
    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
              "float64": torch.float64}

    def init_all():
        out = []
        for shard in spec["shards"]:
            t = torch.empty(shard["shape"], dtype=dtypes[shard["dtype"]], device="cuda")
            op = shard["init"]
            kind = op["op"]
            if kind == "normal":
                t.normal_(op.get("mean", 0.0), op.get("std", 1.0))
            elif kind == "ones":
                t.fill_(1.0)
            elif kind == "zeros":
                t.zero_()
            elif kind == "uniform":
                t.uniform_(op.get("low", 0.0), op.get("high", 1.0))
            else:
                raise ValueError("init op %r is not in torch_bench's list" % kind)
            out.append(t)
        return out

    seconds = []
    for _ in range(2):
        torch.cuda.synchronize()
        start = time.perf_counter()
        shards = init_all()
        torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
        nbytes = sum(t.numel() * t.element_size() for t in shards)
        del shards
    report("%s N=%d rank %d shards" % (spec["model"], spec["world_size"], spec["rank"]), True,
           "%.2f GB in %.3f s cold, %.3f s warm (%d tensors; shardc's row: section scale)"
           % (nbytes / 1e9, seconds[0], seconds[1], len(spec["shards"])))


def read_safetensors(path):
    """{name: tensor on the CPU}, metadata: the format, without the package."""
    import torch
    dtypes = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16,
              "BF16": torch.bfloat16, "I64": torch.int64}
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = bytearray(f.read())
    meta = header.pop("__metadata__", {})
    out = {}
    for name, t in header.items():
        a, b = t["data_offsets"]
        dtype = dtypes[t["dtype"]]
        count = (b - a) // torch.empty(0, dtype=dtype).element_size()
        out[name] = torch.frombuffer(data, dtype=dtype, count=count, offset=a).reshape(t["shape"]).clone()
    return out, meta


def gpt2(path, report, timed, n_head, device="cuda"):
    """nanoGPT's GPT (karpathy/nanoGPT model.py, GPT-2 124M config), eager."""
    import math
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    tensors, meta = read_safetensors(path)
    idx = tensors.pop(meta.get("input", "idx")).to(device)
    shardc_logits = tensors.pop("shardc.logits").to(device)
    n_layer = 1 + max(int(k.split(".")[2]) for k in tensors if k.startswith("transformer.h."))
    vocab, d = tensors["transformer.wte.weight"].shape

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(d)
            self.attn = nn.Module()
            self.attn.c_attn = nn.Linear(d, 3 * d)
            self.attn.c_proj = nn.Linear(d, d)
            self.ln_2 = nn.LayerNorm(d)
            self.mlp = nn.Module()
            self.mlp.c_fc = nn.Linear(d, 4 * d)
            self.mlp.c_proj = nn.Linear(4 * d, d)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.attn.c_attn(self.ln_1(x)).split(d, dim=2)
            q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.attn.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
            return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.Module()
            self.transformer.wte = nn.Embedding(vocab, d)
            self.transformer.wpe = nn.Embedding(tensors["transformer.wpe.weight"].shape[0], d)
            self.transformer.h = nn.ModuleList(Block() for _ in range(n_layer))
            self.transformer.ln_f = nn.LayerNorm(d)

        def forward(self, idx):
            T = idx.shape[1]
            x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(T, device=idx.device))
            for block in self.transformer.h:
                x = block(x)
            return F.linear(self.transformer.ln_f(x), self.transformer.wte.weight)  # tied lm_head

    model = GPT()
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    if missing or unexpected:
        report("gpt2 124M weights", False, "missing %s, unexpected %s" % (missing[:5], unexpected[:5]))
        return
    model = model.to(device).eval()
    with torch.no_grad():
        logits = model(idx)
        scale = logits.abs().max().item()
        diff = (logits - shardc_logits.view_as(logits)).abs().max().item()
        ok = diff <= 2e-4 * max(scale, 1e-6)
        report("gpt2 124M logits: shardc vs torch", ok,
               "max |diff| %.3g, max |logit| %.3g (bound 2e-4 relative)" % (diff, scale))
        if device != "cuda":
            return  # the self-test: logits only
        ms = sorted(timed(lambda: model(idx), 1) for _ in range(5))[2]
    shardc_ms = float(meta.get("shardc_forward_ms", "nan"))
    report("gpt2 124M forward, torch %s eager" % torch.__version__, True,
           "median %.2f ms, %d tokens; shardc %.2f ms = %.2fx torch (goal <= 1.2x)"
           % (ms, idx.numel(), shardc_ms, shardc_ms / ms))


def finish(rows, args):
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
