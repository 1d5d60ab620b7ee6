"""Which zoo models `shardc run --data-parallel` splits (bench/README.md,
"Data-parallel coverage").

Per model of bench/zoo_models.py: export at a batch of 2 (the zoo's batch-1
inputs doubled), run the replicated forward at N = 1 and the data-parallel
forward at N = 2 (one row per rank) on the same inputs, and compare the
outputs byte for byte. Prints one markdown row per model: split (outputs
identical), refused (shardc's exit-2 message) or failed.

    /opt/shardc-venv/bin/python bench/data_parallel_zoo.py [--only NAME ...]

With --timing B: export the given models at batch B and time N = 2 ranks
(one kernel thread each) running the whole batch on both ranks (replicated,
the only choice before a model could be split) against each rank running
its half (--data-parallel): the median of 3 warm forwards (`--repeat 3`,
slowest rank) and the largest per-rank forward peak, with their ratios.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import zoo_models  # noqa: E402

ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")

# Inputs whose batch is not dim 0 (`shardc run --batch-dim`).
BATCH_DIMS = {"nn.TransformerEncoder seq-first": {"src": 1}}

# One model per family the exporter handles differently (transformers with
# and without padding masks, ViTs, windowed attention, convnets,
# segmentation, video, speech, optical flow, timm's attention variants).
DEFAULT = [
    "nn.TransformerEncoder", "nn.TransformerEncoder seq-first", "nn.Transformer",
    "nn.MultiheadAttention", "torchvision resnet18", "torchvision mobilenet_v3_small",
    "torchvision VisionTransformer tiny", "torchvision SwinTransformer tiny",
    "torchvision swin_t", "torchvision convnext_tiny", "torchvision densenet121",
    "torchvision efficientnet_b0", "torchvision googlenet", "torchvision inception_v3",
    "torchvision shufflenet_v2_x0_5", "torchvision squeezenet1_1",
    "torchvision regnet_y_400mf", "torchvision mnasnet0_5", "torchvision fcn_resnet50",
    "torchvision lraspp_mobilenet_v3_large", "torchvision r3d_18", "torchvision raft_small",
    "torchaudio wav2vec2 tiny", "torchaudio Conformer", "HF GPT-2", "HF Llama",
    "HF Mixtral (MoE)", "HF BERT", "HF T5", "HF ViT", "HF BART", "HF Whisper",
    "HF Wav2Vec2", "HF Falcon", "HF DeBERTa-v2", "HF Llama (attention mask)",
    "HF BERT (attention mask)", "HF CLIP vision", "HF Swin", "HF SegFormer",
    "timm vit_tiny_patch16_224", "timm levit_128s", "timm beit_base_patch16_224",
    "timm cait_xxs24_224", "timm mixer_s16_224", "timm hiera_tiny_224",
    "timm xcit_nano_12_p16_224", "timm swin_tiny_patch4_window7_224",
    "timm coat_lite_tiny", "timm maxvit_nano_rw_256", "timm mobilevit_xxs",
]


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    lines = [l for l in (p.stderr + p.stdout).splitlines() if l.strip()]
    errors = [l for l in lines if "error" in l.lower()] or lines or [""]
    return p.returncode, errors[-1].split("error: ", 1)[-1]


def probe(name, shardc, tmp):
    spec, kwargs, shapes = zoo_models.ZOO[name]
    dims = BATCH_DIMS.get(name, {})
    shapes = {k: ([2] + v[1:] if isinstance(v, list) and v and v[0] == 1 and k not in dims
                  else v) for k, v in shapes.items()}
    batch_dims = sum((["--batch-dim", "%s=%d" % kv] for kv in dims.items()), [])
    g, inp = os.path.join(tmp, "g.json"), os.path.join(tmp, "in.st")
    rep, dp = os.path.join(tmp, "rep.st"), os.path.join(tmp, "dp.st")
    py = sys.executable
    for what, cmd in (
            ("export", [py, os.path.join(ROOT, "tools", "export_torch.py"), spec,
                        "--capture", "aten", "--python-path", HERE, "--kwargs",
                        json.dumps(kwargs), "--input-shapes", json.dumps(shapes), "-o", g]),
            ("inputs", [py, os.path.join(ROOT, "tools", "torch_reference.py"),
                        "--make-inputs", g, "--seed", "4", "--out", inp]),
            ("replicated", [shardc, "run", g, "--seed", "7", "--inputs", inp,
                            "--threads", "1", "--outputs", rep])):
        rc, msg = run(cmd)
        if rc:
            return "failed", "%s: %s" % (what, msg)
    rc, msg = run([shardc, "run", g, "--data-parallel", "--world-size", "2", "--seed", "7",
                   "--inputs", inp, "--threads", "1", "--outputs", dp] + batch_dims)
    if rc == 2:
        return "refused", msg.replace(g, "g.json")
    if rc:
        return "failed", msg
    same = open(rep, "rb").read() == open(dp, "rb").read()
    return ("split", "") if same else ("failed", "outputs differ from the replicated run")


def export(name, batch, tmp):
    """The model exported at `batch` rows and deterministic inputs; None and
    the reason when a step fails."""
    spec, kwargs, shapes = zoo_models.ZOO[name]
    shapes = {k: ([batch] + v[1:] if isinstance(v, list) and v else v)
              for k, v in shapes.items()}
    g, inp = os.path.join(tmp, "g.json"), os.path.join(tmp, "in.st")
    for what, cmd in (
            ("export", [sys.executable, os.path.join(ROOT, "tools", "export_torch.py"), spec,
                        "--capture", "aten", "--python-path", HERE, "--kwargs",
                        json.dumps(kwargs), "--input-shapes", json.dumps(shapes), "-o", g]),
            ("inputs", [sys.executable, os.path.join(ROOT, "tools", "torch_reference.py"),
                        "--make-inputs", g, "--seed", "4", "--out", inp])):
        rc, msg = run(cmd)
        if rc:
            return None, "%s: %s" % (what, msg)
    return (g, inp), ""


def timed(shardc, g, inp, extra):
    """(median warm forward s, largest per-rank forward peak B) of N = 2."""
    p = subprocess.run([shardc, "run", g, "--world-size", "2", "--seed", "7", "--inputs", inp,
                        "--threads", "1", "--repeat", "3"] + extra,
                       capture_output=True, text=True, env=ENV)
    if p.returncode:
        raise RuntimeError(p.stderr.strip().splitlines()[-1])
    median = float(re.search(r"outputs identical: median ([0-9.]+) s", p.stdout).group(1))
    peaks = [int(m.group(1).replace(",", "")) for m in re.finditer(
        r"^\s*[0-9][0-9.]*\s+[0-9,]+\s+[0-9,]+\s+([0-9,]+)", p.stdout, re.M)]
    return median, max(peaks)


def timing(names, batch, shardc):
    print("| model (batch %d) | replicated N=2 fwd s | data-parallel N=2 fwd s | ratio | "
          "replicated peak/rank B | data-parallel peak/rank B | ratio |" % batch)
    print("|---|---|---|---|---|---|---|")
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            files, why = export(name, batch, tmp)
            if files is None:
                print("| %s | %s |" % (name, why), flush=True)
                continue
            rep_s, rep_peak = timed(shardc, *files, [])
            dp_s, dp_peak = timed(shardc, *files, ["--data-parallel"])
        print("| %s | %.3f | %.3f | %.2f | %s | %s | %.2f |" % (
            name, rep_s, dp_s, dp_s / rep_s, format(rep_peak, ","), format(dp_peak, ","),
            dp_peak / rep_peak), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="these zoo models instead of the default list")
    ap.add_argument("--shardc", default=os.path.join(ROOT, "build", "bin", "shardc"))
    ap.add_argument("--timing", type=int, metavar="B",
                    help="time replicated against data-parallel N = 2 at batch B instead")
    args = ap.parse_args()
    names = args.only or DEFAULT
    if args.timing:
        timing(names, args.timing, args.shardc)
        return
    print("| model | data-parallel N = 2 | reason |\n|---|---|---|")
    counts = {}
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            status, reason = probe(name, args.shardc, tmp)
        counts[status] = counts.get(status, 0) + 1
        print("| %s | %s | %s |" % (name, status, reason.replace("|", "\\|")), flush=True)
    print("\n" + ", ".join("%d %s" % (n, s) for s, n in sorted(counts.items())))


if __name__ == "__main__":
    main()
