#!/opt/shardc-venv/bin/python
"""shardc N = 1 forward against torch eager, one thread each, measured in
the same run, for the zoo's transformer family (or --only NAME...): issue
16's speed target (median ratio <= 1.5 over the zoo, <= 1.0 for transformers).

    /opt/shardc-venv/bin/python bench/speed_ratio.py [--only NAME]... [--runs R]
        [--repeat W] [--threads T] [--shardc build/bin/shardc] [--workdir DIR]

Per model (bench/zoo_models.py's definitions): export through ATen capture,
one `shardc run` to draw the parameters, torch eager on them checked against
shardc's outputs (max-norm relative 1e-5, as bench/zoo.py), then R rounds.
Each round is one `shardc run --threads T --repeat W` (a fresh process: its
first forward is cold, the W repeats after it warm) and W torch forwards
(the same module called again, after two warm-up calls) with
torch.set_num_threads(T); T is 1 unless --threads says otherwise. A
round's warm figure is the median of its W forwards on each side. Both
sides report wall seconds and the CPU seconds of the thread that ran the
forward (shardc's thread_cpu_seconds, torch's time.thread_time()): on a
shared machine the CPU figure is the one other processes do not inflate;
at T > 1 it leaves out the other threads' work, so compare wall. Ratios are medians over the R rounds:
  ratio warm = shardc warm / torch warm: the steady state of a loop, like
               for like (the target's figure);
  ratio cold = shardc's first forward / torch warm: what one forward in a
               fresh process costs (activations first-touched, caches
               cold) against torch's steady state (torch's own first call
               is not timed).
`shardc process CPU s` is the whole `shardc run` (compile, init, the
forwards, report: user + sys from getrusage).
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import zoo  # noqa: E402  (export steps, environment: one BLAS/OpenMP thread)
import zoo_models  # noqa: E402

TOOLS, PY = zoo.TOOLS, zoo.PY


def transformer_family():
    return [n for n in zoo_models.ZOO
            if n.startswith(("nn.Transformer", "nn.MultiheadAttention", "HF "))
            or "vit" in n.lower() or "swin" in n.lower()]


def prepare(name, shardc, tmp):
    """Exports `name`, draws parameters with shardc, checks eager against it."""
    spec, kwargs, shapes = zoo_models.ZOO[name]
    g, inp = os.path.join(tmp, "g.json"), os.path.join(tmp, "in.st")
    params, outs, eager = (os.path.join(tmp, f) for f in ("p.st", "o.st", "eager.st"))
    if not (os.path.exists(g) and os.path.exists(inp)):  # a --workdir's earlier export
        zoo.step("export", [PY, os.path.join(TOOLS, "export_torch.py"), spec, "--capture",
                            "aten", "--python-path", HERE, "--kwargs", json.dumps(kwargs),
                            "--input-shapes", json.dumps(shapes), "-o", g])
        zoo.step("inputs", [PY, os.path.join(TOOLS, "torch_reference.py"), "--make-inputs", g,
                            "--seed", "4", "--out", inp])
    zoo.step("shardc run", [shardc, "run", g, "--seed", "7", "--threads", "1", "--inputs", inp,
                            "--outputs", outs, "--save-params", params])
    zoo.step("torch eager", [PY, os.path.join(TOOLS, "export_torch.py"), spec, "--python-path",
                             HERE, "--kwargs", json.dumps(kwargs), "--eager", g, "--params",
                             params, "--inputs", inp, "--outputs", eager])
    zoo.step("compare", [PY, os.path.join(TOOLS, "torch_reference.py"), "--compare", outs,
                         eager, "--rtol", "1e-5"])
    return g, inp, params


def torch_forward(name, graph, params_file, inputs_file, calls, threads):
    """A closure timing `calls` eager forwards on `threads` threads; returns
    the medians of (wall s, thread CPU s)."""
    import torch
    spec, kwargs, _ = zoo_models.ZOO[name]
    model, call = zoo.eager_model(spec, kwargs, graph, params_file, inputs_file)
    torch.set_num_threads(threads)  # eager_model sets one

    def once():
        with torch.no_grad():
            w, c = time.perf_counter(), time.thread_time()
            model(**call)
            return time.perf_counter() - w, time.thread_time() - c

    def run():
        times = [once() for _ in range(calls)]
        return (statistics.median(t[0] for t in times), statistics.median(t[1] for t in times))
    once(), once()  # warm-up
    return run


def shardc_forward(shardc, g, inp, repeats, threads):
    """(cold forward wall s, median warm wall s, median warm thread CPU s,
    the whole process's user + sys CPU s) of one `shardc run --repeat`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([shardc, "run", g, "--seed", "7", "--threads", str(threads),
                          "--inputs", inp,
                          "--repeat", str(repeats), "--report", "json"], capture_output=True,
                         text=True, env=zoo.ENV, check=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    rank = json.loads(out)["ranks"][0]
    process = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    warm = rank["forward_repeats"]
    return (rank["forward_seconds"], statistics.median(r["seconds"] for r in warm),
            statistics.median(r["thread_cpu_seconds"] for r in warm), process)


