"""Gradient clipping's cost and its world-size invariance at GPT-2 scale
(bench/README.md, "Gradient clipping").

GPT-2 124M under a next-token loss (bench/train_step.py's graph), AdamW,
K steps on the same batch, with and without `--clip-grad-norm`:

* time: one kernel thread, N = 1, the median of steps 2..K, clipped against
  unclipped shardc in the same run (the exact norm's price), and beside it
  torch eager with torch.nn.utils.clip_grad_norm_ against torch eager
  without it (tools/torch_reference.py --train adamw [--clip-grad-norm]);
* memory: each rank's ledger peak at N = 1 and 4, clipped and not
  (predicted == measured on every run);
* invariance: the parameters trained with clipping at N = 1 and at N = 4
  compared byte for byte (the norm's squares are summed exactly), and each
  run's parameters against torch's (the worst tensor's max-norm error,
  clipped beside unclipped: the 1e-5 checks are in test/lit/shardc/
  train.test, on graphs where AdamW's first steps do not amplify rounding).

    /opt/shardc-venv/bin/python bench/grad_clip.py [--batch 2] [--seq 64]
        [--steps 4] [--clip 1.0]
"""

import argparse
import filecmp
import json
import os
import statistics
import subprocess
import sys
import tempfile

from train_step import ENV, REFERENCE, ROOT, mib, prepare_gpt2, run_json, worst_max_norm


def torch_step_seconds(graph, init, inputs, steps, extra, out, tmp, name):
    timing = os.path.join(tmp, name + ".json")
    subprocess.run([sys.executable, REFERENCE, graph, "--params", init, "--inputs", inputs,
                    "--grad", "loss", "--train", "adamw", "--lr", "1e-4", "--steps", str(steps),
                    "--threads", "1", "--time-json", timing, "--outputs", out, *extra],
                   check=True, env=ENV, capture_output=True)
    with open(timing) as f:
        return statistics.median(json.load(f)["step_seconds"][1:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shardc", default=os.path.join(ROOT, "build", "bin", "shardc"))
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--clip", type=float, default=1.0)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        graph, inputs, init = prepare_gpt2(tmp, args.shardc, args.batch, args.seq)
        train = ["--grad", "loss", "--optimizer", "adamw", "--lr", "1e-4", "--inputs", inputs,
                 "--steps", str(args.steps), "--threads", "1", "--report", "json"]
        clip = ["--clip-grad-norm", str(args.clip)]

        print("GPT-2 124M, batch %d x %d tokens, AdamW, %d steps, clip norm %g; one kernel "
              "thread per rank\n" % (args.batch, args.seq, args.steps, args.clip))
        print("| ranks | peak MiB unclipped | peak MiB clipped | step s unclipped "
              "| step s clipped | clipped / unclipped |")
        print("|---|---|---|---|---|---|")
        saved = {}
        for n in (1, 4):
            rows = []
            for label, extra in (("plain", []), ("clip", clip)):
                out = os.path.join(tmp, "%s.%d.st" % (label, n))
                report = run_json([args.shardc, "run", graph, *train, *extra,
                                   "--world-size", str(n), "--save", out])
                assert report["predictions_hold"], report
                peak = max(r["forward"]["peak_bytes"] for r in report["ranks"])
                seconds = statistics.median(r["seconds"]
                                            for r in report["ranks"][0]["forward_repeats"])
                rows.append((peak, seconds))
                saved[(label, n)] = out
            print("| %d | %s | %s | %.3f | %.3f | %.3f |"
                  % (n, mib(rows[0][0]), mib(rows[1][0]), rows[0][1], rows[1][1],
                     rows[1][1] / rows[0][1]))

        same = filecmp.cmp(saved[("clip", 1)], saved[("clip", 4)], shallow=False)
        moved = not filecmp.cmp(saved[("clip", 1)], saved[("plain", 1)], shallow=False)
        timing, worst = {}, {}
        for label, extra in (("plain", []), ("clip", clip)):
            out = os.path.join(tmp, "torch-%s.st" % label)
            timing[label] = torch_step_seconds(graph, init, inputs, args.steps, extra, out, tmp,
                                               label)
            worst[label] = worst_max_norm(saved[(label, 1)], out)
        print("\ntorch eager, one thread, N = 1: %.3f s unclipped, %.3f s with "
              "clip_grad_norm_: %.3f (clipped / unclipped)"
              % (timing["plain"], timing["clip"], timing["clip"] / timing["plain"]))
        print("the trained parameters against torch's, worst tensor's max-norm error: "
              "unclipped %.2e, clipped %.2e" % (worst["plain"], worst["clip"]))
        print("clipped parameters N = 1 vs N = 4: %s; clipped vs unclipped: %s"
              % ("byte-identical" if same else "DIFFER", "differ" if moved else "SAME"))
        return 0 if same and moved else 1


if __name__ == "__main__":
    sys.exit(main())
