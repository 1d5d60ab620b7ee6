"""Which zoo models `shardc run --grad` differentiates, checked against
torch.autograd on the model itself (bench/README.md, "Gradient coverage").

Per model of bench/zoo_models.py: wrap it so forward returns a 0-d loss
(the mean of its first output, in float32, weighted by cos(0), cos(1),
...: a plain mean or mean square would be constant after a final layer
norm, its gradients noise), export the wrapper,
run `shardc run --grad output` at N = 2 on the eager instance's weights
(--load) and deterministic inputs, run the eager module with the same
weights and inputs under torch.autograd (export_torch.py --eager --grad),
and compare every parameter's gradient (max-norm relative error, the
worst tensor). Prints one markdown row per model: ok (every gradient
within --rtol), differs, refused (shardc's exit-2 message: an op without
a gradient rule) or failed. Where float32 itself cannot reach --rtol (the
relu masks of a deep video net flip with the last bit of their inputs),
both float32 results are measured against the module in float64, and
shardc's passes within twice torch's error.

    /opt/shardc-venv/bin/python bench/grad_zoo.py [--only NAME ...] [--rtol R]
        [--train [--keep-dropout]]

With --train: the models exported and run in training mode
(export_torch.py --train: batch norm by the batch's statistics, 8 images
instead of 1), their dropout probabilities set to 0 on both sides (shardc's
masks are its own; batch norm's backward cancels, so the float64 check
above matters most there). With
--keep-dropout: the models' own dropout kept, two SGD steps at N = 1 and 2
compared byte for byte.

With --param-dtype bfloat16: exported with master weights (float32
parameters read in bfloat16, docs/graph-format.md); shardc's and torch's
bfloat16 gradients (the module run with its parameters in bfloat16) are each
measured against the float32 module, and shardc's passes within twice
torch's error.

With --timing: per model, one kernel thread, N = 1: the median of 5 warm
runs (`--repeat 5`) of shardc's forward alone and of its forward and
backward (`--grad`), against torch eager's forward and backward
(loss.backward(), torch.set_num_threads(1), median of 3 after a warm-up) on
the same weights and inputs; and shardc's ledger peak with and without
the backward. Five, not three: where the host allocator's best fit leaves
the first warm run short of blocks, the second makes an arena planned from
it and the runs after that first-touch nothing (docs/plan.md), so the
median of five is a steady step, as torch's median after its warm-up is.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import zoo_models  # noqa: E402

ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")

DEFAULT = [
    "nn.TransformerEncoder", "nn.Transformer", "nn.MultiheadAttention",
    "torchvision resnet18", "torchvision mobilenet_v3_small", "torchvision VisionTransformer tiny",
    "torchvision SwinTransformer tiny", "torchvision convnext_tiny", "torchvision densenet121",
    "torchvision efficientnet_b0", "torchvision googlenet", "torchvision squeezenet1_1",
    "torchvision shufflenet_v2_x0_5", "torchvision regnet_y_400mf", "torchvision mnasnet0_5",
    "torchaudio wav2vec2 tiny", "HF GPT-2", "HF Llama", "HF Qwen2", "HF Gemma", "HF Phi",
    "HF Falcon", "HF BERT", "HF BERT (attention mask)", "HF Llama (attention mask)", "HF T5",
    "HF BART", "HF Whisper", "HF ViT", "HF CLIP vision", "HF Swin",
    "timm vit_tiny_patch16_224", "timm levit_128s", "timm mixer_s16_224",
        "timm coat_lite_tiny", "timm mobilevit_xxs",
    "HF Mixtral (MoE)", "HF Qwen2-MoE", "HF Qwen3-MoE", "HF OLMoE",
    # video (convolutions over 3 spatial dims) and segmentation
    "torchvision r3d_18", "torchvision mc3_18", "torchvision r2plus1d_18", "torchvision s3d",
    "torchvision swin3d_t", "torchvision mvit_v1_b", "torchvision mvit_v2_s",
    "torchvision fcn_resnet50", "torchvision deeplabv3_mobilenet_v3_large",
    "torchvision lraspp_mobilenet_v3_large",
    # boundaries: ReLU6 on exact zeros, normalized zero vectors
    "torchvision mobilenet_v2", "torchvision swin_v2_t",
    # pools whose windows differ in size
    "torchvision alexnet", "timm poolformer_s12",
    # optical flow (grid_sample's gradient)
    "torchvision raft_small", "torchvision raft_large",
]


def without_dropout(model):
    """Every dropout probability of `model` set to 0: nn.Dropout modules'
    p, and float attributes named *dropout* / *drop_rate* (Hugging Face's
    attention_dropout, timm's drop_rate) on modules and their configs. The
    --train comparison needs it: shardc's dropout masks are its own
    (docs/rng.md), not torch's."""
    import torch
    for m in model.modules():
        if isinstance(m, torch.nn.modules.dropout._DropoutNd) or \
                type(m).__name__ == "StochasticDepth":  # torchvision's per-sample drop
            m.p = 0.0
        if isinstance(getattr(m, "drop_prob", None), float):  # timm's DropPath
            m.drop_prob = 0.0
        for holder in (m, getattr(m, "config", None)):
            if holder is None:
                continue
            for key, value in list(vars(holder).items()):
                if isinstance(value, float) and ("dropout" in key or "drop_rate" in key
                                                 or key.endswith("_pdrop")):
                    setattr(holder, key, 0.0)
    return model


def with_loss(spec, kwargs, inputs, per_row=False, dropout=True):
    """The zoo model `spec` wrapped: forward(**inputs) returns a 0-d float32
    loss, the cos-weighted mean of the model's first output. per_row: the
    weights run over one batch row's elements and are the same for every
    row (a loss that is a mean of per-sample terms, as data-parallel
    training splits it: bench/train_dp_zoo.py)."""
    import importlib
    import torch

    module_name, factory = spec.split(":")
    model = getattr(importlib.import_module(module_name), factory)(**kwargs)

    def first_tensor(value):
        if isinstance(value, torch.Tensor):
            return value
        if isinstance(value, dict) or hasattr(value, "values"):
            value = list(value.values())
        for item in value:
            found = first_tensor(item)
            if found is not None:
                return found
        return None

    # forward must name the model's inputs (the exporter binds them by name).
    params = ", ".join(inputs)
    code = ("def forward(self, %s):\n"
            "    out = first_tensor(self.model(%s))\n"
            "    out = out.float()\n"
            "    shape = out.shape[1:] if %r else out.shape\n"
            "    weight = torch.cos(torch.arange(shape.numel(), dtype=torch.float32, device=out.device))\n"
            "    return (out * weight.reshape(shape)).mean()\n"
            % (params, ", ".join("%s=%s" % (n, n) for n in inputs), bool(per_row)))
    scope = {"first_tensor": first_tensor, "torch": torch}
    exec(code, scope)
    wrapper = type("WithLoss", (torch.nn.Module,), {"forward": scope["forward"]})()
    wrapper.model = model if dropout else without_dropout(model)
    return wrapper


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    lines = [l for l in (p.stderr + p.stdout).splitlines() if l.strip()]
    errors = [l for l in lines if "error" in l.lower()] or lines or [""]
    return p.returncode, errors[-1].split("error: ", 1)[-1], p.stdout


def probe_dropout(name, shardc, tmp):
    """--train --keep-dropout: the model in training mode with its own
    dropout (and stochastic depth) exported as the graph's dropout; two SGD
    steps at N = 1 and at N = 2 must write the same bytes (the masks follow
    the element's index, not the rank: docs/rng.md). torch's masks come from
    another generator, so there is no torch comparison here."""
    spec, kwargs, shapes = zoo_models.ZOO[name]
    shapes = {k: ([8] + list(v[1:]) if isinstance(v, list) and len(v) == 4 and v[0] == 1
                  else v) for k, v in shapes.items()}
    wrapped = json.dumps({"spec": spec, "kwargs": kwargs, "inputs": list(shapes)})
    g, w, inp = (os.path.join(tmp, f) for f in ("g.json", "w.st", "in.st"))
    py, export = sys.executable, os.path.join(ROOT, "tools", "export_torch.py")
    rc, msg, _ = run([py, export, "grad_zoo:with_loss", "--python-path", HERE, "--kwargs",
                      wrapped, "--seed", "5", "--capture", "aten", "--train", "--input-shapes",
                      json.dumps(shapes), "-o", g, "--weights", w])
    if rc:
        return "failed", "export: " + msg, ""
    with open(g) as f:
        dropouts = sum(1 for n in json.load(f)["nodes"] if n["op"] == "dropout")
    rc, msg, _ = run([py, os.path.join(ROOT, "tools", "torch_reference.py"), "--make-inputs", g,
                      "--seed", "4", "--out", inp])
    if rc:
        return "failed", "inputs: " + msg, ""
    saved, start = [], time.perf_counter()
    for n in (1, 2):
        saved.append(os.path.join(tmp, "sgd.%d.st" % n))
        rc, msg, _ = run([shardc, "run", g, "--grad", "output", "--optimizer", "sgd", "--lr",
                          "1e-3", "--steps", "2", "--world-size", str(n), "--load", w,
                          "--inputs", inp, "--threads", "1", "--save", saved[-1]])
        if rc:
            return ("refused" if rc == 2 else "failed"), msg.replace(g, "g.json"), ""
    with open(saved[0], "rb") as a, open(saved[1], "rb") as b:
        same = a.read() == b.read()
    return ("ok" if same else "differs"), "%d dropout nodes; 2 SGD steps, N = 1 and 2 %s" % (
        dropouts, "byte-identical" if same else "DIFFER"), "%.1f" % (time.perf_counter() - start)


def float32_twin(graph_path, inputs_path, tmp):
    """The master-weights graph as the float32 model it was exported from
    (every parameter in its master dtype, floating inputs float32) and its
    inputs converted (exactly): what the module computes without mixed
    precision, the reference both bfloat16 runs are measured against."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import torch
    import torch_reference as tr
    with open(graph_path) as f:
        graph = json.load(f)
    for p in graph["parameters"]:
        if "master_dtype" in p:
            p["dtype"] = p.pop("master_dtype")
    for d in graph["inputs"]:
        if d["dtype"] in ("bfloat16", "float16"):
            d["dtype"] = "float32"
    g32, in32 = os.path.join(tmp, "g32.json"), os.path.join(tmp, "in32.st")
    with open(g32, "w") as f:
        json.dump(graph, f)
    tensors = tr.read_safetensors(inputs_path)
    tr.write_safetensors(in32, {k: (v.float() if v.dtype in (torch.bfloat16, torch.float16) else v)
                                for k, v in tensors.items()})
    return g32, in32


def probe(name, shardc, tmp, rtol, train=False, param_dtype=None):
    spec, kwargs, shapes = zoo_models.ZOO[name]
    if train:  # batch statistics of one image are noise: 8 images instead
        shapes = {k: ([8] + list(v[1:]) if isinstance(v, list) and len(v) == 4 and v[0] == 1
                      else v) for k, v in shapes.items()}
    wrapped = json.dumps({"spec": spec, "kwargs": kwargs, "inputs": list(shapes),
                          **({"dropout": False} if train else {})})
    g, w, inp = (os.path.join(tmp, f) for f in ("g.json", "w.st", "in.st"))
    out, ref = os.path.join(tmp, "out.st"), os.path.join(tmp, "ref.st")
    py, export = sys.executable, os.path.join(ROOT, "tools", "export_torch.py")
    common = ["grad_zoo:with_loss", "--python-path", HERE, "--kwargs", wrapped, "--seed", "5"]
    steps = (
        ("export", [py, export] + common + ["--capture", "aten", "--input-shapes",
                                            json.dumps(shapes), "-o", g, "--weights", w]
         + (["--train"] if train else [])
         + (["--param-dtype", param_dtype] if param_dtype else [])),
        ("inputs", [py, os.path.join(ROOT, "tools", "torch_reference.py"),
                    "--make-inputs", g, "--seed", "4", "--out", inp]),
        ("shardc", [shardc, "run", g, "--grad", "output", "--world-size", "2", "--load", w,
                    "--inputs", inp, "--threads", "1", "--outputs", out]),
        ("eager", [py, export] + common + ["--eager", g, "--params", w, "--inputs", inp,
                                           "--outputs", ref, "--grad", "output"]
         + (["--train"] if train else [])))
    seconds = {}
    for what, cmd in steps:
        start = time.perf_counter()
        rc, msg, _ = run(cmd)
        seconds[what] = time.perf_counter() - start
        if rc == 2 and what == "shardc":
            return "refused", msg.replace(g, "g.json"), ""
        if rc:
            return "failed", "%s: %s" % (what, msg), ""
    worst, name, count, why = compare_gradients(out, ref)
    if why:
        return "differs", why, "%.1f" % seconds["shardc"]
    detail = "%d gradients, worst %s %.1e" % (count, name, worst)
    if param_dtype:
        # Master weights: both runs compute in bfloat16; each is measured
        # against the module in float32 and shardc's passes within twice
        # torch's own error (or rtol).
        g32, in32 = float32_twin(g, inp, tmp)
        exact = os.path.join(tmp, "f32.st")
        rc, msg, _ = run([py, export] + common + ["--eager", g32, "--params", w, "--inputs",
                                                  in32, "--outputs", exact, "--grad", "output"])
        if rc:
            return "failed", "float32 eager: " + msg, "%.1f" % seconds["shardc"]
        ours, _, _, _ = compare_gradients(out, exact)
        theirs, _, _, _ = compare_gradients(ref, exact)
        detail += "; against float32: shardc %.1e, torch %.1e" % (ours, theirs)
        return ("ok" if ours <= max(rtol, 2 * theirs) else "differs"), detail, \
            "%.1f" % seconds["shardc"]
    if worst > rtol:
        # Float32 itself may not reach rtol (batch norm by batch statistics
        # cancels heavily in backward; a deep video net's weight gradients
        # sum millions of terms): measure both float32 results against the
        # module in float64, and accept shardc's when it is within twice
        # torch's own error.
        exact = os.path.join(tmp, "f64.st")
        rc, msg, _ = run([py, "-c", F64_GRADS % dict(here=HERE, tools=os.path.join(ROOT, "tools"),
                                                    wrapped=wrapped, weights=w, inputs=inp,
                                                    out=exact,
                                                    mode="train" if train else "eval")])
        if rc:
            return "differs", detail + " (float64 reference failed: %s)" % msg, \
                "%.1f" % seconds["shardc"]
        ours, _, _, _ = compare_gradients(out, exact)
        theirs, _, _, _ = compare_gradients(ref, exact)
        detail += "; against float64: shardc %.1e, torch %.1e" % (ours, theirs)
        return ("ok" if ours <= max(rtol, 2 * theirs) else "differs"), detail, \
            "%.1f" % seconds["shardc"]
    return ("ok" if worst <= rtol else "differs"), detail, "%.1f" % seconds["shardc"]


# The module in float64 (in training mode under --train, else eval), its
# gradients as float64 grad.NAME (the exact reference where float32 cannot
# reach rtol).
F64_GRADS = r"""
import sys, json, torch
sys.path.insert(0, %(here)r); sys.path.insert(0, %(tools)r)
import grad_zoo, torch_reference as tr
spec = json.loads(%(wrapped)r)
model = grad_zoo.with_loss(spec["spec"], spec["kwargs"], spec["inputs"],
                           per_row=spec.get("per_row", False),
                           dropout=spec.get("dropout", True)).double().%(mode)s()
state = model.state_dict()
with torch.no_grad():
    for k, v in tr.read_safetensors(%(weights)r).items():
        if k in state: state[k].copy_(v.double())
inputs = {k: (v.double() if v.is_floating_point() else v)
          for k, v in tr.read_safetensors(%(inputs)r).items()}
# Tensors forward builds itself in float64 too, RAFT's coordinate grids
# included (torch.arange(...).float()).
torch.set_default_dtype(torch.float64)
torch.Tensor.float = lambda self, *args, **kwargs: self.to(torch.float64)
loss = model(**inputs)
names = [n for n, _ in model.named_parameters()]
grads = torch.autograd.grad(loss, [p for _, p in model.named_parameters()], allow_unused=True)
out = {"output": loss.detach()}
out.update({"grad." + n: g.contiguous() for n, g in zip(names, grads) if g is not None})
tr.write_safetensors(%(out)r, out)
"""


def compare_gradients(out, ref):
    """(worst error, its tensor, gradients compared, why they cannot be):
    each gradient's max |shardc - torch| over max(max |torch|, 1e-4 x the
    largest gradient element of the model). The floor keeps gradients that
    are zero in exact arithmetic (a key projection's bias under softmax) from
    comparing rounding noise with rounding noise."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import torch_reference as tr
    a, b = tr.read_safetensors(out), tr.read_safetensors(ref)
    if sorted(a) != sorted(b):
        return 0, "", 0, "tensors differ: shardc only %s, torch only %s" % (
            sorted(set(a) - set(b))[:3], sorted(set(b) - set(a))[:3])
    grads = [n for n in b if n.startswith("grad.")]
    scale = max((b[n].abs().max().item() for n in grads), default=0.0)
    worst, worst_name = 0.0, ""
    for n in grads:
        diff = (a[n].double() - b[n].double()).abs().max().item()
        err = diff / max(b[n].abs().max().item(), 1e-4 * scale, 1e-30)
        if err > worst or err != err:
            worst, worst_name = err, n
    return worst, worst_name, len(grads), ""


TORCH_TIMING = r"""
import sys, json, statistics, time, torch
sys.path.insert(0, %(here)r); sys.path.insert(0, %(tools)r)
import grad_zoo, torch_reference as tr
torch.set_num_threads(1)
torch.manual_seed(5)
spec = json.loads(%(wrapped)r)
model = grad_zoo.with_loss(spec["spec"], spec["kwargs"], spec["inputs"]).eval()
weights = tr.read_safetensors(%(weights)r)
state = model.state_dict()
with torch.no_grad():
    for k, v in weights.items():
        if k in state: state[k].copy_(v)
inputs = tr.read_safetensors(%(inputs)r)
times = []
for i in range(4):
    model.zero_grad(set_to_none=True)
    # timm's LeViT caches its attention biases in eval mode, graph and all:
    # a second backward through the cached tensor fails. Each step computes
    # them afresh, as a training step would.
    for m in model.modules():
        if isinstance(getattr(m, "attention_bias_cache", None), dict):
            m.attention_bias_cache = {}
    start = time.perf_counter()
    model(**inputs).backward()
    times.append(time.perf_counter() - start)
print(statistics.median(times[1:]))
"""


def shardc_timed(shardc, g, w, inp, extra):
    """(median warm seconds, forward peak bytes) of N = 1, one thread."""
    p = subprocess.run([shardc, "run", g, "--load", w, "--inputs", inp, "--threads", "1",
                        "--repeat", "5"] + extra, capture_output=True, text=True, env=ENV)
    if p.returncode:
        raise RuntimeError((p.stderr.strip().splitlines() or [""])[-1])
    median = float(re.search(r"outputs identical: median ([0-9.]+) s", p.stdout).group(1))
    peak = int(re.search(r"forward peak on ranks? [0-9.]+: ([0-9,]+) bytes", p.stdout)
               .group(1).replace(",", ""))
    return median, peak


def timing(names, shardc):
    print("| model | shardc fwd s | shardc fwd+bwd s | torch fwd+bwd s | shardc / torch | "
          "peak fwd B | peak fwd+bwd B |\n|---|---|---|---|---|---|---|")
    py, export = sys.executable, os.path.join(ROOT, "tools", "export_torch.py")
    for name in names:
        spec, kwargs, shapes = zoo_models.ZOO[name]
        wrapped = json.dumps({"spec": spec, "kwargs": kwargs, "inputs": list(shapes)})
        with tempfile.TemporaryDirectory() as tmp:
            g, w, inp = (os.path.join(tmp, f) for f in ("g.json", "w.st", "in.st"))
            rc, msg, _ = run([py, export, "grad_zoo:with_loss", "--python-path", HERE,
                              "--kwargs", wrapped, "--seed", "5", "--capture", "aten",
                              "--input-shapes", json.dumps(shapes), "-o", g, "--weights", w])
            if rc == 0:
                rc, msg, _ = run([py, os.path.join(ROOT, "tools", "torch_reference.py"),
                                  "--make-inputs", g, "--seed", "4", "--out", inp])
            if rc:
                print("| %s | %s |" % (name, msg), flush=True)
                continue
            try:
                fwd, fwd_peak = shardc_timed(shardc, g, w, inp, [])
                both, both_peak = shardc_timed(shardc, g, w, inp, ["--grad", "output"])
            except RuntimeError as e:
                print("| %s | %s |" % (name, e), flush=True)
                continue
            code = TORCH_TIMING % {"here": HERE, "tools": os.path.join(ROOT, "tools"),
                                   "wrapped": wrapped, "weights": w, "inputs": inp}
            p = subprocess.run([py, "-c", code], capture_output=True, text=True, env=ENV)
            if p.returncode:
                print("| %s | torch: %s |" % (name, p.stderr.strip().splitlines()[-1]))
                continue
            torch_s = float(p.stdout.strip().splitlines()[-1])
        print("| %s | %.3f | %.3f | %.3f | %.2f | %s | %s |" % (
            name, fwd, both, torch_s, both / torch_s, format(fwd_peak, ","),
            format(both_peak, ",")), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="these zoo models instead of the default list")
    ap.add_argument("--shardc", default=os.path.join(ROOT, "build", "bin", "shardc"))
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--train", action="store_true",
                    help="export and run the module in training mode (export_torch.py "
                         "--train: batch norm by batch statistics), dropout set to 0 on "
                         "both sides")
    ap.add_argument("--keep-dropout", action="store_true",
                    help="with --train: keep the models' dropout (the graph's own masks); "
                         "check two SGD steps byte-identical at N = 1 and 2 instead")
    ap.add_argument("--param-dtype", choices=["bfloat16", "float16"],
                    help="master weights (export_torch.py --param-dtype): shardc's and "
                         "torch's bfloat16 gradients each measured against the float32 "
                         "module; ok when shardc's error is within twice torch's")
    ap.add_argument("--timing", action="store_true",
                    help="time shardc's forward and backward against torch's instead")
    args = ap.parse_args()
    if args.timing:
        timing(args.only or DEFAULT, args.shardc)
        return
    print("| model | --grad at N = 2 | detail | shardc s |\n|---|---|---|---|")
    if args.train and args.keep_dropout:
        print_rows(args.only or DEFAULT, lambda name, tmp: probe_dropout(name, args.shardc, tmp))
        return
    print_rows(args.only or DEFAULT,
               lambda name, tmp: probe(name, args.shardc, tmp, args.rtol, args.train,
                                       args.param_dtype))


def print_rows(names, probe_one):
    """One markdown row per model of probe_one(name, tmp) -> (status,
    detail, seconds), each in a fresh temporary folder, then the counts."""
    counts = {}
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            status, detail, seconds = probe_one(name, tmp)
        counts[status] = counts.get(status, 0) + 1
        print("| %s | %s | %s | %s |" % (name, status, detail.replace("|", "\\|"), seconds),
              flush=True)
    print("\n" + ", ".join("%d %s" % (n, s) for s, n in sorted(counts.items())))


if __name__ == "__main__":
    main()
