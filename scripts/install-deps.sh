#!/usr/bin/env bash
# Installs what shardc needs to build and test on Debian 12 (as root).
# Skips apt entirely when everything is already there.
set -euo pipefail

packages=(
  build-essential cmake ninja-build python3
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
  catch2 nlohmann-json3-dev libopenblas-dev python3-torch
  clang libclang-rt-14-dev
  libopenmpi-dev openmpi-bin
)

missing=()
for package in "${packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
