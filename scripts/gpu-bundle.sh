#!/usr/bin/env bash
# Builds the GPU bundle HERE (Debian 12 + the CUDA 13 toolkit, no GPU needed)
# for a GPU machine that has no MLIR, no OpenBLAS, no Catch2, no apt and no
# network, only nvcc 13, Python with torch (cu130) and the CUDA libraries in
# torch's pip wheels (docs/gpu.md, "The GPU bundle").
#
#   bash scripts/gpu-bundle.sh            # -> gpu-bundle/ (git-ignored)
#   SHARDC_GPU_BUNDLE_FROM=build bash scripts/gpu-bundle.sh
#       relinks the main build's objects instead of a runtime-only build
#       of its own (CI: seconds, not minutes; nothing there links MLIR)
#   then, on the GPU machine, from the repository root:
#   bash gpu-bundle/device-check.sh       # OUT=<dir> collects the log + JSON
#
# What travels (gpu-bundle/):
#   bundle.tgz       sanitizer/: NVIDIA's compute-sanitizer (pip wheel, CUDA
#                    13.0, ~14 MB packed) for the memcheck rerun of a failing
#                    section; and
#                    bin/shardc-gpu-tests: the runtime-only (no MLIR) GPU test
#                    binary, stripped, with OpenBLAS, libgfortran and
#                    libquadmath linked statically; it needs glibc >= 2.35,
#                    libstdc++ (GLIBCXX <= 3.4.30, GCC 12's: Ubuntu 22.04 has
#                    it) and libcudart.so.13, libcublas(Lt).so.13,
#                    libnccl.so.2 (torch's wheels carry them), nothing else.
#                    (libstdc++ stays dynamic: Debian's static one calls
#                    arc4random, glibc 2.36.)
#   device-check.sh  finds those libraries, runs every section of the binary
#                    with its own timeout, writes one log and a results JSON;
#   torch_bench.py   the torch side of the benchmarks (the machine's torch);
#   gpt2-plan.json   GPT-2 124M (examples/make_models.py, batch 1, 1024
#                    tokens) compiled HERE by `shardc compile --emit plan`:
#                    the runtime in the bundle runs a plan file, the compiler
#                    (MLIR) stays here. Needs the main build's shardc
#                    ($SHARDC_BUILD_DIR or build/, scripts/build.sh first).
#   session-*.json, session-int-bound
#                    llama-tiny (N = 3), gpt2-tiny (N = 8), a mixture of
#                    experts and a convnet
#                    (N = 2), compiled here too, and llama-tiny's token ids'
#                    bound, for the `session` section (GPU session vs CPU).
#   scale-llama3-70b-n64.json, scale-shapes.json
#                    Llama 3 70B at N = 64 (2.4 MB of plan) for the `scale`
#                    section (rank 0 alone on the GPU), and rank 0's shard
#                    shapes and init ops for torch_bench.py's baseline.
# The shardc CLI itself is not in the bundle: it links MLIR.
#
# Smoke test: the binary must load and exit 77 here (no GPU visible). Fails
# when the CUDA toolkit is missing (SHARDC_CUDA=ON).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build_dir=${SHARDC_GPU_BUNDLE_BUILD_DIR:-build-gpu-bundle}
dest=${SHARDC_GPU_BUNDLE_DIR:-gpu-bundle}
werror=OFF
if [ "${CI:-}" = "true" ]; then werror=ON; fi
openblas=/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.a
[ -f "$openblas" ] || { echo "gpu-bundle: $openblas missing (apt-get install libopenblas-dev)" >&2; exit 1; }

start=$(date +%s)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin"
if [ -n "${SHARDC_GPU_BUNDLE_FROM:-}" ]; then
  # Relink the objects of an existing build (CI: the main build, which
  # compiled the CUDA runtime and the GPU tests already; none of them links
  # MLIR) with the static OpenBLAS: seconds instead of a second compile.
  from=$SHARDC_GPU_BUNDLE_FROM
  cmake --build "$from" --target shardc-gpu-tests >/dev/null
  link=$(ninja -C "$from" -t commands bin/shardc-gpu-tests | tail -1)
  case "$link" in *libopenblas.so*) ;; *)
    echo "gpu-bundle: $from's link line of shardc-gpu-tests names no libopenblas.so" >&2; exit 1 ;;
  esac
  case "$link" in *libMLIR*|*libLLVM*)
    echo "gpu-bundle: $from's shardc-gpu-tests links LLVM/MLIR" >&2; exit 1 ;;
  esac
  link=$(printf '%s' "$link" | sed -E \
    -e "s#-o bin/shardc-gpu-tests#-o $stage/shardc-gpu-tests.unstripped#" \
    -e "s#[^ ]*libopenblas\.so[^ ]*#$openblas -Wl,-Bstatic -lgfortran -lquadmath -Wl,-Bdynamic#")
  (cd "$from" && eval "$link")
  built="$stage/shardc-gpu-tests.unstripped"
