#!/opt/shardc-venv/bin/python
"""Model zoo benchmark (skeleton): export each model of bench/zoo_models.py
through ATen capture, run it with shardc at N = 1 and N = 4, compare with
torch eager on shardc's own parameters, and write docs/models.md.

    /opt/shardc-venv/bin/python bench/zoo.py [--shardc build/bin/shardc]
        [--only NAME]... [--family WORD]... [--out docs/models.md]

Per model: parameters, export seconds, shardc forward seconds (N = 1, its
own report) vs torch eager forward seconds (median of 5, same thread count:
one), forward peak per rank at N = 4 vs unsharded parameter bytes, status and,
when it fails, the reason (the first line of the failing step's error).
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
TOOLS = os.path.join(ROOT, "tools")
sys.path.insert(0, HERE)
sys.path.insert(0, TOOLS)
sys.path.insert(0, os.path.join(ROOT, "examples"))
import make_models  # noqa: E402  (param_count)

import zoo_models  # noqa: E402

PY = sys.executable
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")


class Failed(Exception):
    pass


def step(what, cmd):
    t = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    if p.returncode != 0:
        lines = [l for l in (p.stderr + p.stdout).splitlines() if l.strip()]
        err = [l for l in lines if "error" in l.lower()] or lines or ["exit %d" % p.returncode]
        msg = err[-1].strip().split("error: ", 1)[-1]
        msg = re.sub(r"\S*/site-packages/", "", msg)
        msg = msg.replace(" (docs/exporter.md lists the ATen ops the exporter maps)", "")
        msg = msg.replace(" (docs/exporter.md lists what is)", "")
        raise Failed("%s: %s (exit %d)" % (what, msg, p.returncode))
    return p.stdout, time.time() - t


# Models over this many parameters (vit_h_14, regnet_y_128gf, ...) are timed
# with one torch eager run instead of five: on 2 shared cores one forward
# takes seconds. The zoo is a benchmark, not CI.
HUGE_PARAMS = 100_000_000


def eager_model(spec, kwargs, graph, params_file, inputs_file):
    """The model in eval mode on shardc's parameters, one torch thread, and
    its forward's keyword arguments read from the inputs file."""
    import torch
    import torch_reference as tr
    torch.set_num_threads(1)
    mod, _, attr = spec.partition(":")
    model = getattr(__import__(mod), attr)(**kwargs).eval()
    params = tr.read_safetensors(params_file)
    named = dict(model.named_parameters())
    with torch.no_grad():
        for d in graph["parameters"]:
            named[d["name"]].copy_(params[d["name"]])
    inputs = tr.read_safetensors(inputs_file)
    return model, {d["name"]: inputs[d["name"]] for d in graph["inputs"]}


