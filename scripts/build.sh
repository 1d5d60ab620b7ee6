#!/usr/bin/env bash
# Configures and builds shardc into ./build (or $SHARDC_BUILD_DIR).
# CI=true turns warnings into errors.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${SHARDC_BUILD_DIR:-build}
werror=OFF
if [ "${CI:-}" = "true" ]; then werror=ON; fi

cmake -S . -B "$build_dir" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release \
  -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir \
  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py \
  -DSHARDC_WERROR="$werror" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
