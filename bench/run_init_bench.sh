#!/bin/sh
# Runs shardc-init-bench and torch_init.py on the same sizes, one thread each,
# and prints: op, shardc GB/s, torch GB/s, ratio, fraction of plain-fill
# bandwidth. Usage: bench/run_init_bench.sh [build-dir] [elements] [repeats]
set -eu
build=${1:-build}
n=${2:-67108864}
repeats=${3:-5}
here=$(dirname "$0")
bin="$build/bin/shardc-init-bench"
[ -x "$bin" ] || { echo "run_init_bench.sh: $bin not found (build the shardc-init-bench target)" >&2; exit 1; }
shardc_out=$(mktemp) torch_out=$(mktemp)
trap 'rm -f "$shardc_out" "$torch_out"' EXIT
"$bin" "$n" "$repeats" > "$shardc_out"
OMP_NUM_THREADS=1 /usr/bin/python3 "$here/torch_init.py" "$n" "$repeats" > "$torch_out"
grep '^#' "$shardc_out" "$torch_out" | sed 's/^[^:]*://'
awk '
  FNR == NR { if ($1 !~ /^#/) shardc[$1] = $2; next }
  $1 !~ /^#/ { torch[$1] = $2 }
  END {
    limit = shardc["plain_fill"]
    printf "%-13s %12s %12s %8s %14s\n", "op", "shardc GB/s", "torch GB/s", "ratio", "of plain fill"
    split("fill uniform normal trunc_normal", ops, " ")
    for (i = 1; i <= 4; i++) {
      op = ops[i]
      printf "%-13s %12.2f %12.2f %7.1fx %13.0f%%\n", op, shardc[op], torch[op], shardc[op] / torch[op], 100 * shardc[op] / limit
    }
    printf "%-13s %12.2f\n", "plain_fill", limit
  }' "$shardc_out" "$torch_out"
