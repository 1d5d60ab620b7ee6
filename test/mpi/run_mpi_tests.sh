#!/usr/bin/env bash
# The mpi backend end to end (docs/mpi.md), 4 processes:
#  1. seed.json and gpt2-tiny.json: outputs (and --save-params) byte-identical
#     to the local backend; the report shows each process's OS peak RSS
#     beside its accounted peak; the JSON report carries it too. Training
#     steps likewise: AdamW, clipping, a training-mode batch norm (buffer
#     updates), data-parallel dropout, gradient accumulation, a language
#     model's head and loss fused, a summed loss over a 0-d input accumulated.
#  2. a rank dies before forward's first collective (SHARDC_TEST_DIE_AT_RANK):
#     the job exits non-zero, with the survivors' message, well within the
#     timeout; and with the launcher told not to abort the job, the survivors
#     time out themselves (--timeout 5), say so and exit non-zero.
#     --data-parallel on a 5-row batch: the same bytes as local and N = 1.
#  3. ranks that compiled different plans, and --world-size != -np, are
#     refused; a plan over --memory-budget exits 2 before any collective;
#     --device cuda where no GPU is visible exits 1 naming why.
# usage: run_mpi_tests.sh SHARDC SOURCE_DIR [MPIRUN]
set -u
SHARDC=$1
SRC=$2
MPIRUN=${3:-mpirun}
MPI=("$MPIRUN" --allow-run-as-root --oversubscribe)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

same_as_local() {  # MODEL NAME [extra args...]
  local model=$1 name=$2
  shift 2
  "$SHARDC" run "$model" --world-size 4 "$@" --outputs "$WORK/$name.local.st" \
    --save-params "$WORK/$name.local.params.st" > "$WORK/$name.local.txt" 2>&1 ||
    { fail "$name: local run failed"; cat "$WORK/$name.local.txt"; return; }
  "${MPI[@]}" -np 4 "$SHARDC" run "$model" --backend mpi "$@" --outputs "$WORK/$name.mpi.st" \
    --save-params "$WORK/$name.mpi.params.st" > "$WORK/$name.mpi.txt" 2> "$WORK/$name.mpi.err" ||
    { fail "$name: mpi run failed"; cat "$WORK/$name.mpi.txt" "$WORK/$name.mpi.err"; return; }
  cmp -s "$WORK/$name.local.st" "$WORK/$name.mpi.st" &&
    pass "$name: outputs byte-identical to the local backend" ||
    fail "$name: outputs differ from the local backend"
  cmp -s "$WORK/$name.local.params.st" "$WORK/$name.mpi.params.st" &&
    pass "$name: --save-params byte-identical to the local backend" ||
    fail "$name: saved params differ from the local backend"
  grep -q "4 MPI process(es)" "$WORK/$name.mpi.txt" &&
    grep -q "predicted == measured on every rank: yes" "$WORK/$name.mpi.txt" &&
    grep -q "peak RSS at end" "$WORK/$name.mpi.txt" &&
    [ "$(grep -cE '^ +[0-3] +[0-9,]+ +[0-9,]+ +[0-9,]+ +[0-9,]+ +\(' "$WORK/$name.mpi.txt")" = 4 ] &&
    pass "$name: report with accounted peak and OS peak RSS for each of 4 processes" ||
    { fail "$name: report lacks the RSS table"; cat "$WORK/$name.mpi.txt"; }
  # The same figures in JSON.
  "${MPI[@]}" -np 4 "$SHARDC" run "$model" --backend mpi "$@" --report json \
    > "$WORK/$name.mpi.json" 2> "$WORK/$name.mpi.json.err" &&
    python3 - "$WORK/$name.mpi.json" <<'PY' && pass "$name: JSON report carries peak_rss_bytes" ||
import json, sys
r = json.load(open(sys.argv[1]))
assert r["backend"] == "mpi" and r["world_size"] == 4 and r["predictions_hold"], r
assert [x["rank"] for x in r["ranks"]] == [0, 1, 2, 3]
for x in r["ranks"]:
    assert x["peak_rss_bytes"] >= x["peak_rss_after_init_bytes"] > 0, x
    assert x["peak_rss_bytes"] > x["init"]["peak_bytes"], x
PY
    fail "$name: JSON report"
}

