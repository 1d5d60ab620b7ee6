#!/bin/sh
# orthogonal init on the host: shardc's orthogonalOnHost (normal draw, then
# the Householder QR, float32 matrix, double sums; bit-identical for any
# thread count) at 1 and T threads, next to torch's nn.init.orthogonal_
# (LAPACK's blocked geqrf/orgqr) at 1 and T threads, same shapes, same run.
# Usage: bench/orthogonal_bench.sh [BUILD] [THREADS] [SHAPE...]
#   defaults: build, nproc, 512x512 1024x1024 2048x512 512x2048 2048x2048
# Environment: TORCH_PYTHON (default /opt/shardc-venv/bin/python).
set -eu
build=${1:-build}
threads=${2:-$(nproc)}
[ $# -ge 2 ] && shift 2 || shift $#
shapes=${*:-512x512 1024x1024 2048x512 512x2048 2048x2048}
python=${TORCH_PYTHON:-/opt/shardc-venv/bin/python}
bin="$build/bin/shardc-orthogonal-bench"
[ -x "$bin" ] || { echo "orthogonal_bench.sh: $bin not found (build shardc-orthogonal-bench)" >&2; exit 1; }
shardc_out=$(mktemp) torch_out=$(mktemp)
trap 'rm -f "$shardc_out" "$torch_out"' EXIT
# shellcheck disable=SC2086
"$bin" "$threads" $shapes >"$shardc_out"
# shellcheck disable=SC2086
"$python" - "$threads" $shapes >"$torch_out" <<'PY'
import sys, time, torch
most, shapes = int(sys.argv[1]), sys.argv[2:]
for shape in shapes:
    rows, cols = (int(x) for x in shape.split("x"))
    t = torch.empty(rows, cols)
    for threads in sorted({1, most}):
        torch.set_num_threads(threads)
        best = float("inf")
        for _ in range(2):
            start = time.perf_counter()
            torch.nn.init.orthogonal_(t)
            best = min(best, time.perf_counter() - start)
        print(shape, threads, "%.4f" % best)
PY
echo "# $(nproc) cores; shardc best of 2, torch $("$python" -c 'import torch; print(torch.__version__)') best of 2; float32"
awk -v most="$threads" '
  FNR == NR { shardc[$1 " " $2] = $3; next }
  { torch[$1 " " $2] = $3; if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
  END {
    printf "%-10s %10s %10s %8s %10s %10s %8s %9s\n", "shape", "shardc 1", "torch 1", "ratio",
           "shardc " most, "torch " most, "ratio", "speed-up"
    for (i = 1; i <= n; i++) {
      s = order[i]; a = shardc[s " 1"]; b = torch[s " 1"]; c = shardc[s " " most]; d = torch[s " " most]
      printf "%-10s %9.3fs %9.3fs %7.1fx %9.3fs %9.3fs %7.1fx %8.2fx\n", s, a, b, a / b, c, d, c / d, a / c
    }
  }' "$shardc_out" "$torch_out"
