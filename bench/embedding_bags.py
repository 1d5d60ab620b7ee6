"""A DLRM-shaped model's training pass, shardc against torch (bench/README.md,
"Embedding bags: DLRM").

The model: a dense MLP (13 -> 512 -> 256 -> D) and --tables nn.EmbeddingBag
tables ([--rows, D], mode sum, ragged bags: a 1-d id list and its offsets
per table, as DLRM's sparse features), their pairwise dot products and a
top MLP (-> 256 -> 1), under a cos-weighted mean. Bag sizes are drawn
uniformly from 0 to 2 * --bag (empty bags included), ids uniformly.

Per run: export (tools/export_torch.py), then at one thread and N = 1
shardc's forward and forward + backward (`shardc run --grad output
--repeat 5`, median of the warm runs) against torch eager's forward +
backward (median of 3 after a warm-up) on the same weights and inputs;
every gradient compared with torch.autograd's (max-norm relative error);
shardc's ledger peaks; and N = 2 against N = 1 byte for byte.

    /opt/shardc-venv/bin/python bench/embedding_bags.py [--tables 8] [--rows 100000]
        [--dim 64] [--batch 2048] [--bag 20]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TOOLS = os.path.join(ROOT, "tools")
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")


class DLRMBase(nn.Module):
    def __init__(self, tables, rows, dim, dense):
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(dense, 512), nn.ReLU(), nn.Linear(512, 256),
                                    nn.ReLU(), nn.Linear(256, dim), nn.ReLU())
        self.tables = nn.ModuleList([nn.EmbeddingBag(rows, dim, mode="sum")
                                     for _ in range(tables)])
        pairs = (tables + 1) * tables // 2
        self.top = nn.Sequential(nn.Linear(dim + pairs, 256), nn.ReLU(), nn.Linear(256, 1))

    def loss(self, dense, sparse):
        feats = [self.bottom(dense)] + [table(ids, offsets)
                                        for table, (ids, offsets) in zip(self.tables, sparse)]
        f = torch.stack(feats, dim=1)                        # [B, tables + 1, D]
        dots = torch.bmm(f, f.transpose(1, 2))
        i, j = torch.tril_indices(len(feats), len(feats), -1, device=f.device).unbind(0)
        inter = dots[:, i, j]                               # DLRM's pairs below the diagonal
        out = self.top(torch.cat([feats[0], inter], dim=1))
        w = torch.cos(torch.arange(out.numel(), dtype=out.dtype, device=out.device))
        w = w.reshape(out.shape)
        return (out * w).mean()


def DLRM(tables=8, rows=100000, dim=64, dense=13):
    """The model, its forward taking dense, ids0, offsets0, ids1, ... by
    name (the exporter reads forward's arguments)."""
    pairs = ", ".join("ids%d, offsets%d" % (t, t) for t in range(tables))
    code = "def forward(self, dense, %s):\n    return self.loss(dense, [%s])\n" % (
        pairs, ", ".join("(ids%d, offsets%d)" % (t, t) for t in range(tables)))
    scope = {}
    exec(code, scope)
    cls = type("DLRM", (DLRMBase,), {"forward": scope["forward"]})
    return cls(tables, rows, dim, dense)


def make_inputs(args):
    """Dense features and, per table, ids and offsets (bags of 0 to 2 * bag ids)."""
    gen = torch.Generator().manual_seed(7)
    inputs = {"dense": torch.rand(args.batch, 13, generator=gen) * 2 - 1}
    for t in range(args.tables):
        sizes = torch.randint(0, 2 * args.bag + 1, (args.batch,), generator=gen)
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)[:-1]])
        inputs["ids%d" % t] = torch.randint(0, args.rows, (int(sizes.sum()),), generator=gen)
        inputs["offsets%d" % t] = offsets
    return inputs


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    if p.returncode:
        sys.exit("%s failed: %s" % (os.path.basename(cmd[1] if cmd[0] == sys.executable
                                                     else cmd[0]),
                                    (p.stderr.strip().splitlines() or [""])[-1]))
    return p.stdout