same_as_local "$SRC/examples/seed.json" seed
# Training steps: each gradient reduced into its shards over MPI
# (scatter_rows), then AdamW on them (docs/training.md); three steps.
same_as_local "$SRC/test/lit/shardc/Inputs/grad-mlp.json" train-adamw --grad loss \
  --optimizer adamw --lr 0.01 --steps 3
# Master weights (docs/graph-format.md): float32 shards, each converted to
# bfloat16 into its own block of the gathered unit and gathered in place.
same_as_local "$SRC/test/lit/shardc/Inputs/master-mlp.json" train-master --grad loss \
  --optimizer adamw --lr 0.01 --steps 3
# The head and its loss fused (--fuse-linear-cross-entropy, docs/training.md):
# a next-token LM over a 4,000-token vocabulary, two AdamW steps.
python3 "$SRC/test/lit/shardc/Inputs/make_lm_loss.py" "$WORK/lm.json" 2 2 32 4000 8 64
same_as_local "$WORK/lm.json" train-fused-loss --grad loss --fuse-linear-cross-entropy \
  --optimizer adamw --lr 0.01 --steps 2
# Gradient clipping: the norm's exact sums gathered over MPI, a replicated
# 0-d parameter's gradient counted once (docs/training.md).
same_as_local "$SRC/test/lit/shardc/Inputs/grad-scalar.json" train-clipped --grad loss \
  --optimizer sgd --lr 0.5 --momentum 0.9 --clip-grad-norm 0.1 --steps 3
# A training-mode batch norm: its running statistics (the graph's updates)
# written into every process's replicated buffer (docs/graph-format.md).
same_as_local "$SRC/test/lit/shardc/Inputs/bn-train.json" train-batch-norm --grad loss \
  --optimizer sgd --lr 0.1 --momentum 0.9 --steps 2
# A training-mode batch norm, data-parallel: each process's sums of its 3
# of 12 rows added over MPI (all_reduce_sum) into the global batch's
# statistics (docs/training.md), two steps.
python3 - "$SRC/test/lit/shardc/Inputs/bn-train.json" "$WORK/bn12.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
for i in g["inputs"]:
    i["shape"][0] = 12
for n in g["nodes"]:
    if n["op"] == "reshape":  # the batch's entries: [1, C, N * L] and [C, N, L]
        n["shape"] = [1, 4, 60] if n["shape"][0] == 1 else [4, 12, 5]
json.dump(g, open(sys.argv[2], "w"))
PY
same_as_local "$WORK/bn12.json" train-batch-norm-data-parallel --grad loss \
  --optimizer sgd --lr 0.1 --momentum 0.9 --data-parallel --steps 2
# Dropout, data-parallel: each process masks its 3 of 12 rows as the whole
# batch's (docs/rng.md), two steps, a new mask each.
same_as_local "$SRC/test/lit/shardc/Inputs/dropout.json" train-dropout-data-parallel --grad loss \
  --optimizer sgd --lr 0.1 --data-parallel --steps 2
# Data-parallel training steps: 12 rows, 3 per process, the gradient
# shares summed into the shards over MPI (docs/training.md); three steps
# over two batches (--inputs repeated).
python3 -c "import json, sys; g = json.load(open(sys.argv[1])); [i['shape'].__setitem__(0, 12) for i in g['inputs']]; json.dump(g, open(sys.argv[2], 'w'))" \
  "$SRC/test/lit/shardc/Inputs/grad-mlp.json" "$WORK/mlp12.json"