else
  # Static OpenBLAS and its Fortran runtime. CUDA libraries stay dynamic
  # (the GPU machine has them, matched to its driver).
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DSHARDC_BUILD_COMPILER=OFF -DSHARDC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DSHARDC_OPENBLAS_LIB="$openblas" -DCMAKE_EXE_LINKER_FLAGS= \
    -DCMAKE_CXX_STANDARD_LIBRARIES="-Wl,-Bstatic -lgfortran -lquadmath -Wl,-Bdynamic -lpthread -lm" \
    -DSHARDC_WERROR="$werror" >/dev/null
  if grep -Eq 'lib(MLIR|LLVM)' "$build_dir/build.ninja"; then
    echo "gpu-bundle: a target links LLVM/MLIR" >&2
    exit 1
  fi
  cmake --build "$build_dir" -j "$(nproc)" --target shardc-gpu-tests
  built="$build_dir/bin/shardc-gpu-tests"
fi
strip -o "$stage/bin/shardc-gpu-tests" "$built"
rm -f "$stage/shardc-gpu-tests.unstripped"

# The libraries it may load: the three CUDA ones (NCCL's SONAME is
# libnccl.so.2), glibc's and libstdc++/libgcc_s; anything else would be
# missing over there. Symbol versions: at most glibc 2.35 and GLIBCXX 3.4.30.
unexpected=$(readelf -d "$stage/bin/shardc-gpu-tests" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' |
  grep -Ev '^(libcudart\.so\.13|libcublas\.so\.13|libcublasLt\.so\.13|libnccl\.so\.2|libc\.so\.6|libm\.so\.6|libdl\.so\.2|librt\.so\.1|libpthread\.so\.0|ld-linux-x86-64\.so\.2|libstdc\+\+\.so\.6|libgcc_s\.so\.1)$' || true)
if [ -n "$unexpected" ]; then
  echo "gpu-bundle: shardc-gpu-tests needs libraries the GPU machine lacks: $unexpected" >&2
  exit 1
fi
glibc=$(objdump -T "$stage/bin/shardc-gpu-tests" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
glibcxx=$(objdump -T "$stage/bin/shardc-gpu-tests" | grep -o 'GLIBCXX_[0-9.]*' | sort -uV | tail -1)
newest() { printf '%s\n%s\n' "$1" "$2" | sort -V | tail -1; }
if [ "$(newest "$glibc" GLIBC_2.35)" != GLIBC_2.35 ] || [ "$(newest "$glibcxx" GLIBCXX_3.4.30)" != GLIBCXX_3.4.30 ]; then
  echo "gpu-bundle: shardc-gpu-tests needs $glibc / $glibcxx, newer than glibc 2.35 / GLIBCXX_3.4.30:" >&2
  objdump -T "$stage/bin/shardc-gpu-tests" | grep -E 'GLIBC_2\.(3[6-9])|GLIBCXX_3\.4\.3[1-9]' >&2
  exit 1
fi

# Smoke test: loads its libraries, runs the host checks, skips with 77.
set +e
"$stage/bin/shardc-gpu-tests" --section host >"$stage/smoke.log" 2>&1
rc=$?
set -e
if [ "$rc" != 77 ]; then
  echo "gpu-bundle: shardc-gpu-tests exited $rc here, expected 77 (no GPU):" >&2
  cat "$stage/smoke.log" >&2
  exit 1
fi

shardc=${SHARDC_BUILD_DIR:-build}/bin/shardc
if [ ! -x "$shardc" ]; then
  echo "gpu-bundle: $shardc not found: build the compiler first (scripts/build.sh); it compiles the GPT-2 plan" >&2
  exit 1
fi
python3 examples/make_models.py --only gpt2 --batch 1 --seq 1024 --out-dir "$stage" >/dev/null
"$shardc" compile "$stage/gpt2.json" --emit plan -o "$stage/gpt2-plan.json"
# The session section's models, each at a world size with padding rows:
# llama-tiny (rope, rms_norm, sdpa, silu gating) at N = 3, gpt2-tiny at
# N = 8, a mixture of experts over tokens (router, topk, gather,
# moe_experts) and a small convnet (conv, batch/group norm, pools,
# reductions, argmax) at N = 2; and the bound of the token ids (both tiny
# models' vocabularies are at least llama-tiny's).
"$shardc" compile examples/llama-tiny.json --world-size 3 --emit plan \
  -o "$stage/session-llama-tiny.json"
"$shardc" compile examples/gpt2-tiny.json --world-size 8 --emit plan \
  -o "$stage/session-gpt2-tiny.json"
"$shardc" compile test/lit/shardc/Inputs/moe-tokens.json --world-size 2 --emit plan \
  -o "$stage/session-moe-tokens.json"
"$shardc" compile test/lit/shardc/Inputs/family-convnet.json --world-size 2 --emit plan \
  -o "$stage/session-family-convnet.json"
python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["inputs"][0]["high"])' \
  examples/llama-tiny.json >"$stage/session-int-bound"
