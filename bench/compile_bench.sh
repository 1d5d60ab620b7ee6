#!/usr/bin/env bash
# Compile-time scale (issue 11): planning GPT-3 175B for 8, 64 and 1024 ranks
# next to PyTorch 1.13 constructing the same model on the meta device, and
# compile time against depth. Usage: bench/compile_bench.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shardc="$build/bin/shardc"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Best of 3 runs of a command: "seconds peak_rss_kib".
measure() {
  local best_s="" best_kb=""
  for _ in 1 2 3; do
    /usr/bin/time -f "%e %M" -o "$work/time" "$@" > /dev/null
    read -r s kb < "$work/time"
    if [ -z "$best_s" ] || awk "BEGIN{exit !($s < $best_s)}"; then best_s=$s; fi
    if [ -z "$best_kb" ] || [ "$kb" -lt "$best_kb" ]; then best_kb=$kb; fi
  done
  echo "$best_s $best_kb"
}

python3 examples/make_gpt3.py --preset 175b -o "$work/gpt3-175b.json" > /dev/null
torch_line=$(/usr/bin/python3 bench/torch_meta_gpt.py --layers 96 --hidden 12288 --heads 96)
torch_s=$(sed -E 's/.*seconds=([0-9.]+).*/\1/' <<< "$torch_line")
torch_mib=$(sed -E 's/.*peak_rss_mib=([0-9.]+).*/\1/' <<< "$torch_line")

echo "GPT-3 175B (96 layers, d 12288, 96 heads, vocab 50257, seq 2048):"
echo "shardc compile --memory-plan (whole pipeline: read JSON, build and verify IR,"
echo "tc-expand-init, tc-assign-units, tc-fsdp, lower to a plan, predict memory)"
echo "vs torch 1.13 constructing the model on the meta device, best of 3"
printf "%8s %12s %14s %12s %14s %10s\n" ranks "shardc s" "shardc MiB" "torch s" "torch MiB" "s ratio"
for n in 8 64 1024; do
  read -r s kb < <(measure "$shardc" compile "$work/gpt3-175b.json" --world-size "$n" --memory-plan)
  awk -v n="$n" -v s="$s" -v kb="$kb" -v ts="$torch_s" -v tm="$torch_mib" \
    'BEGIN{printf "%8d %12.3f %14.1f %12.3f %14.1f %9.2fx\n", n, s, kb/1024, ts, tm, ts/s}'
done
echo "targets at N = 1024: < 1 s and < 300 MiB"

echo
echo "compile time against depth (d 12288, N = 1024): linear in layers"
printf "%8s %12s %14s\n" layers "shardc s" "shardc MiB"
for layers in 12 24 48 96; do
  python3 examples/make_gpt3.py --layers "$layers" --hidden 12288 --heads 96 -o "$work/l$layers.json" > /dev/null
  read -r s kb < <(measure "$shardc" compile "$work/l$layers.json" --world-size 1024 --memory-plan)
  awk -v l="$layers" -v s="$s" -v kb="$kb" 'BEGIN{printf "%8d %12.3f %14.1f\n", l, s, kb/1024}'
done
