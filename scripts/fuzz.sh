#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) and runs each on a copy
# of its seed corpus. Any crash, sanitizer report, leak or timeout fails the
# script.
#
# By default the run is a fixed campaign (FUZZ_SEED, FUZZ_RUNS inputs per
# target, FUZZ_SECONDS as a cap): the same binary explores the same inputs
# every time, so CI's verdict does not depend on luck. Exploring for new bugs
# is a developer's job: FUZZ_SEED=0 picks a random seed, and a long
# FUZZ_SECONDS with FUZZ_RUNS=-1 fuzzes until the time is up. Every crash found
# that way is fixed and its input added to test/fuzz/corpus/, which the fixed
# campaign then replays first.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
runs=${FUZZ_RUNS:-50000}
seed=${FUZZ_SEED:-1}
build=${SHARDC_FUZZ_BUILD_DIR:-build-fuzz}
cmake -S test/fuzz -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$build" -j "$(nproc)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for target in graph safetensors plan; do
  mkdir -p "$work/$target"
  cp test/fuzz/corpus/"$target"/* "$work/$target/"
  echo "fuzz_$target: seed $seed, $runs runs, at most ${seconds}s"
  "$build/fuzz_$target" "$work/$target" -seed="$seed" -runs="$runs" \
    -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/$target-" 2>"$work/$target.log" || {
      tail -n 60 "$work/$target.log"
      echo "fuzz_$target found a problem; the input is under artifact_prefix above" >&2
      exit 1
    }
  grep -E "stat::number_of_executed_units|Done [0-9]+ runs" "$work/$target.log" | tail -n 2
done
echo "fuzzing: 3 passed, 0 failed"