if /usr/bin/python3 "$SRC/tools/torch_reference.py" --make-inputs "$WORK/mlp12.json" --seed 5 \
     --out "$WORK/mlp12-inputs.st" > /dev/null 2>&1 &&
   /usr/bin/python3 "$SRC/tools/torch_reference.py" --make-inputs "$WORK/mlp12.json" --seed 6 \
     --out "$WORK/mlp12-inputs2.st" > /dev/null 2>&1; then
  same_as_local "$SRC/test/lit/shardc/Inputs/grad-mlp.json" train-data-parallel --grad loss \
    --optimizer sgd --lr 0.1 --momentum 0.9 --data-parallel --steps 3 \
    --inputs "$WORK/mlp12-inputs.st" --inputs "$WORK/mlp12-inputs2.st"
  # Gradient accumulation: each process's 3 rows as 3 micro-steps, the
  # micro-steps' gradient shares summed over MPI (docs/training.md).
  same_as_local "$SRC/test/lit/shardc/Inputs/grad-mlp.json" train-accumulate --grad loss \
    --optimizer sgd --lr 0.1 --momentum 0.9 --accumulate 3 --steps 2 \
    --inputs "$WORK/mlp12-inputs.st"
  # A loss summed over the rows and divided by a 0-d input (a count every
  # process reads whole), accumulated: the micro-steps' sums add up.
  python3 -c "import json, sys; g = json.load(open(sys.argv[1])); g['inputs'][0]['shape'][0] = 12; json.dump(g, open(sys.argv[2], 'w'))" \
    "$SRC/test/lit/shardc/Inputs/sum-loss.json" "$WORK/sum12.json"
  /usr/bin/python3 "$SRC/tools/torch_reference.py" --make-inputs "$WORK/sum12.json" --seed 5 \
    --out "$WORK/sum12-inputs.st" > /dev/null 2>&1 &&
    same_as_local "$WORK/sum12.json" train-accumulate-sum --grad loss \
      --optimizer sgd --lr 0.1 --accumulate 3 --steps 2 --inputs "$WORK/sum12-inputs.st" ||
    fail "train-accumulate-sum: no inputs"
  # Clipped: the printed norm is rank 0's (every rank holds it), not a sum.
  same_as_local "$SRC/test/lit/shardc/Inputs/grad-mlp.json" train-data-parallel-clipped \
    --grad loss --optimizer adamw --lr 0.05 --clip-grad-norm 0.3 --data-parallel --steps 2 \
    --inputs "$WORK/mlp12-inputs.st"
  grep -q "step 2: loss = .*, grad_norm = " "$WORK/train-data-parallel-clipped.mpi.txt" &&
    [ "$(grep -o 'grad_norm = [0-9.e-]*' "$WORK/train-data-parallel-clipped.mpi.txt")" = \
      "$(grep -o 'grad_norm = [0-9.e-]*' "$WORK/train-data-parallel-clipped.local.txt")" ] &&
    pass "train-data-parallel-clipped: the same grad_norm lines as the local backend" ||
    fail "train-data-parallel-clipped: grad_norm lines differ from the local backend"
elif [ "${CI:-}" = "true" ]; then
  fail "CI=true but /usr/bin/python3 cannot make the data-parallel training inputs"
fi
GPT=$SRC/examples/gpt2-tiny.json
if /usr/bin/python3 "$SRC/tools/torch_reference.py" --make-inputs "$GPT" --seed 3 \
     --out "$WORK/gpt-inputs.st" > /dev/null 2>&1; then
  same_as_local "$GPT" gpt2-tiny --inputs "$WORK/gpt-inputs.st"
elif [ "${CI:-}" = "true" ]; then
  # install-deps installs python3-torch: in CI its absence is a failure.
  fail "CI=true but /usr/bin/python3 cannot make the gpt2-tiny inputs (python3-torch missing?)"
else
  echo "note: no PyTorch for --make-inputs; gpt2-tiny with the deterministic default inputs"
  same_as_local "$GPT" gpt2-tiny --seed 3
fi

