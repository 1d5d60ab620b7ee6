"""A sharded training step's memory and time (bench/README.md, "Training
steps").

GPT-2 124M (examples/make_models.py's nanoGPT graph, batch B x T tokens)
under a next-token cross-entropy loss, trained with AdamW:

* memory: `shardc run --grad loss --optimizer adamw` at N = 1, 2, 4, 8
  local ranks, each rank's ledger peaks (exact: the report's prediction is
  checked equal): after init (parameters + AdamW's two moments, all
  sharded) and during the step (plus the gathered units, activations, the
  full gradients until their reduce-scatter). Beside it the same joint
  graph with `--grad` only (every full gradient returned, as without
  reduce-scatter), and N = 1's step peak divided by N (perfect sharding of
  everything, activations included: a bound nothing reaches).
* time: one kernel thread, N = 1, the median of steps 2..K: shardc against
  torch eager on the same graph, parameters and inputs
  (tools/torch_reference.py --train adamw: the graph's ops in torch, then
  loss.backward() and torch.optim.AdamW(foreach=False).step()); shardc's
  losses are printed (test/lit/shardc/train.test checks the trained
  parameters against torch's).

    /opt/shardc-venv/bin/python bench/train_step.py [--batch 2] [--seq 64]
        [--ranks 1 2 4 8] [--steps 4] [--param-dtype bfloat16]

With --param-dtype bfloat16 the parameters are master weights
(docs/graph-format.md): float32 shards, moments and checkpoints, forward and
backward in bfloat16, as FSDP2's MixedPrecisionPolicy; the torch side runs
the same (tools/torch_reference.py: the float32 parameters converted to
bfloat16 at every read, torch.optim on the float32 ones).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "examples"))
import make_models  # noqa: E402

ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
REFERENCE = os.path.join(ROOT, "tools", "torch_reference.py")


def gpt2_with_loss(batch, seq):
    """nanoGPT's graph with targets [B, T] and loss = cross_entropy over
    the B*T positions."""
    graph = make_models.build("gpt2", batch=batch, seq=seq)
    vocab = next(p for p in graph["parameters"] if p["name"] == "transformer.wte.weight")["shape"][0]
    graph["inputs"].append({"name": "targets", "shape": [batch, seq], "dtype": "int64",
                            "high": vocab})
    graph["nodes"] += [
        {"name": "logits.flat", "op": "reshape", "inputs": ["logits"],
         "shape": [batch * seq, vocab]},
        {"name": "targets.flat", "op": "reshape", "inputs": ["targets"], "shape": [batch * seq]},
        {"name": "loss", "op": "cross_entropy", "inputs": ["logits.flat", "targets.flat"]},
    ]
    graph["outputs"] = ["loss"]
    return graph


def with_master_weights(graph, param_dtype):
    """Every parameter read in `param_dtype`, stored in its own dtype."""
    for p in graph["parameters"]:
        p["master_dtype"], p["dtype"] = p["dtype"], param_dtype
    return graph


def prepare_gpt2(tmp, shardc, batch, seq, param_dtype=None):
    """In `tmp`: the graph (gpt2_with_loss; master weights read in
    `param_dtype` if given), its inputs (seed 1) and shardc's initial
    parameters (the torch side starts from them). Returns the three paths."""
    graph = os.path.join(tmp, "gpt2-loss.json")
    model = gpt2_with_loss(batch, seq)
    if param_dtype:
        model = with_master_weights(model, param_dtype)
    with open(graph, "w") as f:
        json.dump(model, f)
    inputs, init = os.path.join(tmp, "in.st"), os.path.join(tmp, "init.st")
    subprocess.run([sys.executable, REFERENCE, "--make-inputs", graph, "--seed", "1",
                    "--out", inputs], check=True, env=ENV)
    subprocess.run([shardc, "run", graph, "--init-only", "--save", init],
                   check=True, env=ENV, capture_output=True)
    return graph, inputs, init


def run_json(cmd):
    out = subprocess.run(cmd, env=ENV, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def worst_max_norm(ours, theirs):
    """The largest per-tensor max-norm error of tools/torch_reference.py
    --compare (training steps amplify float rounding, so this is a comparison,
    not a bound)."""
    out = subprocess.run([sys.executable, REFERENCE, "--compare", ours, theirs, "--rtol", "1e30"],
                         env=ENV, capture_output=True, text=True, check=True).stdout
    errors = [float(line.split()[3]) for line in out.splitlines()[1:]
              if len(line.split()) >= 6 and line.split()[-1] in ("ok", "rtol")]
    return max(errors)


def mib(n):
    return "%.1f" % (n / 2**20)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shardc", default=os.path.join(ROOT, "build", "bin", "shardc"))
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--param-dtype", choices=["bfloat16", "float16"],
                    help="master weights: parameters read in this dtype, stored float32")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        graph, inputs, init = prepare_gpt2(tmp, args.shardc, args.batch, args.seq,
                                           args.param_dtype)
        train = ["--grad", "loss", "--optimizer", "adamw", "--lr", "1e-4", "--inputs", inputs]

        print("GPT-2 124M, batch %d x %d tokens, AdamW%s; per-rank ledger peaks in MiB "
              "(predicted == measured on every run)\n"
              % (args.batch, args.seq, ", float32 master weights read in " + args.param_dtype
                 if args.param_dtype else ""))
        print("| ranks | after init (params + moments) | training step | `--grad` only "
              "(full gradients out) | N = 1's step / N |")
        print("|---|---|---|---|---|")
        first = None
        for n in args.ranks:
            step = run_json([args.shardc, "run", graph, *train, "--world-size", str(n),
                             "--threads", "1", "--report", "json"])
            grads = run_json([args.shardc, "run", graph, "--grad", "loss", "--inputs", inputs,
                              "--world-size", str(n), "--threads", "1", "--report", "json"])
            for report in (step, grads):
                assert report["predictions_hold"], report
            init_peak = max(r["init"]["peak_bytes"] for r in step["ranks"])
            step_peak = max(r["forward"]["peak_bytes"] for r in step["ranks"])
            grad_peak = max(r["forward"]["peak_bytes"] for r in grads["ranks"])
            first = first or step_peak
            print("| %d | %s | %s | %s | %s |" % (n, mib(init_peak), mib(step_peak),
                                                  mib(grad_peak), mib(first / n)))

        shardc = run_json([args.shardc, "run", graph, *train, "--steps", str(args.steps),
                           "--threads", "1", "--report", "json"])
        warm = [r["seconds"] for r in shardc["ranks"][0]["forward_repeats"]]
        timing = os.path.join(tmp, "torch.json")
        subprocess.run([sys.executable, REFERENCE, graph, "--params", init, "--inputs", inputs,
                        "--grad", "loss", "--train", "adamw", "--lr", "1e-4", "--steps",
                        str(args.steps), "--threads", "1", "--time-json", timing],
                       check=True, env=ENV, capture_output=True)
        with open(timing) as f:
            torch_times = json.load(f)
        torch_warm = torch_times["step_seconds"][1:]
        ours, theirs = statistics.median(warm), statistics.median(torch_warm)
        losses = [s["loss"] for s in shardc["training_steps"]]
        print("\nOne thread, N = 1, median of steps 2..%d: shardc %.3f s, torch %s eager %.3f s "
              "per step: %.2fx (shardc / torch); shardc's losses %s"
              % (args.steps, ours, torch_times["torch"], theirs, ours / theirs,
                 ", ".join("%.6f" % l for l in losses)))


if __name__ == "__main__":
    main()
