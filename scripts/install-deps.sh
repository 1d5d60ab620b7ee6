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
  python3-venv
)

missing=()
for package in "${packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if [ ${#missing[@]} -ne 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The one pinned Python environment (docs/python-env.md): current torch and
# the reference safetensors library, for the tests that check shardc against
# code the project did not write. Debian's torch 1.13 above stays for the
# exporter and reference tests that use /usr/bin/python3. The stamp is the
# requirements file as last installed: when it matches, nothing is done.
here="$(cd "$(dirname "$0")" && pwd)"
requirements="$here/python-requirements.txt"
venv="${SHARDC_VENV:-/opt/shardc-venv}"
stamp="$venv/shardc-requirements.txt"
if ! cmp -s "$requirements" "$stamp" || [ ! -x "$venv/bin/python" ]; then
  echo "install-deps: creating $venv from $requirements (about 5.4 GB, measured 76 s)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --no-cache-dir -q -r "$requirements"
  cp "$requirements" "$stamp"
fi
