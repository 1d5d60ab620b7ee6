#!/usr/bin/env bash
# Per-process peak RSS while initializing a ~1.5B-parameter GPT (GPT-2 XL
# shapes: 48 layers, hidden 1600, 25 heads, context 1024, vocabulary 50257;
# 1,557,611,200 float32 parameters) with `shardc run --backend mpi` at
# N = 1 and N = 8 processes, next to PyTorch 1.13 building the same model on
# CPU in one process (bench/mpi_torch_gpt_init.py, nanoGPT's init). Init
# only: the graph's forward (inputs, nodes, outputs) is dropped.
#
# Target (issue 8): per-process peak RSS at N = 8 <= params/8 + 150 MiB.
#
# usage: bench/mpi_init_rss.sh [--build DIR] [--np "1 8"] [--no-torch]
#        [--layers L --hidden H --heads A --seq S]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${SHARDC_BUILD_DIR:-$ROOT/build}
NPS="1 8"
LAYERS=48 HIDDEN=1600 HEADS=25 SEQ=1024
TORCH=1
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --np) NPS=$2; shift 2 ;;
    --no-torch) TORCH=0; shift ;;
    --layers) LAYERS=$2; shift 2 ;;
    --hidden) HIDDEN=$2; shift 2 ;;
    --heads) HEADS=$2; shift 2 ;;
    --seq) SEQ=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
SHARDC=$BUILD/bin/shardc
MPIRUN=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

python3 "$ROOT/examples/make_gpt3.py" --layers "$LAYERS" --hidden "$HIDDEN" --heads "$HEADS" \
  --seq "$SEQ" -o "$WORK/gpt.json" >&2
python3 - "$WORK/gpt.json" "$WORK/gpt-init.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
for key in ("inputs", "nodes", "outputs"):
    g.pop(key, None)
json.dump(g, open(sys.argv[2], "w"))
PY

MIB=$((1 << 20))
echo "# GPT L=$LAYERS H=$HIDDEN heads=$HEADS seq=$SEQ, init only; $(nproc) cores; $(mpirun --version | head -1)"
printf '%-26s %6s %16s %16s %16s\n' "run" "rank" "accounted peak" "peak RSS" "RSS - accounted"
PARAM_BYTES=
for N in $NPS; do
  start=$(date +%s)
  "${MPIRUN[@]}" -np "$N" "$SHARDC" run "$WORK/gpt-init.json" --backend mpi --timeout 3600 \
    --report json > "$WORK/n$N.json"
  secs=$(( $(date +%s) - start ))
  python3 - "$WORK/n$N.json" "$N" "$secs" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
n, secs = int(sys.argv[2]), sys.argv[3]
for x in r["ranks"]:
    acc, rss = x["init"]["peak_bytes"], x["peak_rss_after_init_bytes"]
    print(f"{'shardc mpi N=%d (%s s)' % (n, secs):26s} {x['rank']:6d} {acc/2**20:12.1f} MiB "
          f"{rss/2**20:12.1f} MiB {(rss-acc)/2**20:12.1f} MiB")
PY
  PARAM_BYTES=$(python3 -c "import json; print(json.load(open('$WORK/n$N.json'))['unsharded_param_bytes'])")
done

if [ "$TORCH" = 1 ]; then
  start=$(date +%s)
  /usr/bin/python3 "$ROOT/bench/mpi_torch_gpt_init.py" --layers "$LAYERS" --hidden "$HIDDEN" \
    --heads "$HEADS" --seq "$SEQ" > "$WORK/torch.txt"
  secs=$(( $(date +%s) - start ))
  torch_rss=$(awk '/^peak_rss_bytes/ {print $2}' "$WORK/torch.txt")
  torch_params=$(awk '/^param_bytes/ {print $2}' "$WORK/torch.txt")
  python3 -c "import sys; p, r, s = map(int, sys.argv[1:]); m = 2**20
print(f\"{'torch 1.13 CPU, 1 proc (%d s)' % s:26s} {0:6d} {p/m:12.1f} MiB {r/m:12.1f} MiB {(r-p)/m:12.1f} MiB\")" \
    "$torch_params" "$torch_rss" "$secs"
  [ "$torch_params" = "$PARAM_BYTES" ] || echo "note: torch has $torch_params parameter bytes, shardc $PARAM_BYTES"
fi

if [[ " $NPS " == *" 8 "* ]]; then
  python3 - "$WORK/n8.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
params = r["unsharded_param_bytes"]
limit = params / 8 + 150 * 2**20
worst = max(x["peak_rss_after_init_bytes"] for x in r["ranks"])
ok = worst <= limit
print(f"target: per-process peak RSS at N = 8 <= params/8 + 150 MiB = {params/8/2**20:.1f} + 150 "
      f"= {limit/2**20:.1f} MiB; worst rank {worst/2**20:.1f} MiB: {'MET' if ok else 'MISSED'}")
sys.exit(0 if ok else 1)
PY
fi
