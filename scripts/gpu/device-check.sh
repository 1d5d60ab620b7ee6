#!/usr/bin/env bash
# The device check: run ON THE GPU MACHINE, from the repository root, with
# the bundle scripts/gpu-bundle.sh built here (git-ignored gpu-bundle/):
#
#   bash gpu-bundle/device-check.sh          # OUT=<dir>: where log + JSON go
#
# A section that fails runs once more under compute-sanitizer's memcheck
# (bundled), with what is left of the budget: see the end of the steps.
# That machine has no MLIR, OpenBLAS, Catch2, apt or network: the bundle's
# binary needs only glibc and the CUDA libraries that torch's pip wheels
# carry (libcudart.so.13, libcublas(Lt).so.13, libnccl.so.2), found here in
# site-packages. Every section of shardc-gpu-tests runs on its own with its
# own timeout (one hang costs one section), then GPT-2 124M from a plan
# compiled at bundle time, then torch's side of the benchmarks (init
# throughput, MLP block, one 70B rank's shards, GPT-2 eager on the same
# weights). Writes $OUT/device-check.log (everything), $OUT/results.json
# (every row of every section, plus each step's exit status and seconds)
# and prints a summary. Budget: 540 s in all (each step's timeout is cut to
# what is left); exit 0 when every step passed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/shardc-device-check}
mkdir -p "$OUT/sections"
start=$(date +%s)
budget=${SHARDC_DEVICE_CHECK_BUDGET:-540}
mib=${SHARDC_DEVICE_CHECK_MIB:-1024}

work=$(mktemp -d /tmp/shardc-bundle.XXXXXX)
trap 'rm -rf "$work"' EXIT

# Everything goes to the terminal and to one log; the pipeline ends only
# when tee has written the last line (the summary).
main() {
echo "== shardc device check $(date -u +%FT%TZ), bundle of commit $(cat "$here/commit" 2>/dev/null)"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader 2>&1 || echo "nvidia-smi: not found"
echo "== $(ldd --version 2>&1 | head -1); the binary needs $(cat "$here/needs-glibc" 2>/dev/null)"

tar -C "$work" -xzf "$here/bundle.tgz" || { echo "cannot unpack $here/bundle.tgz"; return 3; }
bin="$work/bin/shardc-gpu-tests"

# cudart, cuBLAS(Lt), NCCL: torch's wheels (nvidia/*/lib), then a toolkit.
python=${PYTHON:-python3}
libdirs=$("$python" - <<'PY' 2>/dev/null
import glob, os, site, sys
roots = [p for p in dict.fromkeys(site.getsitepackages() + sys.path) if p and os.path.isdir(p)]
found = []
for name in ("libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libnccl.so.2"):
    for root in roots:
        hits = sorted(glob.glob(os.path.join(root, "nvidia", "**", name), recursive=True))
        if hits:
            d = os.path.dirname(hits[0])
            if d not in found: found.append(d)
            break
print(":".join(found))
PY
)
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do [ -d "$d" ] && libdirs="$libdirs:$d"; done
export LD_LIBRARY_PATH="${libdirs#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "== LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
ldd "$bin" | grep -E "cudart|cublas|nccl|not found"
if ldd "$bin" | grep -q "not found"; then
  echo "MISSING LIBRARIES (above): stop"
  return 3
fi
"$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "gpu", torch.cuda.is_available())' 2>&1 | tail -1
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}

declare -a steps=()
overall=0
# step NAME TIMEOUT COMMAND...: runs with min(TIMEOUT, what is left), logs
# its exit status (0 pass, 1 fail, 77 no GPU, 124/137 timeout).
step() {
  local name=$1 limit=$2; shift 2
  local left=$(( budget - ($(date +%s) - start) ))
  if [ "$left" -lt 10 ]; then
    echo "== $name: not run, the ${budget} s budget is spent"
    steps+=("$name not-run 0"); overall=1; return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "== $name (timeout ${limit} s)"
  local t0=$(date +%s)
  timeout -k 10 "$limit" "$@"
  local rc=$?
  local took=$(( $(date +%s) - t0 ))
  echo "== $name: exit $rc after ${took} s"
  steps+=("$name $rc $took")
  [ "$rc" = 0 ] || overall=1
}