def shardc_timed(shardc, g, w, inp, extra):
    """(median warm seconds, forward peak bytes) of N = 1, one thread."""
    out = run([shardc, "run", g, "--load", w, "--inputs", inp, "--threads", "1",
               "--repeat", "5"] + extra)
    median = float(re.search(r"outputs identical: median ([0-9.]+) s", out).group(1))
    peak = int(re.search(r"forward peak on ranks? [0-9.]+: ([0-9,]+) bytes", out)
               .group(1).replace(",", ""))
    return median, peak


def torch_timed(kwargs, weights, inputs):
    """torch eager forward + backward at one thread: median of 3 after a warm-up."""
    sys.path.insert(0, TOOLS)
    import torch_reference as tr
    torch.set_num_threads(1)
    model = DLRM(**kwargs)
    model.load_state_dict(tr.read_safetensors(weights))
    data = tr.read_safetensors(inputs)
    times = []
    for _ in range(4):
        model.zero_grad(set_to_none=True)
        start = time.perf_counter()
        model(**data).backward()
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=8)
    ap.add_argument("--rows", type=int, default=100000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--bag", type=int, default=20, help="mean ids per bag")
    ap.add_argument("--shardc", default=os.path.join(ROOT, "build", "bin", "shardc"))
    args = ap.parse_args()
    from safetensors.torch import save_file

    kwargs = {"tables": args.tables, "rows": args.rows, "dim": args.dim}
    inputs = make_inputs(args)
    ids = sum(inputs["ids%d" % t].numel() for t in range(args.tables))
    print("DLRM: %d tables of [%d, %d] (mode sum), batch %d, %d ids in all (bags of 0-%d), "
          "torch %s, one thread" % (args.tables, args.rows, args.dim, args.batch, ids,
                                    2 * args.bag, torch.__version__))
    with tempfile.TemporaryDirectory() as tmp:
        g, w, inp = (os.path.join(tmp, f) for f in ("g.json", "w.st", "in.st"))
        save_file(inputs, inp)
        shapes = {k: {"shape": list(v.shape), "dtype": "int64"} if v.dtype == torch.int64
                  else list(v.shape) for k, v in inputs.items()}
        start = time.perf_counter()
        run([sys.executable, os.path.join(TOOLS, "export_torch.py"), "embedding_bags:DLRM",
             "--python-path", HERE, "--kwargs", json.dumps(kwargs), "--seed", "1",
             "--input-shapes", json.dumps(shapes), "-o", g, "--weights", w])
        print("export: %.1f s" % (time.perf_counter() - start))
        fwd, fwd_peak = shardc_timed(args.shardc, g, w, inp, [])
        both, both_peak = shardc_timed(args.shardc, g, w, inp, ["--grad", "output"])
        torch_s = torch_timed(kwargs, w, inp)
        outs = [os.path.join(tmp, "o%d.st" % n) for n in (1, 2)]
        for n, out in zip((1, 2), outs):
            run([args.shardc, "run", g, "--grad", "output", "--load", w, "--inputs", inp,
                 "--world-size", str(n), "--outputs", out])
        same = open(outs[0], "rb").read() == open(outs[1], "rb").read()
        ref = os.path.join(tmp, "ref.st")
        run([sys.executable, os.path.join(TOOLS, "export_torch.py"), "embedding_bags:DLRM",
             "--python-path", HERE, "--kwargs", json.dumps(kwargs), "--seed", "1",
             "--eager", g, "--params", w, "--inputs", inp, "--outputs", ref, "--grad", "output"])
        p = subprocess.run([sys.executable, os.path.join(TOOLS, "torch_reference.py"),
                            "--compare", outs[0], ref, "--rtol", "1e-5"],
                           capture_output=True, text=True, env=ENV)
        worst = max((float(line.split()[3]), line.split()[0])
                    for line in p.stdout.splitlines()[1:-1] if len(line.split()) == 6)
    print("| shardc fwd s | shardc fwd+bwd s | torch fwd+bwd s | shardc / torch | "
          "peak fwd B | peak fwd+bwd B | gradients vs torch | N = 2 vs 1 |")
    print("|---|---|---|---|---|---|---|---|")
    print("| %.3f | %.3f | %.3f | %.2f | %s | %s | %s (worst %s %.1e) | %s |" % (
        fwd, both, torch_s, both / torch_s, format(fwd_peak, ","), format(both_peak, ","),
        "ok" if p.returncode == 0 else "differ", worst[1], worst[0],
        "identical" if same else "DIFFER"))


if __name__ == "__main__":
    main()
