#!/usr/bin/env bash
# The GPU check (docs/gpu.md): on a machine with one or more NVIDIA GPUs,
# builds the CUDA runtime and its tests, runs every GPU test and prints one
# table: CPU-vs-GPU bit equality of every init op and dtype, accounted bytes
# vs MemoryModel and cudaMemGetInfo for the seed case at N = 1, forward
# kernels vs the CPU ones, NCCL collectives and timeouts, init throughput in
# GB/s next to cudaMemset of the same bytes, one MLP block's forward time,
# and the same two timings in torch when torch with CUDA is installed.
# Aims at well under 8 minutes on an H100/H200 (most of it is the build).
#
#   tools/gpu-check.sh [build-dir]        (default: build-gpu)
#   SHARDC_GPU_CHECK_MIB=1024             bytes of the throughput runs, MiB
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build-gpu}
mib=${SHARDC_GPU_CHECK_MIB:-1024}
start=$(date +%s)

echo "== shardc GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader || true
else
  echo "nvidia-smi not found"
fi

echo "== build ($build_dir)"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DSHARDC_BUILD_COMPILER=OFF -DSHARDC_CUDA=ON >/dev/null
cmake --build "$build_dir" -j "$(nproc)" --target shardc-gpu-tests >/dev/null
echo "built in $(( $(date +%s) - start )) s"

echo "== shardc-gpu-tests"
set +e
"$build_dir/bin/shardc-gpu-tests" --throughput-mib "$mib" | tee "$build_dir/gpu-check.log"
status=${PIPESTATUS[0]}
set -e

if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "== torch on the same GPU"
  python3 - "$mib" <<'PY'
import sys, time, torch
mib = int(sys.argv[1]); nbytes = mib << 20
def timed(fn, repeats=5):
    fn(); torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True); stop = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats): fn()
    stop.record(); torch.cuda.synchronize()
    return start.elapsed_time(stop) / repeats
for dtype, name in ((torch.float32, "float32"), (torch.bfloat16, "bfloat16")):
    t = torch.empty(nbytes // torch.finfo(dtype).bits * 8, dtype=dtype, device="cuda")
    for op, fn in (("fill", lambda: t.fill_(0.1)), ("uniform", lambda: t.uniform_(-0.25, 0.75)),
                   ("normal", lambda: t.normal_(0.5, 0.02)),
                   ("trunc_normal", lambda: torch.nn.init.trunc_normal_(t, 0, 1, -2, 2))):
        ms = timed(fn)
        print(f"| torch      | {op + ' ' + name:<40} | -    | {nbytes / ms / 1e6:.1f} GB/s")
    del t
    x = torch.rand(4096, 768, dtype=dtype, device="cuda")
    ln = torch.nn.LayerNorm(768, bias=False).to("cuda", dtype)
    w1 = torch.nn.Linear(768, 3072, bias=False).to("cuda", dtype)
    w2 = torch.nn.Linear(3072, 768, bias=False).to("cuda", dtype)
    torch.backends.cuda.matmul.allow_tf32 = False
    with torch.no_grad():
        ms = timed(lambda: w2(torch.nn.functional.gelu(w1(ln(x)))), 10)
    print(f"| torch      | {'forward MLP block ' + name:<40} | -    | {ms:.3f} ms per block (4096 tokens)")
PY
else
  echo "== torch with CUDA not available: no torch comparison"
fi

echo "== done in $(( $(date +%s) - start )) s; shardc-gpu-tests exit status $status" \
     "(0 passed, 77 skipped: no GPU, else failed)"
exit "$status"