# --data-parallel: each process runs its own rows of a 5-row global batch
# (2+1+1+1); the gathered outputs equal the local backend's and N = 1's.
python3 "$SRC/test/lit/shardc/Inputs/make_ids.py" "$WORK/dp5.st" idx 5 8 101 1
same_as_local "$GPT" gpt2-dp --data-parallel --inputs "$WORK/dp5.st"
"$SHARDC" run "$GPT" --data-parallel --inputs "$WORK/dp5.st" --outputs "$WORK/dp5.n1.st" \
  > /dev/null && cmp -s "$WORK/dp5.n1.st" "$WORK/gpt2-dp.mpi.st" &&
  pass "gpt2-dp: mpi outputs of the 5-row batch byte-identical to N = 1" ||
  fail "gpt2-dp: mpi outputs differ from N = 1"

# --batch-dim: a sequence-first input [T, B, E] split along dim 1 over the
# processes; its output, sequence-first too, is joined back in dim 1.
cat > "$WORK/seqfirst.json" <<'JSON'
{"format": "shardc-graph", "version": 1,
 "parameters": [{"name": "w", "shape": [8, 8], "dtype": "float32", "device": "cpu",
                 "init": [{"op": "normal"}]}],
 "inputs": [{"name": "x", "shape": [3, 5, 8], "dtype": "float32"}],
 "nodes": [{"name": "h", "op": "linear", "inputs": ["x", "w"]},
           {"name": "y", "op": "gelu", "inputs": ["h"]}],
 "outputs": ["y"]}
JSON
same_as_local "$WORK/seqfirst.json" seqfirst-dp --data-parallel --batch-dim x=1
"$SHARDC" run "$WORK/seqfirst.json" --outputs "$WORK/seqfirst.rep.st" > /dev/null &&
  cmp -s "$WORK/seqfirst.rep.st" "$WORK/seqfirst-dp.mpi.st" &&
  pass "seqfirst-dp: mpi outputs, batch in dim 1, byte-identical to the replicated run" ||
  fail "seqfirst-dp: mpi outputs differ from the replicated run"

# A rank dies before forward's first collective.
die_test() {  # NAME [mpirun options...]
  local name=$1
  shift
  local start end rc
  start=$(date +%s)
  SHARDC_TEST_DIE_AT_RANK=2 "${MPI[@]}" "$@" -np 4 -x SHARDC_TEST_DIE_AT_RANK "$SHARDC" run "$GPT" \
    --backend mpi --timeout 5 --outputs "$WORK/$name.st" > "$WORK/$name.out" 2> "$WORK/$name.err"
  rc=$?
  end=$(date +%s)
  echo "  ($name: exit $rc after $((end - start)) s)"
  [ $rc -ne 0 ] || fail "$name: exit code 0 although rank 2 died"
  [ $((end - start)) -le 30 ] || fail "$name: took $((end - start)) s with --timeout 5"
  [ ! -e "$WORK/$name.st" ] || fail "$name: an output file was written"
  grep -q "rank 2 exits now" "$WORK/$name.err" || fail "$name: the test hook did not fire"
  echo "$rc $((end - start))" > "$WORK/$name.rc"
}
die_test die
if grep -q "shardc: error: rank [013]: .*all_gather_many" "$WORK/die.err" ||
   grep -q "Exit code: *9" "$WORK/die.err"; then
  pass "dead rank: the job exits non-zero, naming the dead rank or where survivors waited"
else
  fail "dead rank: no understandable message"; cat "$WORK/die.err"
fi
# The launcher keeps the job alive: the survivors must time out by themselves.
die_test die-timeout --mca orte_abort_on_non_zero_status 0
if grep -q "shardc: error: rank [013]: .*all_gather_many on rank [013]: timed out after 5 s" \
     "$WORK/die-timeout.err" && [ "$(cut -d' ' -f1 "$WORK/die-timeout.rc")" = 1 ]; then
  pass "dead rank, launcher not aborting: survivors time out after 5 s and exit 1"
else
  fail "dead rank, launcher not aborting: no timeout error or wrong exit code"
  cat "$WORK/die-timeout.err"
