"""Gradient accumulation against the step without it (bench/README.md,
"Gradient accumulation").

GPT-2 124M (bench/train_step.py's graph: nanoGPT under a next-token
cross-entropy loss), a global batch of B x T tokens, AdamW, N local ranks
with one kernel thread each, data-parallel: each rank's B / N rows run as
K forward and backward micro-steps (`--accumulate K`), then one optimizer
step. K = 1 is the step without accumulation, measured in the same run.

Printed per (N, K): the per-rank step peak (ledger, predicted == measured)
and its ratio to K = 1's, the step's wall time (median of steps 2..S, rank
0) and its ratio, and the last step's loss (the whole batch's at every K,
equal within float rounding).

    /opt/shardc-venv/bin/python bench/train_accumulate.py [--batch 8]
        [--seq 256] [--ranks 1 2] [--accumulate 1 2 4 8] [--steps 2]
"""

import argparse
import os
import tempfile

from train_data_parallel import kernel_name, step
from train_step import ROOT, mib, prepare_gpt2


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shardc", default=os.path.join(ROOT, "build", "bin", "shardc"))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--accumulate", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--steps", type=int, default=2)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        graph, inputs, _ = prepare_gpt2(tmp, args.shardc, args.batch, args.seq)
        print("GPT-2 124M, global batch %d x %d tokens, AdamW, data-parallel, one kernel "
              "thread per rank, %d cores, OpenBLAS kernel %s; per-rank step peak in MiB "
              "(predicted == measured), step wall time in s (median of steps 2..%d)\n"
              % (args.batch, args.seq, os.cpu_count(), kernel_name(args.shardc), args.steps))
        print("| ranks | micro-steps | rows a micro-step | peak | peak / K=1 | step s | "
              "time / K=1 | last loss |")
        print("|---|---|---|---|---|---|---|---|")
        for n in args.ranks:
            base = None
            for k in args.accumulate:
                if args.batch % (n * k):
                    print("| %d | %d | (the batch does not split) |" % (n, k))
                    continue
                peak, seconds, loss = step(args.shardc, graph, inputs, n, args.steps, True,
                                           ["--accumulate", str(k)])
                if base is None:
                    base = (peak, seconds)
                print("| %d | %d | %d | %s | %.2f | %.3f | %.2f | %.6f |"
                      % (n, k, args.batch // (n * k), mib(peak), peak / base[0], seconds,
                         seconds / base[1], loss))


if __name__ == "__main__":
    main()
