#!/usr/bin/env bash
# Install, build, and run every test: the Catch2 unit tests and the lit
# suite through ctest; then the runtime-only build (no MLIR) and its tests,
# the GPU bundle (scripts/gpu-bundle.sh: built and smoke-tested, no GPU
# needed), the whole suite again under ASan + UBSan (but the zoo's CI subset:
# scripts/sanitize.sh says why), and the fuzzers for a bounded
# time (docs/errors.md). SHARDC_QUICK=1 runs only the first part (for a
# quick local check; CI always runs everything).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
ctest --test-dir "${SHARDC_BUILD_DIR:-build}" --output-on-failure
if [ "${SHARDC_QUICK:-0}" = "1" ]; then
  exit 0
fi
echo "== runtime alone: every target that builds without MLIR"
bash scripts/runtime-only.sh
# The bundle a GPU machine runs (docs/gpu.md): built and smoke-tested here
# so it never rots. Needs the CUDA toolkit (the main build uses it too);
# with CI=true a missing toolkit is an error, elsewhere a skip.
echo "== GPU bundle: runtime-only shardc-gpu-tests, static OpenBLAS"
if [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null; then
  # Relinks the main build's GPU test objects with static OpenBLAS.
  SHARDC_GPU_BUNDLE_FROM="${SHARDC_BUILD_DIR:-build}" bash scripts/gpu-bundle.sh
elif [ "${CI:-}" = "true" ]; then
  echo "GPU bundle: no CUDA toolkit (nvcc) found" >&2
  exit 1
else
  echo "GPU bundle: SKIPPED (no CUDA toolkit: nvcc not found)"
fi
echo "== sanitizers: the whole suite under ASan + UBSan"
bash scripts/sanitize.sh
echo "== fuzzers"
bash scripts/fuzz.sh
