"""What bench/masked_attention.py and bench/gqa_attention.py share: HF Llama
(bench/zoo_hf.py) exported through ATen capture, `shardc run` on the export
with its exact peaks, and the scripts' common command line."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def export_llama(kwargs, inputs, out):
    """zoo_hf.llama(**kwargs) exported with these input declarations to out."""
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "export_torch.py"),
                    "zoo_hf:llama", "--python-path", os.path.join(ROOT, "bench"),
                    "--kwargs", json.dumps(kwargs), "--input-shapes", json.dumps(inputs),
                    "-o", out], check=True, stdout=subprocess.DEVNULL)


def run_shardc(shardc, graph, world, repeat=0, outputs=None):
    """(largest per-rank forward peak, rank 0's forward seconds) of one
    `shardc run --threads 1`: the cold forward's seconds, or with repeat > 0
    the median of the warm repeats'. The peaks must be the predicted ones."""
    cmd = [shardc, "run", graph, "--world-size", str(world), "--seed", "3", "--threads", "1",
           "--report", "json"]
    if repeat:
        cmd += ["--repeat", str(repeat)]
    if outputs:
        cmd += ["--outputs", outputs]
    report = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    if not report["predictions_hold"]:
        raise SystemExit("%s: predicted != measured memory" % graph)
    ranks = report["ranks"]
    warm = [r["seconds"] for r in ranks[0].get("forward_repeats", [])]
    seconds = statistics.median(warm) if warm else ranks[0]["forward_seconds"]
    return max(r["forward"]["peak_bytes"] for r in ranks), seconds


def torch_warm_seconds(model, repeat=3, **inputs):
    """torch eager's forward of `model` on `inputs` at one thread, without
    gradients: the median of `repeat` warm runs after a first one."""
    import time
    import torch
    torch.set_num_threads(1)
    times = []
    with torch.no_grad():
        for _ in range(repeat + 1):
            start = time.perf_counter()
            model(**inputs)
            times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def parse_args(doc, default_seq, prefix, repeat=None):
    """The scripts' command line: --seq, --build, --workdir (and --repeat
    when `repeat` is its default). Returns (args, shardc binary, work dir)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--seq", type=int, nargs="+", default=default_seq)
    if repeat is not None:
        parser.add_argument("--repeat", type=int, default=repeat)
    parser.add_argument("--build", default=os.environ.get("SHARDC_BUILD_DIR",
                                                          os.path.join(ROOT, "build")))
    parser.add_argument("--workdir")
    args = parser.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix=prefix)
    os.makedirs(work, exist_ok=True)
    return args, os.path.join(args.build, "bin", "shardc"), work
