#!/usr/bin/env bash
# shardc's CPU convolution next to torch's on convnet layers, the three passes
# training runs (fwd: F.conv2d; dgrad and wgrad: aten.convolution_backward for
# the input's and the weight's gradient), same thread count (default 1), best
# and median of R runs each: bench/README.md.
#   bench/conv_bench.sh [THREADS] [REPEATS]
# Environment: SHARDC_BUILD_DIR (default build), TORCH_PYTHON (default
# /opt/shardc-venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-1}
repeats=${2:-20}
build=${SHARDC_BUILD_DIR:-build}
python=${TORCH_PYTHON:-/opt/shardc-venv/bin/python}
cmake --build "$build" --target shardc-conv-bench >/dev/null
ours=$("$build/bin/shardc-conv-bench" "$threads" "$repeats")
theirs=$("$python" bench/conv_bench.py "$threads" "$repeats")
# Best of R is the figure to compare on a shared machine (others' load only
# adds time); the medians are printed beside it.
echo "layer.pass | shardc best ms | torch best ms | shardc/torch best | medians: shardc torch ratio (threads $threads, $repeats runs)"
join <(echo "$ours" | sort) <(echo "$theirs" | sort) |
  awk '{ printf "%s | %s | %s | %.2f | %s %s %.2f\n", $1, $3, $5, $3 / $5, $2, $4, $2 / $4 }'