fi

# Ranks that compiled different programs (here: different seeds) are refused.
"${MPI[@]}" -np 2 "$SHARDC" run "$SRC/examples/seed.json" --backend mpi --seed 1 : \
  -np 2 "$SHARDC" run "$SRC/examples/seed.json" --backend mpi --seed 2 \
  > "$WORK/mismatch.out" 2> "$WORK/mismatch.err"
rc=$?
[ $rc -ne 0 ] && grep -q "compiled a different plan, or has a different seed or inputs" \
  "$WORK/mismatch.err" && pass "ranks with different plans are refused (exit $rc)" ||
  { fail "plan mismatch not detected (exit $rc)"; cat "$WORK/mismatch.err"; }

"${MPI[@]}" -np 2 "$SHARDC" run "$SRC/examples/seed.json" --backend mpi --world-size 3 \
  > "$WORK/ws.out" 2> "$WORK/ws.err"
rc=$?
[ $rc -eq 2 ] && grep -q "disagrees with the 2 MPI processes" "$WORK/ws.err" &&
  pass "--world-size that disagrees with -np: exit 2" ||
  { fail "--world-size mismatch (exit $rc)"; cat "$WORK/ws.err"; }

# --memory-budget (docs/cli.md): every process finds the plan over the
# budget before any collective and the job exits 2 at once, no file; a
# budget it fits changes nothing.
"${MPI[@]}" -np 2 "$SHARDC" run "$SRC/examples/seed.json" --backend mpi --timeout 5 \
  --memory-budget 6MB --outputs "$WORK/budget.st" > "$WORK/budget.out" 2> "$WORK/budget.err"
rc=$?
[ $rc -eq 2 ] && [ ! -e "$WORK/budget.st" ] &&
  grep -q "over the memory budget of 6,000,000 bytes per rank" "$WORK/budget.err" &&
  pass "--backend mpi --memory-budget below the plan: exit 2, no file" ||
  { fail "--backend mpi --memory-budget below the plan (exit $rc)"; cat "$WORK/budget.err"; }
"${MPI[@]}" -np 2 "$SHARDC" run "$SRC/examples/seed.json" --backend mpi --memory-budget 16MiB \
  > "$WORK/roomy.out" 2> "$WORK/roomy.err" &&
  grep -q "predicted == measured on every rank: yes" "$WORK/roomy.out" &&
  pass "--backend mpi --memory-budget the plan fits: runs" ||
  { fail "--backend mpi --memory-budget the plan fits"; cat "$WORK/roomy.err"; }

# --device cuda with the GPUs hidden (CUDA_VISIBLE_DEVICES empty, on every
# machine): every rank says why and the job exits 1 at once, no file. The
# two ranks write their lines at once, so they may interleave on stderr:
# the rank prefix and the reason are looked for apart.
"${MPI[@]}" -np 2 -x CUDA_VISIBLE_DEVICES= "$SHARDC" run "$SRC/examples/seed.json" --backend mpi \
  --device cuda --timeout 5 --save "$WORK/gpu.st" --outputs "$WORK/gpu.out.st" \
  > "$WORK/gpu.out" 2> "$WORK/gpu.err"
rc=$?
[ $rc -eq 1 ] && [ ! -e "$WORK/gpu.st" ] && [ ! -e "$WORK/gpu.out.st" ] &&
  grep -qE "shardc: error: rank [01]" "$WORK/gpu.err" &&
  grep -qE -e "--device cuda: (no CUDA device visible|this shardc was built without the CUDA runtime)" \
    "$WORK/gpu.err" &&
  pass "--backend mpi --device cuda without a GPU: exit 1 with the reason, no file" ||
  { fail "--backend mpi --device cuda without a GPU (exit $rc)"; cat "$WORK/gpu.err"; }

if [ $failures -ne 0 ]; then
  echo "$failures mpi test(s) failed"
  exit 1
fi
echo "all mpi tests passed"
