#!/usr/bin/env bash
# Puts NVIDIA's compute-sanitizer into DEST (bin/ and lib/, as the pip wheel
# lays them out; it runs from any folder) for the GPU bundle:
#
#   bash scripts/gpu/fetch-sanitizer.sh DEST
#
# Why: the device check has one prepared run on a lent GPU. A section that
# fails there (an illegal address poisons the CUDA context, and every later
# row of the section fails with it) is rerun under memcheck in the same run,
# which names the kernel, the source line (the CUDA code is built with
# -lineinfo) and the bad address: a diagnosis instead of a second run.
#
# The wheel is pinned to CUDA 13.0 (the GPU machine's nvcc and torch cu130,
# so its driver runs it) and to its sha256; it is cached in
# ${SHARDC_CACHE_DIR:-~/.cache/shardc}. Exit 1 with the reason when it
# cannot be fetched (the bundle then goes without it).
set -euo pipefail
dest=${1:?usage: fetch-sanitizer.sh DEST}
version=13.0.85
wheel=nvidia_cuda_sanitizer_api-$version-py3-none-manylinux_2_25_x86_64.whl
sha256=b1efff95f63b6fe40dc83801d598550542364393957775912a1abf396904331c
cache=${SHARDC_CACHE_DIR:-$HOME/.cache/shardc}/sanitizer
mkdir -p "$cache"

if [ ! -f "$cache/$wheel" ] || ! echo "$sha256  $cache/$wheel" | sha256sum -c --quiet >/dev/null 2>&1; then
  venv_pip=${SHARDC_VENV:-/opt/shardc-venv}/bin/pip
  if [ -x "$venv_pip" ]; then pip=("$venv_pip"); else pip=(python3 -m pip); fi
  requirement=$(mktemp)
  trap 'rm -f "$requirement"' EXIT
  echo "nvidia-cuda-sanitizer-api==$version --hash=sha256:$sha256" >"$requirement"
  if ! timeout 300 "${pip[@]}" download -q --no-deps --only-binary=:all: --require-hashes \
      -r "$requirement" -d "$cache" >&2; then
    echo "fetch-sanitizer: pip could not download nvidia-cuda-sanitizer-api==$version" >&2
    exit 1
  fi
fi

rm -rf "$dest" && mkdir -p "$dest"
# Only the tool: bin/ (compute-sanitizer and its collection library) and
# lib/ (the injection libraries); not the headers, not the docs.
python3 - "$cache/$wheel" "$dest" <<'PY'
import os, stat, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
prefix = "nvidia/cu13/"
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        name = info.filename
        if not name.startswith(prefix) or name.endswith("/"):
            continue
        rest = name[len(prefix):]
        if rest.split("/")[0] not in ("bin", "lib"):
            continue
        path = os.path.join(dest, rest)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with z.open(info) as src, open(path, "wb") as out:
            out.write(src.read())
        os.chmod(path, 0o755)
PY
"$dest/bin/compute-sanitizer" --version | grep -q "Compute Sanitizer" || {
  echo "fetch-sanitizer: $dest/bin/compute-sanitizer does not run here" >&2
  exit 1
}
