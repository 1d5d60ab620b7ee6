#!/usr/bin/env bash
# Data-parallel forward benchmark (issue 18): `shardc run --data-parallel`
# on a global batch of B x T tokens at N ranks, tokens/s over all ranks,
# next to PyTorch eager (tools/torch_reference.py, /usr/bin/python3, torch
# 1.13) on the same global batch with the same total cores. See bench/README.md.
#
#   bench/data_parallel_bench.sh [--build DIR] [--models "gpt2 llama"]
#       [--ranks "1 2 4"] [--batch 8] [--seq 128] [--repeats R]
#       [--backends "local mpi"] [--cores C] [--workdir DIR]
#
# shardc's forward time is the slowest rank's (the report's forward
# seconds); each run is one process start, compile, init and forward, and
# the best of R runs is kept. Targets (benchmark only, same total cores):
# N = 2 >= 0.9x the N = 1 tokens/s, N = 4 >= 0.7x. Every N's outputs are
# compared byte for byte with N = 1's ("same" column). "user s", "sys s"
# and "minflt" are the whole shardc process's (all ranks, compile, init,
# forward, writing outputs; mpirun's children included) CPU seconds and
# minor page faults from getrusage: unlike wall time they do not grow with
# the machine's load. The page policy (runtime/PagePolicy.h) follows
# SHARDC_HUGE_PAGES / SHARDC_PREFAULT from the environment.
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${SHARDC_BUILD_DIR:-$ROOT/build}"
MODELS="gpt2 llama"
RANKS="1 2 4"
BATCH=8
SEQ=128
REPEATS=1
BACKENDS="local"
CORES="$(nproc)"
WORKDIR=""
TORCH_PY="${TORCH_PYTHON:-/usr/bin/python3}"

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD="$2"; shift 2 ;;
    --models) MODELS="$2"; shift 2 ;;
    --ranks) RANKS="$2"; shift 2 ;;
    --batch) BATCH="$2"; shift 2 ;;
    --seq) SEQ="$2"; shift 2 ;;
    --repeats) REPEATS="$2"; shift 2 ;;
    --backends) BACKENDS="$2"; shift 2 ;;
    --cores) CORES="$2"; shift 2 ;;
    --workdir) WORKDIR="$2"; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "data_parallel_bench: unknown option $1" >&2; usage 2 >&2 ;;
  esac
done
SHARDC="$BUILD/bin/shardc"
[ -x "$SHARDC" ] || { echo "data_parallel_bench: no $SHARDC; build first" >&2; exit 2; }
"$TORCH_PY" -c 'import torch' 2>/dev/null ||
  { echo "data_parallel_bench: $TORCH_PY cannot import torch" >&2; exit 2; }
KEEP=1
if [ -z "$WORKDIR" ]; then WORKDIR="$(mktemp -d /tmp/shardc-dp-bench.XXXXXX)"; KEEP=0; fi
mkdir -p "$WORKDIR"
trap '[ "$KEEP" = 1 ] || rm -rf "$WORKDIR"' EXIT
ROWS="$WORKDIR/rows.tsv"
: > "$ROWS"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $CORES cores" >&2

# Runs "$@" with stdout to $1's file, and writes "user sys minflt" of it and
# every descendant it waited for to $1.rusage.
rusage_run() {
  local out="$1"; shift
  python3 - "$out" "$@" <<'PY'
import resource, subprocess, sys
with open(sys.argv[1], "w") as out:
    rc = subprocess.call(sys.argv[2:], stdout=out)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1] + ".rusage", "w").write("%.2f %.2f %d\n" % (u.ru_utime, u.ru_stime, u.ru_minflt))
sys.exit(rc)
PY
}

