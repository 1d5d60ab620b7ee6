"""Data-parallel training against the replicated step (bench/README.md,
"Data-parallel training").

GPT-2 124M (bench/train_step.py's graph: nanoGPT under a next-token
cross-entropy loss), a global batch of B x T tokens, AdamW, N local ranks
with one kernel thread each:

* replicated (`--grad loss --optimizer adamw`): every rank runs the whole
  batch, so N ranks do N times the work and each holds the whole batch's
  activations;
* data-parallel (`... --data-parallel`): each rank runs its B / N rows, its
  loss its share of the batch mean, the gradient shares summed into the
  shards.

Printed per N: the per-rank step peak (ledger, predicted == measured), the
step's wall time (median of steps 2..K, rank 0; all ranks run at once on
this machine's cores, so at N above the core count the replicated step's
time grows with N and the data-parallel one's does not), and the last
step's loss of both (equal within float rounding).

    /opt/shardc-venv/bin/python bench/train_data_parallel.py [--batch 8]
        [--seq 32] [--ranks 1 2 4 8] [--steps 3]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from train_step import ENV, REFERENCE, ROOT, gpt2_with_loss, mib, run_json  # noqa: E402


def kernel_name(shardc):
    """Which OpenBLAS kernel ran (bench/README.md: benchmarks say so)."""
    try:
        import ctypes
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return lib.openblas_get_corename().decode()
    except OSError:
        return "unknown"


def step(shardc, graph, inputs, n, steps, data_parallel, extra=()):
    """One AdamW run of `steps` steps at N = n (more options in `extra`):
    the largest per-rank peak, rank 0's median step seconds, the last
    loss."""
    cmd = [shardc, "run", graph, "--grad", "loss", "--optimizer", "adamw", "--lr", "1e-4",
           "--inputs", inputs, "--world-size", str(n), "--threads", "1", "--steps", str(steps),
           "--report", "json", *extra]
    if data_parallel:
        cmd.append("--data-parallel")
    report = run_json(cmd)
    assert report["predictions_hold"], report
    peak = max(r["forward"]["peak_bytes"] for r in report["ranks"])
    seconds = statistics.median(r["seconds"] for r in report["ranks"][0]["forward_repeats"])
    return peak, seconds, report["training_steps"][-1]["loss"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shardc", default=os.path.join(ROOT, "build", "bin", "shardc"))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        graph = os.path.join(tmp, "gpt2-loss.json")
        with open(graph, "w") as f:
            json.dump(gpt2_with_loss(args.batch, args.seq), f)
        inputs = os.path.join(tmp, "in.st")
        subprocess.run([sys.executable, REFERENCE, "--make-inputs", graph, "--seed", "1",
                        "--out", inputs], check=True, env=ENV)
        print("GPT-2 124M, global batch %d x %d tokens, AdamW, one kernel thread per rank, "
              "%d cores, OpenBLAS kernel %s; per-rank step peak in MiB (predicted == "
              "measured), step wall time in s (median of steps 2..%d)\n"
              % (args.batch, args.seq, os.cpu_count(), kernel_name(args.shardc), args.steps))
        print("| ranks | rows a rank | replicated peak | data-parallel peak | peak ratio | "
              "replicated step s | data-parallel step s | time ratio | last loss replicated "
              "/ data-parallel |")
        print("|---|---|---|---|---|---|---|---|---|")
        for n in args.ranks:
            if args.batch % n:
                print("| %d | (the batch does not split evenly) |" % n)
                continue
            rep_peak, rep_s, rep_loss = step(args.shardc, graph, inputs, n, args.steps, False)
            dp_peak, dp_s, dp_loss = step(args.shardc, graph, inputs, n, args.steps, True)
            print("| %d | %d | %s | %s | %.2f | %.3f | %.3f | %.2f | %.6f / %.6f |"
                  % (n, args.batch // n, mib(rep_peak), mib(dp_peak), dp_peak / rep_peak,
                     rep_s, dp_s, dp_s / rep_s, rep_loss, dp_loss))


if __name__ == "__main__":
    main()
