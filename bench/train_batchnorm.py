"""Training a convnet as torch trains it: batch norm in training mode
(bench/README.md, "Training-mode batch norm").

torchvision's resnet18 under cross-entropy (test/export/grad_models.py
ResNetLoss), exported with `--train` (batch norm by the batch's statistics,
its running statistics updated every step) and, for comparison, in eval
mode; SGD with momentum, K steps on the same batch:

* time: one kernel thread, N = 1, the median of steps 2..K: shardc in
  training mode against torch eager training the module itself
  (`model.train()`, torch.optim.SGD, one thread) in the same run, and
  against shardc's own eval-mode step (what the batch statistics cost);
* memory: each rank's ledger peak at N = 1 and 4, training and eval mode
  (predicted == measured on every run);
* invariance: the parameters and running statistics after K steps at N = 1
  and N = 4, byte for byte; against torch's module, the worst tensor's
  max-norm error (a comparison: several SGD steps amplify float rounding);
* data-parallel (--data-parallel, the batch norms' statistics summed over
  ranks as torch's SyncBatchNorm does): each rank's peak and the step at
  N = 2, 4 and 8 (one image per rank), and the parameters' worst error
  against torch training the module on the whole batch, beside what
  DistributedDataParallel without SyncBatchNorm computes (each rank's
  images normalized by their own statistics, the gradients averaged),
  simulated in one process.

    /opt/shardc-venv/bin/python bench/train_batchnorm.py [--batch 8]
        [--size 64] [--steps 4]
"""

import argparse
import filecmp
import os
import statistics
import subprocess
import sys
import tempfile
import time

from train_step import ENV, REFERENCE, ROOT, mib, run_json, worst_max_norm

EXPORT = os.path.join(ROOT, "tools", "export_torch.py")
MODELS = os.path.join(ROOT, "test", "export")


def export(tmp, batch, size, train):
    name = "train" if train else "eval"
    graph = os.path.join(tmp, name + ".json")
    shapes = ('{"x": [%d, 3, %d, %d], "target": {"shape": [%d], "dtype": "int64", '
              '"high": 10}}' % (batch, size, size, batch))
    subprocess.run([sys.executable, EXPORT, "grad_models:ResNetLoss", "--python-path", MODELS,
                    "--input-shapes", shapes, "-o", graph, "--weights",
                    os.path.join(tmp, "weights.st"), "--seed", "1"]
                   + (["--train"] if train else []),
                   check=True, env=ENV, capture_output=True)
    return graph


def torch_module(weights, inputs, lr, momentum):
    """(the module in training mode with `weights`, the batch, its SGD, the
    safetensors reader/writer), one torch thread."""
    import torch
    sys.path.insert(0, MODELS)
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import torch_reference as tr
    from grad_models import ResNetLoss
    torch.set_num_threads(1)
    model = ResNetLoss().train()
    state = model.state_dict()
    with torch.no_grad():
        for name, t in tr.read_safetensors(weights).items():
            state[name].copy_(t)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, foreach=False)
    return model, tr.read_safetensors(inputs), opt, tr


def torch_training(weights, inputs, steps, lr, momentum, out):
    """The module itself, trained by torch in training mode: per-step
    seconds after the first; the state after the last step written to out."""
    import torch
    model, batch, opt, tr = torch_module(weights, inputs, lr, momentum)
    seconds = []
    for _ in range(steps):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        model(batch["x"], batch["target"]).backward()
        opt.step()
        seconds.append(time.perf_counter() - start)
    saved = {k: v.detach().contiguous() for k, v in model.state_dict().items()
             if v.is_floating_point()}
    tr.write_safetensors(out, saved)
    return seconds[1:], torch.__version__


def torch_local_statistics(weights, inputs, steps, lr, momentum, ranks, out):
    """DistributedDataParallel without SyncBatchNorm, simulated in one
    process: each rank's slice of the batch runs forward with its own batch
    statistics, the gradients are averaged over ranks (each slice's mean
    loss / ranks, accumulated), then one SGD step. The parameters after the
    last step are written to out (the running statistics are not: DDP keeps
    rank 0's)."""
    model, batch, opt, tr = torch_module(weights, inputs, lr, momentum)
    xs, ts = batch["x"].chunk(ranks), batch["target"].chunk(ranks)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        for x, t in zip(xs, ts):
            (model(x, t) / ranks).backward()
        opt.step()
    tr.write_safetensors(out, {k: v.detach().contiguous()
                               for k, v in model.named_parameters()})