for model in $MODELS; do
  python3 "$ROOT/examples/make_models.py" --only "$model" --out-dir "$WORKDIR" \
    --batch "$BATCH" --seq "$SEQ" > /dev/null || exit 2
  json="$WORKDIR/$model.json"
  inputs="$WORKDIR/$model.inputs.st"
  "$TORCH_PY" "$ROOT/tools/torch_reference.py" --make-inputs "$json" --seed 0 --out "$inputs" || exit 1
  params="$WORKDIR/$model.params.st"
  for backend in $BACKENDS; do
    for n in $RANKS; do
      best=""
      for ((rep = 0; rep < REPEATS; rep++)); do
        out="$WORKDIR/$model.$backend.n$n.out.st"
        report="$WORKDIR/$model.$backend.n$n.json"
        save=(); [ -f "$params" ] || save=(--save-params "$params")
        echo "== $model $backend N=$n run $((rep + 1))/$REPEATS (load $(cut -d' ' -f1 /proc/loadavg))" >&2
        if [ "$backend" = mpi ]; then
          # --bind-to none: OpenMPI binds a lone process to one core, which
          # would give N = 1 half the cores the other rows get.
          rusage_run "$report" mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$n" "$SHARDC" run \
            "$json" --backend mpi --data-parallel --inputs "$inputs" --outputs "$out" \
            --report json ${save[@]+"${save[@]}"} 2> "$report.err"
        else
          rusage_run "$report" "$SHARDC" run "$json" --world-size "$n" --data-parallel \
            --inputs "$inputs" --outputs "$out" --report json ${save[@]+"${save[@]}"} \
            2> "$report.err"
        fi || { echo "shardc failed:" >&2; head -5 "$report.err" >&2; continue; }
        s=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); \
print(max(x['forward']['seconds'] for x in r['ranks'] if 'forward' in x and 'seconds' in x['forward']))" "$report" 2>/dev/null) ||
          s=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(max(x['forward_seconds'] for x in r['ranks']))" "$report")
        if [ -z "$best" ] || python3 -c "import sys; sys.exit(not $s < $best)"; then best=$s; fi
      done
      same="-"
      ref="$WORKDIR/$model.local.n1.out.st"
      [ -f "$ref" ] && [ -f "$out" ] && { cmp -s "$ref" "$out" && same=yes || same=NO; }
      cpu="- - -"; [ -f "$report.rusage" ] && cpu="$(cat "$report.rusage")"
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$model" "$backend" "$n" "${best:-failed}" "$same" \
        "$cpu" >> "$ROWS"
    done
  done
  echo "== $model torch eager, $CORES thread(s), $REPEATS timed run(s)" >&2
  "$TORCH_PY" "$ROOT/tools/torch_reference.py" "$json" --params "$params" --inputs "$inputs" \
    --threads "$CORES" --time "$REPEATS" --warmup 1 --time-json "$WORKDIR/$model.torch.json" >&2
  printf '%s\ttorch\t-\t%s\t-\t- - -\n' "$model" \
    "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['forward_seconds'])" "$WORKDIR/$model.torch.json")" >> "$ROWS"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg) on $CORES cores" >&2

python3 - "$ROWS" "$BATCH" "$SEQ" "$CORES" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
tokens = int(sys.argv[2]) * int(sys.argv[3])
base, torch = {}, {}
for m, b, n, s, _, _ in rows:
    if s == "failed": continue
    if b == "torch": torch[m] = float(s)
    elif n == "1": base.setdefault(m, float(s))
print("global batch %s x %s = %d tokens, %s cores in all" % (sys.argv[2], sys.argv[3], tokens, sys.argv[4]))
print("%-10s %-6s %3s %10s %10s %9s %10s %6s %7s %7s %9s" % ("model", "run", "N", "forward s", "tokens/s", "vs N=1", "vs torch", "same", "user s", "sys s", "minflt"))
for m, b, n, s, same, cpu in rows:
    user, sys_s, minflt = cpu.split()
    if s == "failed":
        print("%-10s %-6s %3s %10s" % (m, b, n, "FAILED")); continue
    s = float(s)
    if s <= 0:
        print("%-10s %-6s %3s %10s" % (m, b, n, "no time")); continue
    tps = tokens / s
    vs1 = "%.2fx" % (base[m] / s) if m in base and b != "torch" else "-"
    vst = "%.2fx" % (torch[m] / s) if m in torch and b != "torch" else "-"
    print("%-10s %-6s %3s %10.4f %10.1f %9s %10s %6s %7s %7s %9s" % (m, b, n, s, tps, vs1, vst, same, user, sys_s, minflt))
print("vs N=1: tokens/s relative to N = 1 (targets: N=2 >= 0.9x, N=4 >= 0.7x); "
      "vs torch: tokens/s relative to torch eager on all cores; same: outputs byte-identical to N = 1")
PY
