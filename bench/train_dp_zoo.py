"""Which zoo models train data-parallel (bench/README.md, "Data-parallel
training coverage").

Per model of bench/zoo_models.py: export it at a batch of 2 (the zoo's
batch-1 inputs doubled) under a loss that is a mean of per-sample terms
(grad_zoo.with_loss with per_row: the cos-weighted mean of the first
output, the same weights for every row), then one SGD step from the eager
instance's weights at N = 2, with lr 1e4 (so that the update dwarfs the
weight it is added to, whose float32 rounding would hide it):
replicated (`--grad output --optimizer sgd`, every rank both rows) and
data-parallel (`... --data-parallel`, one row a rank, the gradient shares
summed). Compares the two updates tensor by tensor: the largest
|data-parallel - replicated| over the largest update of that tensor (with
a floor of 1e-4 x the model's largest update). Prints one markdown row per
model: ok (within --rtol), differs, refused (shardc's exit-2 message) or
failed. (grad_zoo.py checks the replicated gradients against
torch.autograd.)

With --clip C both steps clip to global norm C, and the clipped replicated
step also runs at N = 1: its trained parameters must be byte-identical to
N = 2's (the norm's squares are summed exactly).

With --train the models are exported in training mode (export_torch.py
--train): batch norm by the batch's statistics, which the data-parallel
step sums over ranks (each rank holds one of the two images); dropout
probabilities set to 0 (grad_zoo.without_dropout), so that torch in
float64 can arbitrate: where the two float32 updates differ by more than
--rtol (batch norm's backward cancels below float32's reach in some
models), both are measured against the float64 module's update, and the
data-parallel one passes when its error is within twice the replicated
one's.

    /opt/shardc-venv/bin/python bench/train_dp_zoo.py [--only NAME ...] [--rtol R]
        [--clip C] [--train]
"""

import argparse
import filecmp
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
import zoo_models  # noqa: E402
from grad_zoo import DEFAULT, F64_GRADS, print_rows, run  # noqa: E402


LR = 1e4  # the step's learning rate: the update dwarfs the weight's rounding


def worst_update_error(after, updates, before, scale):
    """(error, tensor): the largest |(before - after) - update| of a tensor
    over its largest update (floored at 1e-4 x the model's largest)."""
    worst, worst_name = 0.0, ""
    for n, u in updates.items():
        if not u.numel():
            continue
        diff = ((before[n].double() - after[n].double()) - u).abs().max().item()
        err = diff / max(u.abs().max().item(), 1e-4 * scale, 1e-30)
        if err > worst or err != err:
            worst, worst_name = err, n
    return worst, worst_name


def probe(name, shardc, tmp, rtol, clip=None, train=False):
    spec, kwargs, shapes = zoo_models.ZOO[name]
    shapes = {k: ([2] + v[1:] if isinstance(v, list) and v and v[0] == 1 else v)
              for k, v in shapes.items()}
    wrapped = json.dumps({"spec": spec, "kwargs": kwargs, "inputs": list(shapes),
                          "per_row": True, **({"dropout": False} if train else {})})
    g, w, inp = (os.path.join(tmp, f) for f in ("g.json", "w.st", "in.st"))
    rep, dp = os.path.join(tmp, "rep.st"), os.path.join(tmp, "dp.st")
    py, export = sys.executable, os.path.join(ROOT, "tools", "export_torch.py")
    clipping = ["--clip-grad-norm", repr(clip)] if clip else []

    def step_at(n):
        return [shardc, "run", g, "--grad", "output", "--optimizer", "sgd", "--lr", repr(LR),
                "--world-size", str(n), "--load", w, "--inputs", inp, "--threads", "1",
                *clipping, "--save"]
    step = step_at(2)
    for what, cmd in (
            ("export", [py, export, "grad_zoo:with_loss", "--python-path", HERE, "--kwargs",
                        wrapped, "--seed", "5", "--capture", "aten", "--input-shapes",
                        json.dumps(shapes), "-o", g, "--weights", w]
             + (["--train"] if train else [])),
            ("inputs", [py, os.path.join(ROOT, "tools", "torch_reference.py"),
                        "--make-inputs", g, "--seed", "4", "--out", inp]),
            ("replicated", step + [rep])):
        rc, msg, _ = run(cmd)
        if rc:
            return "failed", "%s: %s" % (what, msg), ""
    start = time.perf_counter()
    rc, msg, _ = run(step + [dp, "--data-parallel"])
    seconds = "%.1f" % (time.perf_counter() - start)
    if rc == 2:
        return "refused", msg.replace(g, "g.json"), seconds
    if rc:
        return "failed", msg, seconds
    import torch_reference as tr
    before, a, b = tr.read_safetensors(w), tr.read_safetensors(dp), tr.read_safetensors(rep)
    updates = {n: (before[n].double() - b[n].double()) for n in b
               if n in before and b[n].is_floating_point()}
    scale = max((u.abs().max().item() for u in updates.values() if u.numel()), default=0.0)
    worst, worst_name = worst_update_error(a, updates, before, scale)
    detail = "%d tensors, worst %s %.1e" % (len(updates), worst_name, worst)
    if train and worst > rtol:
        exact = os.path.join(tmp, "f64.st")
        rc, msg, _ = run([py, "-c", F64_GRADS % dict(
            here=HERE, tools=os.path.join(ROOT, "tools"), wrapped=wrapped, weights=w,
            inputs=inp, out=exact)])
        if rc:
            return "differs", detail + " (float64 reference failed: %s)" % msg, seconds
        grads = tr.read_safetensors(exact)
        exact_updates = {n: LR * grads["grad." + n] for n in updates if "grad." + n in grads}
        ours, _ = worst_update_error(a, exact_updates, before, scale)
        theirs, _ = worst_update_error(b, exact_updates, before, scale)
        detail += "; against float64: data-parallel %.1e, replicated %.1e" % (ours, theirs)
        return ("ok" if ours <= max(rtol, 2 * theirs) else "differs"), detail, seconds
    same = True
    if clip:  # the clipped replicated step is the same bytes at N = 1 and 2
        single = os.path.join(tmp, "rep1.st")
        rc, msg, _ = run(step_at(1) + [single])
        if rc:
            return "failed", "replicated N = 1: %s" % msg, seconds
        same = filecmp.cmp(single, rep, shallow=False)
        detail += "; replicated N = 1 %s N = 2" % ("==" if same else "!=")
    return ("ok" if worst <= rtol and same else "differs"), detail, seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shardc", default=os.path.join(ROOT, "build", "bin", "shardc"))
    ap.add_argument("--only", nargs="+")
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--train", action="store_true",
                    help="export in training mode: batch statistics summed over ranks, "
                         "the models' own dropout kept")
    ap.add_argument("--clip", type=float,
                    help="both steps clip to this global gradient norm (--clip-grad-norm), "
                         "and the replicated one is also run at N = 1 and compared byte "
                         "for byte with N = 2")
    args = ap.parse_args()
    print("| model | data-parallel step | detail | data-parallel run s |")
    print("|---|---|---|---|")
    print_rows(args.only or DEFAULT,
               lambda name, tmp: probe(name, args.shardc, tmp, args.rtol, args.clip,
                                       args.train))


if __name__ == "__main__":
    main()
