#!/usr/bin/env bash
# Forward benchmark: shardc run at N local ranks next to PyTorch eager
# (tools/torch_reference.py, /usr/bin/python3 with torch 1.13) on the same
# weights and inputs. See bench/README.md.
#
#   bench/forward_bench.sh [--build DIR] [--models "gpt2 llama"] [--ranks "1 4"]
#                          [--repeats R] [--cores C] [--torch-threads T]
#                          [--no-blas-env] [--workdir DIR] [--keep] [--torch-only]
#                          [--batch B] [--seq T]
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${SHARDC_BUILD_DIR:-$ROOT/build}"
MODELS="gpt2 llama"
RANKS="1 4"
REPEATS=5
CORES="$(nproc)"
TORCH_THREADS=""
BLAS_ENV=1
WORKDIR=""
KEEP=0
TORCH_ONLY=0
BATCH=""
SEQ=""
TORCH_PY="${TORCH_PYTHON:-/usr/bin/python3}"
PY="$(command -v python3 || echo /usr/bin/python3)"
SHARDC_TIMEOUT="${SHARDC_TIMEOUT:-900}"

usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD="$2"; shift 2 ;;
    --models) MODELS="$2"; shift 2 ;;
    --ranks) RANKS="$2"; shift 2 ;;
    --repeats) REPEATS="$2"; shift 2 ;;
    --cores) CORES="$2"; shift 2 ;;
    --torch-threads) TORCH_THREADS="$2"; shift 2 ;;
    --no-blas-env) BLAS_ENV=0; shift ;;
    --workdir) WORKDIR="$2"; KEEP=1; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --torch-only) TORCH_ONLY=1; shift ;;
    --batch) BATCH="$2"; shift 2 ;;
    --seq) SEQ="$2"; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "forward_bench: unknown option $1" >&2; usage 2 >&2 ;;
  esac
done

SHARDC="$BUILD/bin/shardc"
REF="$ROOT/tools/torch_reference.py"
if ! "$TORCH_PY" -c 'import torch' 2>/dev/null; then
  echo "forward_bench: $TORCH_PY cannot import torch (set TORCH_PYTHON)" >&2; exit 2
fi
if [ "$TORCH_ONLY" = 0 ] && [ ! -x "$SHARDC" ]; then
  echo "forward_bench: $SHARDC not found or not executable; build first" \
       "(scripts/build.sh) or pass --build DIR; running the torch half only" >&2
  TORCH_ONLY=1
fi
if [ -z "$WORKDIR" ]; then WORKDIR="$(mktemp -d /tmp/shardc-bench.XXXXXX)"; fi
mkdir -p "$WORKDIR"
cleanup() { if [ "$KEEP" = 0 ]; then rm -rf "$WORKDIR"; fi; }
trap cleanup EXIT
ROWS="$WORKDIR/rows.tsv"
: > "$ROWS"

now() { date +%s.%N; }

