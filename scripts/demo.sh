#!/usr/bin/env bash
# The main job: install, build, and run the seed case sharded over 2 local
# ranks on the CPU (the embedded default).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
./build/bin/shardc run examples/seed.json --world-size 2