# The scale section: Llama 3 70B (float32) at N = 64, init only; rank 0
# alone runs on the GPU. scale-shapes.json lists rank 0's shard shapes and
# init ops for torch_bench.py's side of the comparison.
python3 examples/make_llama.py --preset llama3-70b -o "$stage/llama3-70b.json" >/dev/null
"$shardc" compile "$stage/llama3-70b.json" --world-size 64 --emit plan \
  -o "$stage/scale-llama3-70b-n64.json"
python3 - "$stage/llama3-70b.json" 64 >"$stage/scale-shapes.json" <<'PY'
import json, sys
graph, world = json.load(open(sys.argv[1])), int(sys.argv[2])
shards = []
for p in graph["parameters"]:
    shape = list(p["shape"])
    if shape:
        shape[0] = -(-shape[0] // world)  # rank 0 holds the most rows
    shards.append({"shape": shape, "dtype": p["dtype"], "init": p["init"][0]})
json.dump({"model": "llama3-70b", "world_size": world, "rank": 0, "shards": shards}, sys.stdout)
PY

# compute-sanitizer, for the device check's memcheck rerun of a failing
# section (scripts/gpu/fetch-sanitizer.sh says why). Optional: without it
# (SHARDC_GPU_BUNDLE_SANITIZER=0, or no PyPI) the check runs the same and
# says that it cannot rerun.
sanitizer="no compute-sanitizer"
if [ "${SHARDC_GPU_BUNDLE_SANITIZER:-1}" != 0 ]; then
  if bash scripts/gpu/fetch-sanitizer.sh "$stage/sanitizer"; then
    sanitizer="compute-sanitizer $("$stage/sanitizer/bin/compute-sanitizer" --version | sed -n 's/^Version \([^ ]*\).*/\1/p')"
  else
    rm -rf "$stage/sanitizer"
    echo "gpu-bundle: going on without compute-sanitizer" >&2
  fi
fi

rm -rf "$dest" && mkdir -p "$dest"
tar -C "$stage" -czf "$dest/bundle.tgz" bin $([ -d "$stage/sanitizer" ] && echo sanitizer)
cp scripts/gpu/device-check.sh scripts/gpu/torch_bench.py "$stage/gpt2-plan.json" \
  "$stage"/session-*.json "$stage/session-int-bound" "$stage/scale-llama3-70b-n64.json" \
  "$stage/scale-shapes.json" "$dest/"
git -C "$root" rev-parse HEAD >"$dest/commit" 2>/dev/null || echo unknown >"$dest/commit"
echo "$glibc $glibcxx" >"$dest/needs-glibc"
bytes=$(du -sb "$dest" | cut -f1)
if [ "$bytes" -gt $((48 << 20)) ]; then
  echo "gpu-bundle: $dest is $bytes bytes, over the 48 MiB budget (the device machine takes 64 MiB with the tree)" >&2
  exit 1
fi
echo "gpu-bundle: $dest/ $((bytes >> 10)) KiB (binary $(( $(stat -c %s "$stage/bin/shardc-gpu-tests") >> 10 )) KiB stripped, needs $glibc, $glibcxx; $sanitizer), smoke test exit 77, $(( $(date +%s) - start )) s"
echo "on the GPU machine: bash $dest/device-check.sh"