def blas_core(shardc, g, inp):
    """The OpenBLAS kernel family shardc's sgemm ran (OPENBLAS_VERBOSE=2)."""
    p = subprocess.run([shardc, "run", g, "--seed", "7", "--threads", "1", "--inputs", inp],
                       capture_output=True, text=True, env=dict(zoo.ENV, OPENBLAS_VERBOSE="2"))
    for line in (p.stdout + p.stderr).splitlines():
        if line.startswith("Core:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shardc", default=os.path.join(zoo.ROOT, "build", "bin", "shardc"))
    ap.add_argument("--only", action="append", help="a zoo model name (repeatable)")
    ap.add_argument("--runs", type=int, default=7, help="timed rounds per model (7)")
    ap.add_argument("--repeat", type=int, default=5,
                    help="warm forwards per round on each side (5)")
    ap.add_argument("--threads", type=int, default=1,
                    help="threads on each side: shardc --threads, torch.set_num_threads (1)")
    ap.add_argument("--workdir", help="keep exports here and reuse them on the next run "
                    "(default: a temporary directory)")
    args = ap.parse_args()
    names = args.only or transformer_family()
    unknown = [n for n in names if n not in zoo_models.ZOO]
    if unknown:
        print("speed_ratio.py: error: unknown model(s) %s" % unknown, file=sys.stderr)
        return 2
    load0 = os.getloadavg()[0]
    rows, core = [], None
    with tempfile.TemporaryDirectory() as scratch:
        for name in names:
            tmp = os.path.join(args.workdir or scratch, name.replace(" ", "_").replace("/", "_"))
            os.makedirs(tmp, exist_ok=True)
            try:
                g, inp, params = prepare(name, args.shardc, tmp)
            except zoo.Failed as e:
                print("%-32s fails: %s" % (name, e), flush=True)
                continue
            core = core or blas_core(args.shardc, g, inp)
            eager = torch_forward(name, json.load(open(g)), params, inp, args.repeat,
                                  args.threads)
            cold, s_wall, s_cpu, s_proc, t_wall, t_cpu = [], [], [], [], [], []
            for _ in range(args.runs):
                c0, w, c, p = shardc_forward(args.shardc, g, inp, args.repeat, args.threads)
                cold.append(c0), s_wall.append(w), s_cpu.append(c), s_proc.append(p)
                w, c = eager()
                t_wall.append(w), t_cpu.append(c)
            med = statistics.median
            row = dict(model=name, cold=med(cold), s_wall=med(s_wall), s_min=min(s_wall),
                       s_cpu=med(s_cpu), s_proc=med(s_proc),
                       t_wall=med(t_wall), t_min=min(t_wall), t_cpu=med(t_cpu))
            row["r_wall"] = row["s_wall"] / row["t_wall"]
            row["r_cpu"] = row["s_cpu"] / row["t_cpu"]
            row["r_cold"] = row["cold"] / row["t_wall"]
            rows.append(row)
            print("%-32s warm wall %.4f / %.4f = %.2f   cpu %.4f / %.4f = %.2f   cold %.4f = %.2f"
                  % (name, row["s_wall"], row["t_wall"], row["r_wall"], row["s_cpu"],
                     row["t_cpu"], row["r_cpu"], row["cold"], row["r_cold"]), flush=True)
    print()
    print("| model | shardc cold fwd s | shardc warm fwd s (median, min) | shardc warm CPU s "
          "| shardc process CPU s | torch warm fwd s (median, min) | torch warm CPU s "
          "| ratio warm wall | ratio warm CPU | ratio cold wall |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %.4f | %.4f, %.4f | %.4f | %.3f | %.4f, %.4f | %.4f | %.2f | %.2f | %.2f |"
              % (r["model"], r["cold"], r["s_wall"], r["s_min"], r["s_cpu"], r["s_proc"],
                 r["t_wall"], r["t_min"], r["t_cpu"], r["r_wall"], r["r_cpu"], r["r_cold"]))
    if rows:
        print("\nmedian ratio over %d models: warm wall %.2f, warm CPU %.2f, cold wall %.2f "
              "(%d rounds of %d warm forwards each, %d thread(s) each side; load average "
              "%.1f before, %.1f after, %d cores; OpenBLAS core %s)" % (
                  len(rows), statistics.median(r["r_wall"] for r in rows),
                  statistics.median(r["r_cpu"] for r in rows),
                  statistics.median(r["r_cold"] for r in rows), args.runs, args.repeat,
                  args.threads, load0,
                  os.getloadavg()[0], os.cpu_count(), core))
    return 0


if __name__ == "__main__":
    sys.exit(main())
