#!/usr/bin/env bash
# Checkpoint load throughput next to `cat FILE > /dev/null` from the page
# cache (the same bytes), and per-rank peak memory during load next to the
# full model size (issue 6; docs/checkpoints.md).
#
#   bench/checkpoint_bench.sh [BUILD_DIR] [PARAMS] [ROWS] [COLS] [WORLD_SIZES]
#
# Defaults: 16 float32 params of 2048 x 8192 (64 MiB each, 1 GiB in all),
# world sizes "1 2 4". Two files are loaded: an F32 one (same dtype: pread
# straight into the shards) and a BF16 one (converted through the bounded
# io buffer). Load time is the report's init_seconds (the slowest rank's
# init: opening the files, every pread and conversion, first touch of the
# shards), best of 5 runs (fresh-memory cost varies
# run to run on the development VM). The `fill` column is the same init with a
# constant fill instead of the load: the cost of touching fresh shard memory
# alone, which `cat` (reading into one reused buffer) never pays.
set -euo pipefail
BUILD=${1:-$(dirname "$0")/../build}
NPARAMS=${2:-16}
ROWS=${3:-2048}
COLS=${4:-8192}
WORLDS=${5:-"1 2 4"}
SHARDC="$BUILD/bin/shardc"
DIR=$(mktemp -d "${TMPDIR:-/tmp}/shardc-ckpt-bench.XXXXXX")
trap 'rm -rf "$DIR"' EXIT

python3 - "$DIR" "$NPARAMS" "$ROWS" "$COLS" <<'PY'
import json, sys
d, n, rows, cols = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def graph(dtype, init):
    return {"format": "shardc-graph", "version": 1, "name": "bench",
            "parameters": [{"name": "p%d" % i, "shape": [rows, cols], "dtype": dtype,
                            "device": "cpu", "init": [init]} for i in range(n)]}
json.dump(graph("float32", {"op": "uniform"}), open(d + "/make.json", "w"))
json.dump(graph("bfloat16", {"op": "uniform"}), open(d + "/make-bf16.json", "w"))
json.dump(graph("float32", {"op": "fill", "value": 0.0}), open(d + "/fill.json", "w"))
PY

now() { date +%s.%N; }
secs() { python3 -c "print(max(1e-9, $2 - $1))"; }

"$SHARDC" run "$DIR/make.json" --save "$DIR/f32.safetensors" > /dev/null
"$SHARDC" run "$DIR/make-bf16.json" --save "$DIR/bf16.safetensors" > /dev/null
BYTES=$(stat -c %s "$DIR/f32.safetensors")
BF16_BYTES=$(stat -c %s "$DIR/bf16.safetensors")
MODEL_BYTES=$((NPARAMS * ROWS * COLS * 4))

cat_rate() {  # bytes/s of cat from the page cache (best of 3, warm)
  local best=0 t0 t1 rate
  cat "$1" > /dev/null
  for _ in 1 2 3; do
    t0=$(now); cat "$1" > /dev/null; t1=$(now)
    rate=$(python3 -c "print($2 / ($t1 - $t0))")
    best=$(python3 -c "print(max($best, $rate))")
  done
  echo "$best"
}
CAT_F32=$(cat_rate "$DIR/f32.safetensors" "$BYTES")
CAT_BF16=$(cat_rate "$DIR/bf16.safetensors" "$BF16_BYTES")

init_time() {  # best of 5 report init_seconds (slowest rank of each run)
  local best=1e9 t
  for _ in 1 2 3 4 5; do
    "$SHARDC" run "$@" --report json > "$DIR/t.json"
    t=$(python3 -c "import json; print(max(r['init_seconds'] for r in json.load(open('$DIR/t.json'))['ranks']))")
    best=$(python3 -c "print(min($best, $t))")
  done
  echo "$best"
}

printf "model: %d params of %dx%d float32 = %d bytes (%.0f MiB)\n" \
  "$NPARAMS" "$ROWS" "$COLS" "$MODEL_BYTES" "$(python3 -c "print($MODEL_BYTES / 2**20)")"
printf "cat from the page cache: F32 file %.2f GB/s, BF16 file %.2f GB/s\n\n" \
  "$(python3 -c "print($CAT_F32 / 1e9)")" "$(python3 -c "print($CAT_BF16 / 1e9)")"
printf "%-6s %-3s %8s %8s %7s %7s %8s %7s %7s %12s %24s %11s\n" file N "cold s" "fill s" "GB/s" \
  "of cat" "warm s" "GB/s" "of cat" "rank peak" "shards + io buf" "model"
for N in $WORLDS; do
  BASE=$(init_time "$DIR/fill.json" --world-size "$N")
  for KIND in f32 bf16; do
    FILE="$DIR/$KIND.safetensors"
    FBYTES=$(stat -c %s "$FILE")
    CATR=$([ "$KIND" = f32 ] && echo "$CAT_F32" || echo "$CAT_BF16")
    T=$(init_time "$DIR/fill.json" --world-size "$N" --load "$FILE")
    WARM=$("$BUILD/bin/shardc-load-bench" "$DIR/fill.json" "$FILE" "$N" 5 | awk '$1 == "warm" {print $2}')
    "$SHARDC" run "$DIR/fill.json" --world-size "$N" --load "$FILE" --report json > "$DIR/r.json"
    python3 - "$DIR/r.json" "$T" "$BASE" "$FBYTES" "$CATR" "$N" "$KIND" "$MODEL_BYTES" "$WARM" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t, base, fbytes, cat, n, kind, model = (float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]),
                                        float(sys.argv[5]), int(sys.argv[6]), sys.argv[7], int(sys.argv[8]))
warm = float(sys.argv[9])
load = t
rate = fbytes / load
peaks = [x["init"]["peak_bytes"] for x in r["ranks"]]
pred = [x["init"]["predicted_peak_bytes"] for x in r["ranks"]]
shards = r["ranks"][0]["param_bytes"]
io = sum(a["bytes"] for a in r["ranks"][0]["init"]["live_at_peak"] if a["label"] == "checkpoint.io")
assert peaks == pred, (peaks, pred)
assert max(peaks) == shards + io, (peaks, shards, io)
print("%-6s %-3d %8.3f %8.3f %7.2f %6.0f%% %8.3f %7.2f %6.0f%% %12d %24s %11d" % (
    kind, n, load, base, rate / 1e9, 100 * rate / cat, warm, fbytes / warm / 1e9,
    100 * fbytes / warm / cat, max(peaks), "%d + %d" % (shards, io), model))
PY
  done
done
echo
echo "cold: shardc run --load (fresh shards); warm: CompiledModel::load into shards"
echo "already resident (shardc-load-bench: the reader's own rate)."
echo "GB/s: the checkpoint's bytes over the load time, all ranks together"
echo "(ranks are threads of one process sharing $(nproc) cores; each reads with"
echo "cores/N threads). fill s: the same init without reading (fresh memory only);"
echo "each rank reads only its rows (1/N of the file). Peaks are measured and equal"
echo "the prediction (asserted)."
