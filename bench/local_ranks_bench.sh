#!/usr/bin/env bash
# Per-rank overhead of local ranks (threads of one process): wall time and
# peak RSS of `shardc run` on a tiny model at N = 1 and at large N, and
# (RSS(N) - RSS(1)) / (N - 1): what each local rank costs beyond the bytes
# the report accounts for (4 bytes of parameter per rank here).
#
#   bench/local_ranks_bench.sh [BUILD] ["N ..."]     (default: build "1 1024 4096")
#
# Two models, p = [4096, 1] float32 (one row per rank at N = 4096): init
# only, and init + forward y = p + x (each rank then also accounts a 16 KiB
# gathered p and a 16 KiB y, and keeps a host copy of y to compare outputs).
set -euo pipefail
build=${1:-${SHARDC_BUILD_DIR:-build}}
ranks=${2:-"1 1024 4096"}
shardc=$build/bin/shardc
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
param='{"name": "p", "shape": [4096, 1], "dtype": "float32", "device": "cpu", "init": [{"op": "normal"}]}'
echo "{\"format\": \"shardc-graph\", \"version\": 1, \"parameters\": [$param]}" > "$work/init-only.json"
echo "{\"format\": \"shardc-graph\", \"version\": 1, \"parameters\": [$param],
 \"inputs\": [{\"name\": \"x\", \"shape\": [1], \"dtype\": \"float32\"}],
 \"nodes\": [{\"name\": \"y\", \"op\": \"add\", \"inputs\": [\"p\", \"x\"]}], \"outputs\": [\"y\"]}" \
  > "$work/forward.json"
printf '%-10s %6s %8s %14s %18s %14s\n' model N "wall s" "peak RSS KiB" "RSS/rank KiB" "report lines"
for model in init-only forward; do
  base=""
  for n in $ranks; do
    /usr/bin/time -f "%e %M" -o "$work/time" "$shardc" run "$work/$model.json" --world-size "$n" \
      > "$work/report"
    read -r wall rss < "$work/time"
    [ -z "$base" ] && base=$rss
    per=$(awk -v r="$rss" -v b="$base" -v n="$n" 'BEGIN { print (n > 1) ? sprintf("%.1f", (r - b) / (n - 1)) : "-" }')
    printf '%-10s %6s %8s %14s %18s %14s\n' "$model" "$n" "$wall" "$rss" "$per" "$(wc -l < "$work/report")"
  done
done
