#!/usr/bin/env bash
# Builds every target that needs no MLIR (-DSHARDC_BUILD_COMPILER=OFF: the
# runtime, the mpi backend, the unit and MPI tests, the init benchmark) in its
# own build directory, checks that nothing there links LLVM or MLIR ("the
# runtime never links MLIR", docs/design.md) and runs its tests.
# SHARDC_CUDA=OFF here: the main build already compiles the CUDA runtime, and
# nvcc would double this stage's time. CI=true turns warnings into errors.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${SHARDC_RUNTIME_BUILD_DIR:-build-runtime}
werror=OFF
if [ "${CI:-}" = "true" ]; then werror=ON; fi

start=$(date +%s)
cmake -S . -B "$build_dir" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release \
  -DSHARDC_BUILD_COMPILER=OFF \
  -DSHARDC_CUDA=OFF \
  -DSHARDC_WERROR="$werror" >/dev/null
if grep -Eq 'lib(MLIR|LLVM)|mlir-tblgen' "$build_dir/build.ninja"; then
  echo "runtime-only build: a target links LLVM/MLIR:" >&2
  grep -Eo '[^ ]*lib(MLIR|LLVM)[^ ]*' "$build_dir/build.ninja" | sort -u | head >&2
  exit 1
fi
cmake --build "$build_dir" -j "$(nproc)"
ctest --test-dir "$build_dir" --output-on-failure
echo "runtime-only build and tests: $(( $(date +%s) - start )) s"