def eager_seconds(spec, kwargs, graph, params_file, inputs_file, repeats=5):
    import torch
    model, call = eager_model(spec, kwargs, graph, params_file, inputs_file)
    times = []
    with torch.no_grad():
        for _ in range(repeats):
            t = time.time()
            model(**call)
            times.append(time.time() - t)
    return sorted(times)[len(times) // 2]


def run_model(name, shardc, tmp):
    spec, kwargs, shapes = zoo_models.ZOO[name]
    row = {"model": name, "params": "", "export_s": "", "shardc_s": "", "torch_s": "",
           "peak4": "", "unsharded": "", "status": "ok", "reason": ""}
    g = os.path.join(tmp, "g.json")
    try:
        _, row["export_s"] = step("export", [
            PY, os.path.join(TOOLS, "export_torch.py"), spec, "--capture", "aten",
            "--python-path", HERE,
            "--kwargs", json.dumps(kwargs), "--input-shapes", json.dumps(shapes), "-o", g])
        graph = json.load(open(g))
        row["params"] = make_models.param_count(graph)
        inp = os.path.join(tmp, "in.st")
        step("inputs", [PY, os.path.join(TOOLS, "torch_reference.py"), "--make-inputs", g,
                        "--seed", "4", "--out", inp])
        outs, params = {}, {}
        for world in (1, 4):
            outs[world] = os.path.join(tmp, "o%d.st" % world)
            params[world] = os.path.join(tmp, "p%d.st" % world)
            out, _ = step("shardc run N=%d" % world, [
                shardc, "run", g, "--world-size", str(world), "--seed", "7", "--inputs", inp,
                # one kernel thread per rank, as torch's one thread (the default is
                # cores / ranks, which made "one thread" untrue at N = 1)
                "--threads", "1",
                "--outputs", outs[world], "--save-params", params[world]])
            if "predicted == measured on every rank: yes" not in out:
                raise Failed("shardc run N=%d: predicted != measured" % world)
            if world == 1:
                row["shardc_s"] = float(re.search(r"forward ([0-9.]+) s", out).group(1))
                row["unsharded"] = int(re.search(
                    r"unsharded parameter bytes[^:]*: ([0-9,]+)", out).group(1).replace(",", ""))
            else:
                peaks = [int(m.group(1).replace(",", "")) for m in re.finditer(
                    r"^\s*[0-9][0-9.]*\s+[0-9,]+\s+[0-9,]+\s+([0-9,]+)", out, re.M)]
                row["peak4"] = max(peaks) if peaks else ""
        for kind in ("outputs", "params"):
            a, b = (outs if kind == "outputs" else params).values()
            if open(a, "rb").read() != open(b, "rb").read():
                raise Failed("N=1 and N=4 %s differ" % kind)
        eager = os.path.join(tmp, "eager.st")
        step("torch eager", [PY, os.path.join(TOOLS, "export_torch.py"), spec,
                             "--python-path", HERE, "--kwargs", json.dumps(kwargs),
                             "--eager", g, "--params", params[1], "--inputs", inp,
                             "--outputs", eager])
        step("compare", [PY, os.path.join(TOOLS, "torch_reference.py"), "--compare",
                         outs[1], eager, "--rtol", "1e-5"])
        row["torch_s"] = eager_seconds(spec, kwargs, graph, params[1], inp,
                                       1 if row["params"] > HUGE_PARAMS else 5)
    except Failed as e:
        row["status"], row["reason"] = "fails", str(e)
    return row


def fmt(v, f="%.3f"):
    return (f % v) if isinstance(v, float) else str(v)


def write_table(rows, path, seconds):
    out = ["# Model zoo", "",
           "Written by `bench/zoo.py` (%.0f s on this machine, torch %s, one thread for "
           "shardc and torch). Each model is exported through ATen capture "
           "(docs/exporter.md), run by `shardc run` at N = 1 and N = 4 (byte-identical "
           "parameters and outputs required) and compared with torch eager in eval mode "
           "on shardc's parameters (max-norm relative error <= 1e-5). Forward seconds: "
           "shardc's own report of one run (`wall time ... forward`, ms resolution) and "
           "the median of 5 torch eager runs (one run over 100 M parameters); one run on a machine shared with other "
           "jobs, so indicative only. `fwd peak/rank N=4` is the largest per-rank "
           "forward peak at N = 4 (gathered units and activations included), next to "
           "the unsharded parameter bytes." % (
               seconds, __import__("torch").__version__.split("+")[0]), "",
           "| model | parameters | export s | shardc fwd s (N=1) | torch fwd s | "
           "fwd peak/rank N=4 B | unsharded B | status | reason |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append("| %s |" % " | ".join(fmt(r[k]) for k in (
            "model", "params", "export_s", "shardc_s", "torch_s", "peak4", "unsharded",
            "status", "reason")).replace("\n", " "))
    ok = sum(r["status"] == "ok" for r in rows)
    out += ["", "%d of %d models run." % (ok, len(rows)), "",
            "CI runs the fast subset `bench/zoo.py --ci` (test/lit/models/zoo-ci.test): "
            "%s." % ", ".join(zoo_models.CI), ""]
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(out))
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shardc", default=os.path.join(ROOT, "build", "bin", "shardc"))
    ap.add_argument("--only", action="append", help="a model name (repeatable)")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "models.md"))
    ap.add_argument("--family", action="append",
                    help="the models whose name starts with this word, e.g. timm (repeatable)")
    ap.add_argument("--ci", action="store_true",
                    help="only the fast subset CI runs (zoo_models.CI); exit 1 if one fails")
    args = ap.parse_args()
    names = args.only or (zoo_models.CI if args.ci else list(zoo_models.ZOO))
    if args.family:
        names = [n for n in names if n.split(" ", 1)[0] in args.family]
    unknown = [n for n in names if n not in zoo_models.ZOO]
    if unknown:
        print("zoo.py: error: unknown model(s) %s" % unknown, file=sys.stderr)
        return 2
    t0 = time.time()
    rows = []
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            r = run_model(name, args.shardc, tmp)
        print("%-36s %s %s" % (name, r["status"], r["reason"]), flush=True)
        rows.append(r)
    write_table(rows, args.out, time.time() - t0)
    return 1 if args.ci and any(r["status"] != "ok" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
