#!/usr/bin/env bash
# The installed package, used as an outside project would (issue 7):
#   outside_consumer.sh BUILD_DIR SOURCE_DIR SHARDC_BIN WORK_DIR [GENERATOR]
set -euo pipefail
build=$1 source=$2 shardc=$3 work=$4 generator=${5:-Ninja}

# A fresh directory per run: concurrent runs never share files.
work=$work/run.$$
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix

echo "== cmake --install into $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
test -f "$prefix/include/shardc/shardc.h"
test -f "$prefix/lib/cmake/shardc/shardcConfig.cmake"

echo "== configure and build examples/embed against it"
cmake -S "$source/examples/embed" -B "$work/embed" -G "$generator" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >"$work/configure.log"
cmake --build "$work/embed" >"$work/build.log"
app=$work/embed/app

echo "== run at N = 1 and N = 4"
seed=7
"$app" --world-size 1 --seed $seed --outputs "$work/out1.safetensors" \
  --inputs-out "$work/inputs.safetensors" --graph-out "$work/traced.json"
"$app" --world-size 4 --seed $seed --outputs "$work/out4.safetensors" \
  --save "$work/params4.safetensors"
cmp "$work/out1.safetensors" "$work/out4.safetensors"

echo "== load what N = 4 saved at N = 2, into a model initialized with another seed"
"$app" --world-size 2 --seed 99 --load "$work/params4.safetensors" \
  --inputs "$work/inputs.safetensors" --outputs "$work/loaded2.safetensors"
cmp "$work/out1.safetensors" "$work/loaded2.safetensors"

echo "== the same model as graph JSON (examples/gpt2-tiny.json) through shardc run"
"$shardc" run "$source/examples/gpt2-tiny.json" --world-size 2 --seed $seed \
  --outputs "$work/json.safetensors" >/dev/null
cmp "$work/out1.safetensors" "$work/json.safetensors"

echo "== the exported trace through shardc run, with the app's inputs"
"$shardc" run "$work/traced.json" --world-size 3 --seed $seed \
  --inputs "$work/inputs.safetensors" --outputs "$work/traced.safetensors" \
  --save "$work/traced-params.safetensors" >/dev/null
cmp "$work/out1.safetensors" "$work/traced.safetensors"
# The app's cooperative save is the same file as shardc run --save.
cmp "$work/params4.safetensors" "$work/traced-params.safetensors"
echo "outside consumer: identical outputs at N = 1, N = 4, after a load at N = 2 and from graph JSON"
rm -rf "$work"