def parameters_only(path, like, out):
    """The tensors of safetensors file `path` that file `like` holds, to out
    (the running statistics left out of a comparison of parameters)."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import torch_reference as tr
    names = set(tr.read_safetensors(like))
    tr.write_safetensors(out, {k: v for k, v in tr.read_safetensors(path).items()
                               if k in names})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shardc", default=os.path.join(ROOT, "build", "bin", "shardc"))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        graphs = {mode: export(tmp, args.batch, args.size, mode == "train")
                  for mode in ("train", "eval")}
        weights = os.path.join(tmp, "weights.st")
        inputs = os.path.join(tmp, "inputs.st")
        subprocess.run([sys.executable, REFERENCE, "--make-inputs", graphs["train"], "--seed",
                        "2", "--out", inputs], check=True, env=ENV, capture_output=True)
        sgd = ["--grad", "output", "--optimizer", "sgd", "--lr", str(args.lr), "--momentum",
               str(args.momentum), "--load", weights, "--inputs", inputs, "--threads", "1"]

        print("resnet18, batch %d x 3 x %d x %d, SGD with momentum, %d steps; per-rank "
              "ledger peaks in MiB (predicted == measured on every run)\n"
              % (args.batch, args.size, args.size, args.steps))
        print("| mode | ranks | peak MiB | step s (median of steps 2..%d) |" % args.steps)
        print("|---|---|---|---|")
        seconds, saved = {}, {}
        for mode in ("train", "eval"):
            for n in (1, 4):
                out = os.path.join(tmp, "%s.%d.st" % (mode, n))
                report = run_json([args.shardc, "run", graphs[mode], *sgd, "--steps",
                                   str(args.steps), "--world-size", str(n), "--save", out,
                                   "--report", "json"])
                assert report["predictions_hold"], report
                peak = max(r["forward"]["peak_bytes"] for r in report["ranks"])
                step = statistics.median(r["seconds"] for r in
                                         report["ranks"][0]["forward_repeats"])
                seconds[mode, n], saved[mode, n] = step, out
                print("| %s | %d | %s | %.3f |" % (mode, n, mib(peak), step))
        same = filecmp.cmp(saved["train", 1], saved["train", 4], shallow=False)

        print("\nData-parallel (--data-parallel: each rank its images, the batch "
              "statistics summed over ranks), training mode:\n")
        print("| ranks | images per rank | peak MiB per rank | step s |")
        print("|---|---|---|---|")
        parallel = {}
        for n in (2, 4, 8):
            if args.batch % n:
                continue
            out = os.path.join(tmp, "dp.%d.st" % n)
            report = run_json([args.shardc, "run", graphs["train"], *sgd, "--steps",
                               str(args.steps), "--world-size", str(n), "--data-parallel",
                               "--save", out, "--report", "json"])
            assert report["predictions_hold"], report
            peak = max(r["forward"]["peak_bytes"] for r in report["ranks"])
            step = statistics.median(r["seconds"] for r in
                                     report["ranks"][0]["forward_repeats"])
            parallel[n] = out
            print("| %d | %d | %s | %.3f |" % (n, args.batch // n, mib(peak), step))

        ref = os.path.join(tmp, "torch.st")
        torch_seconds, version = torch_training(weights, inputs, args.steps, args.lr,
                                                args.momentum, ref)
        theirs = statistics.median(torch_seconds)
        ours = seconds["train", 1]
        print("\nOne thread, N = 1: shardc's training-mode step %.3f s, torch %s eager "
              "training the module %.3f s: %.2fx (shardc / torch); shardc's eval-mode step "
              "%.3f s (training mode / eval: %.2fx)"
              % (ours, version, theirs, ours / theirs, seconds["eval", 1],
                 ours / seconds["eval", 1]))
        print("Parameters and running statistics after %d steps: N = 1 and N = 4 %s; "
              "against torch's module, worst max-norm error %.2e"
              % (args.steps, "byte-identical" if same else "DIFFER",
                 worst_max_norm(saved["train", 1], ref)))
        print("\nThe parameters after %d steps against torch training the module on the "
              "whole batch (worst tensor's max-norm error; the running statistics of "
              "shardc's runs: N = 1 and 4 above):\n" % args.steps)
        print("| ranks | shardc --data-parallel | torch DDP without SyncBatchNorm (simulated) |")
        print("|---|---|---|")
        for n, out in parallel.items():
            local = os.path.join(tmp, "local.%d.st" % n)
            torch_local_statistics(weights, inputs, args.steps, args.lr, args.momentum, n,
                                   local)
            ours, whole = (os.path.join(tmp, name % n) for name in ("ours.%d.st", "whole.%d.st"))
            parameters_only(out, local, ours)
            parameters_only(ref, local, whole)
            print("| %d | %.2e | %.2e |" % (n, worst_max_norm(ours, whole),
                                            worst_max_norm(local, whole)))


if __name__ == "__main__":
    main()