for model in $MODELS; do
  json="$ROOT/examples/$model.json"
  if [ ! -f "$json" ]; then echo "forward_bench: no $json" >&2; exit 2; fi
  if [ -n "$BATCH$SEQ" ]; then
    # The same model with a larger input [B, T] (examples/make_models.py).
    mkdir -p "$WORKDIR/graphs"
    "$PY" "$ROOT/examples/make_models.py" --only "$model" --out-dir "$WORKDIR/graphs" \
      ${BATCH:+--batch "$BATCH"} ${SEQ:+--seq "$SEQ"} >&2 || exit 2
    json="$WORKDIR/graphs/$model.json"
  fi
  inputs="$WORKDIR/$model.inputs.safetensors"
  "$TORCH_PY" "$REF" --make-inputs "$json" --seed 0 --out "$inputs" || exit 1
  params=""            # from the first shardc run that saves them
  params_src="-"
  for n in $RANKS; do
    tt="${TORCH_THREADS:-$(( CORES / n > 0 ? CORES / n : 1 ))}"
    report="$WORKDIR/$model.n$n.report.json"
    sout="$WORKDIR/$model.n$n.shardc.safetensors"
    serr="$WORKDIR/$model.n$n.shardc.stderr"
    s_rc=skip; s_wall=""
    if [ "$TORCH_ONLY" = 0 ]; then
      save=()
      if [ -z "$params" ]; then save=(--save-params "$WORKDIR/$model.params.safetensors"); fi
      envs=(); if [ "$BLAS_ENV" = 1 ]; then envs=(env "OPENBLAS_NUM_THREADS=$tt"); fi
      echo "== $model N=$n: shardc run${envs[1]:+ (${envs[1]})}" >&2
      t0=$(now)
      ${envs[@]+"${envs[@]}"} timeout "$SHARDC_TIMEOUT" "$SHARDC" run "$json" --world-size "$n" \
        --report json --seed 0 --inputs "$inputs" --outputs "$sout" ${save[@]+"${save[@]}"} \
        > "$report" 2> "$serr"
      s_rc=$?
      s_wall=$("$PY" -c "print($(now) - $t0)")
      if [ "$s_rc" != 0 ]; then
        echo "forward_bench: shardc run $model --world-size $n failed (exit $s_rc):" >&2
        head -n 5 "$serr" | sed 's/^/    /' >&2
        [ "$s_rc" = 124 ] && echo "    (killed after ${SHARDC_TIMEOUT}s; SHARDC_TIMEOUT)" >&2
      elif [ ${#save[@]} -gt 0 ]; then
        params="$WORKDIR/$model.params.safetensors"; params_src=shardc
      fi
    fi
    if [ -z "$params" ]; then
      params="$WORKDIR/$model.torchparams.safetensors"; params_src=torch
      echo "== $model: no shardc parameters; drawing them with torch (timing only)" >&2
      "$TORCH_PY" "$REF" --make-params "$json" --seed 0 --out "$params" || exit 1
    fi
    echo "== $model N=$n: torch eager, $tt thread(s), $REPEATS run(s)" >&2
    tout="$WORKDIR/$model.n$n.torch.safetensors"
    tjson="$WORKDIR/$model.n$n.torch.json"
    "$TORCH_PY" "$REF" "$json" --params "$params" --inputs "$inputs" --outputs "$tout" \
      --threads "$tt" --time "$REPEATS" --time-json "$tjson" >&2 || echo "torch failed" > "$tjson"
    if [ "$s_rc" = 0 ] && [ "$params_src" = shardc ] && [ -f "$sout" ]; then
      "$TORCH_PY" "$REF" --compare "$sout" "$tout" --rtol 1e-5 > "$WORKDIR/$model.n$n.compare.txt"
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$model" "$n" "$s_rc" "$s_wall" \
      "$report" "$tjson" "$tt" "$params_src" "$WORKDIR/$model.n$n.compare.txt" >> "$ROWS"
  done
done

"$PY" - "$ROWS" <<'EOF'
import json, sys

def find(obj, key):
    """Every value of `key` anywhere in a JSON object."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == key and isinstance(v, (int, float)):
                yield v
            else:
                yield from find(v, key)
    elif isinstance(obj, list):
        for v in obj:
            yield from find(v, key)

def fmt_bytes(b):
    return "-" if b is None else format(int(b), ",")

rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
hdr = ("model", "N", "shardc fwd s", "torch s", "thr", "ratio", "peak/rank B",
       "unsharded B", "peak/unsh", "pred==meas", "vs torch")
table, notes = [], set()
for model, n, rc, wall, report, tjson, tt, psrc, cmpfile in rows:
    try:
        tsec = json.load(open(tjson))["forward_seconds"]
    except Exception:
        tsec = None
    s = peak = unsh = None
    pred = "-"
    verdict = "-"
    if rc == "0":
        try:
            rep = json.load(open(report))
        except Exception as e:
            rep = {}
            notes.add("%s N=%s: report is not JSON (%s)" % (model, n, e))
        fs = list(find(rep, "forward_seconds"))
        star = ""
        if fs:
            s = max(fs)
        else:
            star = "*"
            s = float(wall)
            notes.add("* no forward_seconds in the report: whole `shardc run` wall time "
                      "(compile + init + forward + writing files)")
        peaks = [r.get("forward", {}).get("peak_bytes") for r in rep.get("ranks", [])]
        peaks = [p for p in peaks if p is not None]
        peak = max(peaks) if peaks else None
        unsh = rep.get("unsharded_param_bytes")
        pred = {True: "yes", False: "NO"}.get(rep.get("predictions_hold"), "-")
        try:
            lines = open(cmpfile).read().splitlines()
            err = [l.split()[3] for l in lines[1:-1] if len(l.split()) > 3]
            verdict = "%s %s" % (lines[-1].split(":")[0], ",".join(err))
        except Exception:
            verdict = "-"
    elif rc != "skip":
        notes.add("shardc failed for some runs (exit code in the shardc column); "
                  "its stderr is in the work directory (--keep)")
    if psrc == "torch":
        notes.add("torch timed on torch-drawn parameters (shardc gave none): "
                  "same distributions, different values")
    if s is not None:
        shard = "%.4f%s" % (s, star)
    else:
        shard = "skipped" if rc == "skip" else "FAILED(%s)" % rc
    table.append((model, n, shard, "%.4f" % tsec if tsec is not None else "failed", tt,
                  "%.2f" % (s / tsec) if s is not None and tsec else "-",
                  fmt_bytes(peak), fmt_bytes(unsh),
                  "%.3f" % (peak / unsh) if peak and unsh else "-", pred, verdict))
w = [max(len(str(r[i])) for r in table + [hdr]) for i in range(len(hdr))]
for r in [hdr] + table:
    print("  ".join(str(c).rjust(w[i]) if i > 1 else str(c).ljust(w[i]) for i, c in enumerate(r)))
print()
print("ratio = shardc forward / torch eager median forward (thr torch threads; shardc ranks "
      "with OPENBLAS_NUM_THREADS=thr unless --no-blas-env). peak/rank = max over ranks of "
      "the forward peak; unsharded = all parameter bytes. vs torch: --compare PASS/FAIL and "
      "max|a-b|/max|b| (rtol 1e-5).")
for note in sorted(notes):
    print("note: " + note)
EOF
status=$?
if [ "$KEEP" = 1 ]; then echo "work directory: $WORKDIR" >&2; fi
exit $status
