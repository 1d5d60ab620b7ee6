#!/usr/bin/python3
"""Init at 70B-405B scale (issue 20): one rank of a large world, measured.

    /usr/bin/python3 bench/init_scale.py [--build build] [--models 7b,70b,405b]
        [--worlds 8,64,512] [--dtypes float32,bfloat16] [--workdir DIR]
        [--save 70b:64:float32] [--json results.json]

For every Llama preset (examples/make_llama.py: llama2-7b, llama3-70b,
llama3.1-405b), dtype and world size N it prints one row:

- compile s: `shardc compile --world-size N --emit plan` wall time;
- predicted B: rank 0's predicted init peak (its shards: Llama has no
  non-shardable parameter, and rank 0 holds the most rows);
- 1-core s / all-core s: rank 0's init_seconds from `shardc run --init-only
  --ranks 0 --report json`, with `--threads 1` under `taskset -c 0`, and
  with `--threads <cores>`;
- RSS: the OS peak RSS while the rank ran (VmHWM), minus the RSS before
  it started, minus the accounted peak: what the OS saw beyond the exact
  accounting (the target is <= 64 MiB);
- pred==meas: the report's predictions_hold;
- job s: the projected whole-job init time with one core per rank: the
  slowest of rank 0 and every owner rank of a non-shardable parameter
  (each measured with --ranks), since shardable ranks need no
  communication and every rank holds at most rank 0's rows;
- torch s: torch 1.13 initialising one decoder layer on CPU
  (bench/torch_llama_layer.py) in this run, times the layer count (the
  whole model on one process, embeddings excluded), 1 thread and all.

A configuration whose rank does not fit in the memory available now is
skipped with the reason. --save MODEL:N:DTYPE (repeatable) also runs that
rank with `--save` into --workdir and times `dd` writing the same number
of bytes to the same directory (without and with conv=fdatasync; shardc's
save does not sync). `uptime` is recorded before and after every row.
shardc's page policy (runtime/PagePolicy.h) follows SHARDC_HUGE_PAGES and
SHARDC_PREFAULT from the environment: docs/init-scale.md compares the
runtime's earlier behaviour (SHARDC_HUGE_PAGES=1 SHARDC_PREFAULT=0) with
the policy in one run.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "examples"))
import make_llama  # noqa: E402
import make_models  # noqa: E402

MODELS = {"7b": "llama2-7b", "8b": "llama3-8b", "70b": "llama3-70b",
          "405b": "llama3.1-405b"}
DTYPE_BYTES = {"float32": 4, "bfloat16": 2}


def load():
    return open("/proc/loadavg").read().split()[0]


def mem_available():
    for line in open("/proc/meminfo"):
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def rank0_bytes(graph, world):
    """Rank 0's shard bytes: ceil(d0 / N) rows of every parameter."""
    total = 0
    for p in graph["parameters"]:
        shape = p["shape"]
        row = 1
        for n in shape[1:]:
            row *= n
        rows = -(-shape[0] // world) if shape else 1
        total += rows * row * DTYPE_BYTES[p["dtype"]]
    return total


def timed(cmd, **kw):
    """Wall seconds and the process; proc.cpu = (user, sys) CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc.cpu = (after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime)
    return seconds, proc


def run_rank(shardc, graph_path, world, rank, threads, pin, extra=()):
    cmd = [shardc, "run", graph_path, "--world-size", str(world), "--init-only",
           "--ranks", str(rank), "--threads", str(threads), "--report", "json",
           "--timeout", "3600"] + list(extra)
    if pin:
        cmd = ["taskset", "-c", "0"] + cmd
    seconds, proc = timed(cmd)
    if proc.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), proc.returncode,
                                                proc.stderr.strip()[:400]))
    report = json.loads(proc.stdout)
    report["wall_seconds"] = seconds
    report["cpu"] = proc.cpu
    return report


def summarize(report):
    r = report["ranks"][0]
    proc = report["process"]
    return {"init_seconds": r["init_seconds"], "peak_bytes": r["init"]["peak_bytes"],
            "predicted_peak_bytes": r["init"]["predicted_peak_bytes"],
            "predictions_hold": report["predictions_hold"],
            "rss_before": proc["rss_before_bytes"], "rss_peak": proc["peak_rss_bytes"],
            "rss_extra": proc["peak_rss_bytes"] - proc["rss_before_bytes"]
            - proc["accounted_peak_bytes"],
            "save_seconds": r.get("save_seconds", 0), "wall_seconds": report["wall_seconds"],
            "user_seconds": report["cpu"][0], "sys_seconds": report["cpu"][1],
            "owners": sorted({p["owner"] for p in report["non_shardable"]})}


def torch_layer(preset, dtype, threads):
    cmd = ["/usr/bin/python3", os.path.join(HERE, "torch_llama_layer.py"), "--preset", preset,
           "--dtype", dtype, "--threads", str(threads), "--repeats", "2",
           "--max-elements", str(1 << 23)]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    return json.loads(proc.stdout)


def dd_seconds(path, nbytes, sync):
    mib = max(1, nbytes >> 20)
    cmd = ["dd", "if=/dev/zero", "of=" + path, "bs=1M", "count=%d" % mib]
    if sync:
        cmd.append("conv=fdatasync")
    seconds, proc = timed(cmd)
    os.unlink(path)
    if proc.returncode:
        raise RuntimeError("dd failed: " + proc.stderr)
    return seconds, mib << 20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("SHARDC_BUILD_DIR", "build"))
    ap.add_argument("--models", default="7b,70b,405b")
    ap.add_argument("--worlds", default="8,64,512")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--workdir", default="/tmp/shardc-init-scale")
    ap.add_argument("--save", action="append", default=[],
                    help="MODEL:N:DTYPE, e.g. 70b:64:float32 (repeatable)")
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    shardc = os.path.abspath(os.path.join(args.build, "bin", "shardc"))
    cores = os.cpu_count()
    os.makedirs(args.workdir, exist_ok=True)
    results = {"cores": cores, "load_start": load(), "rows": [], "torch": [], "save": []}
    print("# cores %d, MemAvailable %.1f GiB, load %s" % (cores, mem_available() / 2**30,
                                                           load()))
    print("| model | dtype | N | compile s | predicted B (rank 0) | 1-core s | all-core s "
          "| GB/s 1-core | user+sys s 1-core | RSS beyond accounted | pred==meas | job s (1 core/rank) | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    graphs = {}
    for model in args.models.split(","):
        preset = MODELS[model]
        for dtype in args.dtypes.split(","):
            graph = make_llama.build(make_llama.PRESETS[preset], dtype)
            path = os.path.join(args.workdir, "%s-%s.json" % (preset, dtype))
            with open(path, "w") as f:
                f.write(make_models.render(graph))
            graphs[(model, dtype)] = (graph, path)
            for world in map(int, args.worlds.split(",")):
                row = {"model": preset, "dtype": dtype, "world": world, "load_before": load()}
                predicted = rank0_bytes(graph, world)
                row["predicted_shard_bytes"] = predicted
                seconds, proc = timed([shardc, "compile", path, "--world-size", str(world),
                                       "--emit", "plan", "-o",
                                       os.path.join(args.workdir, "plan.json")])
                row["compile_seconds"] = seconds if proc.returncode == 0 else None
                available = mem_available()
                # Other work shares the machine: keep 6 GiB free for it.
                if predicted + (6 << 30) > available:
                    row["skipped"] = ("rank 0 needs %.1f GB of shards; %.1f GB available now, "
                                      "6 GiB kept free" % (predicted / 1e9, available / 1e9))
                    print("| %s | %s | %d | %.2f | %s | skipped: %s ||||||||" % (
                        preset, dtype, world, seconds, format(predicted, ","), row["skipped"]))
                    results["rows"].append(row)
                    continue
                one = summarize(run_rank(shardc, path, world, 0, 1, True))
                many = summarize(run_rank(shardc, path, world, 0, cores, False))
                job = one["init_seconds"]
                owners = {}
                for owner in one["owners"]:
                    if owner != 0:
                        owners[owner] = summarize(run_rank(shardc, path, world, owner, 1, True))
                        job = max(job, owners[owner]["init_seconds"])
                row.update(one=one, all=many, owners=owners, job_seconds=job,
                           load_after=load())
                results["rows"].append(row)
                print("| %s | %s | %d | %.2f | %s | %.3f | %.3f | %.2f | %.2f+%.2f | %.1f MiB | %s | %.3f | %s-%s |"
                      % (preset, dtype, world, seconds, format(one["predicted_peak_bytes"], ","),
                         one["init_seconds"], many["init_seconds"],
                         one["peak_bytes"] / one["init_seconds"] / 1e9,
                         one["user_seconds"], one["sys_seconds"],
                         one["rss_extra"] / 2**20,
                         "yes" if one["predictions_hold"] and many["predictions_hold"]
                         and one["peak_bytes"] == predicted else "NO",
                         job, row["load_before"], row["load_after"]), flush=True)
    if not args.no_torch:
        print("\n| model | dtype | torch layer s (1 thread) | x layers | torch layer s (%d threads) | x layers | sampled | load |" % cores)
        print("|---|---|---|---|---|---|---|---|")
        for (model, dtype), (graph, path) in graphs.items():
            preset = MODELS[model]
            layers = make_llama.PRESETS[preset]["layers"]
            before = load()
            t1 = torch_layer(preset, dtype, 1)
            tn = torch_layer(preset, dtype, cores)
            results["torch"].append({"model": preset, "dtype": dtype, "layers": layers,
                                     "one": t1, "all": tn, "load": before})
            print("| %s | %s | %.2f | %.0f | %.2f | %.0f | %s | %s |" % (
                preset, dtype, t1["layer_seconds"], t1["layer_seconds"] * layers,
                tn["layer_seconds"], tn["layer_seconds"] * layers, t1["sampled"], before),
                flush=True)
    for spec in args.save:
        model, world, dtype = spec.split(":")
        world = int(world)
        graph, path = graphs.get((model, dtype)) or (None, None)
        if graph is None:
            graph = make_llama.build(make_llama.PRESETS[MODELS[model]], dtype)
            path = os.path.join(args.workdir, "%s-%s.json" % (MODELS[model], dtype))
            with open(path, "w") as f:
                f.write(make_models.render(graph))
        target = os.path.join(args.workdir, "rank0.safetensors")
        before = load()
        # Not pinned: saving is one thread, and dd runs unpinned too.
        report = summarize(run_rank(shardc, path, world, 0, 1, False, ["--save", target]))
        written = os.stat(target).st_blocks * 512
        os.unlink(target)
        nbytes = rank0_bytes(graph, world)
        dd_plain, dd_bytes = dd_seconds(os.path.join(args.workdir, "dd.bin"), nbytes, False)
        dd_sync, _ = dd_seconds(os.path.join(args.workdir, "dd.bin"), nbytes, True)
        entry = {"model": MODELS[model], "world": world, "dtype": dtype, "bytes": nbytes,
                 "allocated_on_disk": written, "save_seconds": report["save_seconds"],
                 "dd_seconds": dd_plain, "dd_fdatasync_seconds": dd_sync,
                 "dd_bytes": dd_bytes, "load": before}
        results["save"].append(entry)
        print("\nsave %s N=%d %s rank 0: %s bytes in %.3f s = %.2f GB/s (file blocks %s); "
              "dd %s bytes: %.3f s = %.2f GB/s, with fdatasync %.3f s = %.2f GB/s; load %s" % (
                  MODELS[model], world, dtype, format(nbytes, ","), report["save_seconds"],
                  nbytes / report["save_seconds"] / 1e9, format(written, ","),
                  format(dd_bytes, ","), dd_plain, dd_bytes / dd_plain / 1e9, dd_sync,
                  dd_bytes / dd_sync / 1e9, before), flush=True)
    results["load_end"] = load()
    print("\n# load at the end %s" % results["load_end"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