# section NAME TIMEOUT ARGS...: one section of the binary as a step; its
# arguments are kept (shell-quoted) for a memcheck rerun.
declare -A section_args=()
section() {
  local name=$1 limit=$2; shift 2
  section_args[$name]=$(printf '%q ' "$@")
  step "$name" "$limit" "$bin" "$@" --json "$OUT/sections/$name.json"
}

for spec in host:30 memory:30 init:60 index64:60 sharded:90 fixes:60 suite:120 local:60 \
            nccl1:45 nccl:45 timeout:40 perf:60; do
  name=${spec%%:*}
  section "$name" "${spec##*:}" --section "$name" --throughput-mib "$mib"
done
# LocalSession with its ranks on the GPU (the JIT API's and `shardc run
# --device cuda`'s runtime) against the CPU, on a plan compiled at bundle time.
session_plans=()
for plan in "$here"/session-*.json; do session_plans+=(--session-plan "$plan"); done
section session 60 --section session "${session_plans[@]}" \
  --session-int-bound "$(cat "$here/session-int-bound")"
# One rank of Llama 3 70B at N = 64 (4.4 GB of shards) on the GPU.
section scale 90 --section scale --scale-plan "$here/scale-llama3-70b-n64.json"
# GPT-2 124M from the plan compiled at bundle time; its weights, ids and
# logits (~0.7 GB) go to the scratch folder, not $OUT.
mkdir -p "$work/gpt2"
section gpt2 120 --section gpt2 --plan "$here/gpt2-plan.json" --export "$work/gpt2"
gpt2_file="$work/gpt2/gpt2-shardc.safetensors"
step torch 120 "$python" "$here/torch_bench.py" --mib "$mib" --json "$OUT/sections/torch.json" \
  --scale-shapes "$here/scale-shapes.json" \
  $([ -f "$gpt2_file" ] && echo --gpt2 "$gpt2_file" --gpt2-heads 12)

# Each failed section once more under compute-sanitizer's memcheck, with
# what is left of the budget: an illegal address poisons the CUDA context
# and fails every later row of its section, while memcheck names the
# kernel, its source line (-lineinfo) and the address. Its log is
# $OUT/sections/memcheck-NAME.log; exit 9 means it found errors.
sanitizer="$work/sanitizer/bin/compute-sanitizer"
first_pass=("${steps[@]}")
for s in "${first_pass[@]}"; do
  read -r name rc _ <<<"$s"
  case "$rc" in 0|77|not-run) continue ;; esac
  [ -n "${section_args[$name]:-}" ] || continue
  if [ ! -x "$sanitizer" ]; then
    echo "== $name failed; no compute-sanitizer in the bundle to rerun it under memcheck"
    continue
  fi
  eval "args=(${section_args[$name]})"
  step "memcheck-$name" 150 "$sanitizer" --tool memcheck --error-exitcode 9 --print-limit 20 \
    --show-backtrace device --log-file "$OUT/sections/memcheck-$name.log" "$bin" "${args[@]}"
  grep -E "^========= (Invalid|Program hit|Error|ERROR SUMMARY)|^=========     at " \
    "$OUT/sections/memcheck-$name.log" 2>/dev/null | head -40
done

"$python" - "$OUT" "${steps[@]}" <<'PY'
import json, os, sys
out, steps = sys.argv[1], sys.argv[2:]
result = {"steps": [], "rows": []}
for s in steps:
    name, rc, took = s.split(" ")
    result["steps"].append({"step": name, "exit": rc, "seconds": int(took)})
    path = os.path.join(out, "sections", name + ".json")
    if os.path.exists(path):
        try:
            result["rows"] += json.load(open(path))
        except ValueError:
            pass
json.dump(result, open(os.path.join(out, "results.json"), "w"), indent=1)
failed = [r for r in result["rows"] if not r["ok"]]
print("== summary: %d rows, %d failed" % (len(result["rows"]), len(failed)))
for r in failed:
    print("FAIL | %s | %s | %s" % (r["section"], r["item"], r["detail"]))
for s in result["steps"]:
    print("step %-16s exit %-7s %4d s" % (s["step"], s["exit"], s["seconds"]))
PY
echo "== done in $(( $(date +%s) - start )) s: $([ $overall = 0 ] && echo PASSED || echo FAILED); log $OUT/device-check.log, results $OUT/results.json"
return $overall
}
main 2>&1 | tee "$OUT/device-check.log"
exit "${PIPESTATUS[0]}"
