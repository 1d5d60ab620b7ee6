"""Activation checkpointing per unit (`--recompute-activations`) on zoo
models: the memory it saves, the time it costs, and that the gradients do
not change (bench/README.md, "Recomputing activations").

Per model of bench/grad_zoo.py's list (or --only): export the model wrapped
with grad_zoo's loss, then `shardc run --grad output` with and without
--recompute-activations on the same weights and inputs:

* at N = --ranks (default 2): every output (the loss and every gradient)
  compared byte for byte, and each way's ledger peak per rank (exact: the
  report's prediction is checked equal) of that pass and of a training
  step (`--optimizer sgd`: each gradient reduce-scattered into its shard
  as soon as it is complete, as FSDP's training steps; the parameters it
  trains compared byte for byte too);
* with --batch B: every input's first dim is B instead of the zoo's
  (activations grow with it, parameters do not);
* with --timing, at N = 1 and one kernel thread: the median of 5 warm
  training passes (`--repeat 5`) each way.

Prints one markdown row per model and the peaks' ratio (recompute / keep).

    /opt/shardc-venv/bin/python bench/recompute_zoo.py [--only NAME ...]
        [--ranks N] [--batch B] [--timing]
"""

import argparse
import filecmp
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import grad_zoo  # noqa: E402
import zoo_models  # noqa: E402

RECOMPUTE = "--recompute-activations"


def shardc_run(shardc, args):
    """(ledger peak per rank, median warm seconds or None) of one run;
    raises RuntimeError with shardc's last line when it fails or its
    prediction is not exact."""
    p = subprocess.run([shardc, "run"] + args, capture_output=True, text=True,
                       env=grad_zoo.ENV)
    if p.returncode:
        raise RuntimeError(((p.stderr + p.stdout).strip().splitlines() or [""])[-1])
    if "predicted == measured on every rank: yes" not in p.stdout:
        raise RuntimeError("the memory prediction was not exact")
    peak = int(re.search(r"forward peak on ranks? [0-9.]+: ([0-9,]+) bytes", p.stdout)
               .group(1).replace(",", ""))
    median = re.search(r"outputs identical: median ([0-9.]+) s", p.stdout)
    return peak, float(median.group(1)) if median else None


def probe(name, shardc, ranks, batch, timing):
    spec, kwargs, shapes = zoo_models.ZOO[name]
    if batch:
        shapes = {k: ([batch] + list(v[1:]) if isinstance(v, list) else
                      dict(v, shape=[batch] + list(v["shape"][1:])))
                  for k, v in shapes.items()}
    wrapped = json.dumps({"spec": spec, "kwargs": kwargs, "inputs": list(shapes)})
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        g, w, inp = (os.path.join(tmp, f) for f in ("g.json", "w.st", "in.st"))
        for cmd in ([py, os.path.join(ROOT, "tools", "export_torch.py"), "grad_zoo:with_loss",
                     "--python-path", HERE, "--kwargs", wrapped, "--seed", "5", "--capture",
                     "aten", "--input-shapes", json.dumps(shapes), "-o", g, "--weights", w],
                    [py, os.path.join(ROOT, "tools", "torch_reference.py"), "--make-inputs", g,
                     "--seed", "4", "--out", inp]):
            rc, msg, _ = grad_zoo.run(cmd)
            if rc:
                return "| %s | failed: %s |" % (name, msg)
        common = [g, "--grad", "output", "--load", w, "--inputs", inp, "--threads", "1"]
        outs = [os.path.join(tmp, "keep.st"), os.path.join(tmp, "recompute.st")]
        trained = [os.path.join(tmp, "keep-step.st"), os.path.join(tmp, "recompute-step.st")]
        ways = ([], [RECOMPUTE])
        world = ["--world-size", str(ranks)]
        step = ["--optimizer", "sgd", "--lr", "0.01"]
        try:
            peaks = [shardc_run(shardc, common + world + ["--outputs", out] + extra)[0]
                     for out, extra in zip(outs, ways)]
            step_peaks = [shardc_run(shardc, common + world + step + ["--save", out] + extra)[0]
                          for out, extra in zip(trained, ways)]
            times = ["", ""]
            if timing:
                times = ["%.3f" % shardc_run(shardc, common + ["--repeat", "5"] + extra)[1]
                         for extra in ([], [RECOMPUTE])]
        except RuntimeError as e:
            return "| %s | failed: %s |" % (name, e)
        same = (filecmp.cmp(outs[0], outs[1], shallow=False)
                and filecmp.cmp(trained[0], trained[1], shallow=False))
    ratio = lambda a, b: "%.2f" % (float(b) / float(a)) if a and b else ""
    return "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        name, "yes" if same else "NO", format(peaks[0], ","), format(peaks[1], ","),
        ratio(peaks[0], peaks[1]), format(step_peaks[0], ","), format(step_peaks[1], ","),
        ratio(step_peaks[0], step_peaks[1]), times[0], times[1], ratio(times[0], times[1]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="these zoo models instead of grad_zoo's list")
    ap.add_argument("--shardc", default=os.path.join(ROOT, "build", "bin", "shardc"))
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--batch", type=int, help="every input's first dim (default: the zoo's)")
    ap.add_argument("--timing", action="store_true",
                    help="also time a warm training pass each way (N = 1, one thread)")
    args = ap.parse_args()
    print("| model | same bytes | --grad peak/rank keep B | recompute B | ratio | "
          "step peak/rank keep B | recompute B | ratio | keep s | recompute s | ratio |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.only or grad_zoo.DEFAULT:
        print(probe(name, args.shardc, args.ranks, args.batch, args.timing), flush=True)


if __name__ == "__main__":
    main()
