#!/usr/bin/env bash
# Install, build, and run every test (Catch2 unit tests and the lit suite)
# through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
ctest --test-dir "${SHARDC_BUILD_DIR:-build}" --output-on-failure
