"""A training step's memory per rank: shardc against PyTorch FSDP2, each
with and without activation checkpointing per block (bench/README.md,
"Against FSDP2").

The model: Hugging Face's GPT2LMHeadModel (transformers, from its config:
no download), dropout 0, under its own next-token loss (labels = the
input ids), trained with AdamW. Both sides start from the same weights and
batch and take the same steps:

* FSDP2: --ranks processes on the CPU (gloo), `fully_shard` on every
  block and on the model (reshard after forward, as FSDP2's default), with
  checkpointing `torch.utils.checkpoint` around every block (use_reentrant
  False, as torch's `apply_activation_checkpointing` wraps them); the peak
  of each rank's third step (the first two create AdamW's state) by
  torch.distributed._tools.mem_tracker.MemTracker, which counts every
  tensor's storage once (parameters, gradients, activations, temporaries,
  optimizer state) as shardc's ledger counts its buffers. The tracker is
  made after the first steps: it counts only what exists when it starts
  tracking or is made while it tracks, so made before the first step it
  would miss AdamW's state (made there, outside tracking).
* shardc: the same module exported (tools/export_torch.py), `shardc run
  --grad loss --optimizer adamw --steps 3` at N = --ranks, as asked, with
  --recompute-activations, with --fuse-linear-cross-entropy and with both
  (the graph's one output, the loss, is named "output"); each rank's
  ledger peak over the steps (exact: the report's prediction is checked
  equal), and the four runs' trained parameters checked byte-identical.

The losses of both are printed: the same model, weights and batch, so the
first step's loss agrees to float rounding. So is the second step's wall
time (warm, AdamW's state made; FSDP2 between barriers, shardc the
slowest rank's first repeat), one kernel thread per rank on both sides.

    /opt/shardc-venv/bin/python bench/fsdp2_memory.py [--layers 12] [--width 768]
        [--heads 12] [--vocab 50257] [--batch 2] [--seq 256] [--ranks 2]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
STEPS = 3
# shardc's rows: as asked, recomputing activations, the head and its loss
# fused, both. Every row's trained parameters must be byte-identical.
RECOMPUTE, FUSE = "--recompute-activations", "--fuse-linear-cross-entropy"
SHARDC_FLAGS = [[], [RECOMPUTE], [FUSE], [RECOMPUTE, FUSE]]


def gpt2_lm(layers, width, heads, vocab, positions):
    """GPT2LMHeadModel without dropout, wrapped so that forward(input_ids)
    returns its mean next-token loss (labels = input_ids)."""
    import torch
    import transformers

    config = transformers.GPT2Config(n_layer=layers, n_embd=width, n_head=heads,
                                     vocab_size=vocab, n_positions=positions, resid_pdrop=0.0,
                                     embd_pdrop=0.0, attn_pdrop=0.0)

    class LanguageModelLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = transformers.GPT2LMHeadModel(config)

        def forward(self, input_ids):
            return self.model(input_ids=input_ids, labels=input_ids).loss

    return LanguageModelLoss()


FSDP2_RANK = r"""
import json, os, sys, time, torch, torch.distributed as dist
sys.path.insert(0, %(here)r)
from fsdp2_memory import gpt2_lm
from safetensors.torch import load_file
torch.set_num_threads(1)
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", rank=rank, world_size=world)
from torch.distributed.fsdp import fully_shard
from torch.distributed._tools.mem_tracker import MemTracker
from torch.utils.checkpoint import checkpoint
model = gpt2_lm(**%(config)s)
state = load_file(%(weights)r)
missing = model.load_state_dict(state, strict=False)
assert not missing.unexpected_keys, missing
blocks = model.model.transformer.h
if %(checkpointing)r:
    # torch's apply_activation_checkpointing: each block's forward under
    # torch.utils.checkpoint (non-reentrant), recomputed in its backward.
    for block in blocks:
        block._plain_forward = block.forward
        block.forward = (lambda b: lambda *a, **k: checkpoint(b._plain_forward, *a,
                                                               use_reentrant=False, **k))(block)
for block in blocks:
    fully_shard(block)
fully_shard(model)
ids = load_file(%(inputs)r)["input_ids"]
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
losses = []
for step in range(%(steps)d):
    if step == 1:  # timed: warm (AdamW's state made), not tracked
        dist.barrier()
        start = time.perf_counter()
    if step == %(steps)d - 1:
        # Tracked from here: track_external registers what exists now, the
        # optimizer's state included (made by the first step).
        tracker = MemTracker()
        tracker.track_external(model, optimizer)
        tracker.__enter__()
    loss = model(ids)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    losses.append(loss.item())
    if step == 1:
        dist.barrier()  # the slowest rank's step
        step_seconds = time.perf_counter() - start
tracker.__exit__(None, None, None)
peak = tracker.get_tracker_snapshot("peak")[torch.device("cpu")]
out = {"losses": losses, "peak": peak["Total"], "step_seconds": step_seconds,
       "parts": {str(k).split(".")[-1]: v for k, v in peak.items() if k != "Total"}}
if rank == 0:
    print(json.dumps(out))
dist.destroy_process_group()
"""


def fsdp2_step(config, weights, inputs, ranks, checkpointing):
    """The last step's MemTracker peak of rank 0 (FSDP2 shards evenly: the
    ranks' peaks differ by padding at most) and the losses."""
    code = FSDP2_RANK % {"here": HERE, "config": repr(config), "weights": weights,
                         "inputs": inputs, "checkpointing": checkpointing, "steps": STEPS}
    procs = []
    for rank in range(ranks):
        env = dict(ENV, RANK=str(rank), WORLD_SIZE=str(ranks), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT="29517")
        procs.append(subprocess.Popen([sys.executable, "-c", code], env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    outs = [p.communicate() for p in procs]
    for p, (out, err) in zip(procs, outs):
        if p.returncode:
            sys.exit("FSDP2 rank failed: " + err.strip().splitlines()[-1])
    return json.loads(outs[0][0].strip().splitlines()[-1])


def flags_file(graph, flags):
    """Where a shardc run with `flags` saves its trained parameters."""
    return graph + "".join(flags) + ".trained.safetensors"


def shardc_step(shardc, graph, weights, inputs, ranks, flags):
    cmd = [shardc, "run", graph, "--load", weights, "--inputs", inputs, "--grad", "output",
           "--optimizer", "adamw", "--lr", "1e-4", "--steps", str(STEPS), "--world-size",
           str(ranks), "--threads", "1", "--report", "json", "--save", flags_file(graph, flags)]
    p = subprocess.run(cmd + flags, env=ENV, capture_output=True, text=True)
    if p.returncode:
        sys.exit("shardc failed: " + p.stderr.strip())
    report = json.loads(p.stdout)
    assert report["predictions_hold"], "shardc's memory prediction was not exact"
    return {"losses": [s["output"] for s in report["training_steps"]],
            "peak": max(r["forward"]["peak_bytes"] for r in report["ranks"]),
            # Step 2 (the first repeat: warm, AdamW's state made), slowest rank.
            "step_seconds": max(r["forward_repeats"][0]["seconds"] for r in report["ranks"])}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shardc", default=os.path.join(ROOT, "build", "bin", "shardc"))
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--width", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    config = dict(layers=args.layers, width=args.width, heads=args.heads, vocab=args.vocab,
                  positions=args.seq)

    import torch
    with tempfile.TemporaryDirectory() as tmp:
        graph, weights, inputs = (os.path.join(tmp, f) for f in ("g.json", "w.st", "in.st"))
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "export_torch.py"),
                        "fsdp2_memory:gpt2_lm", "--python-path", HERE, "--kwargs",
                        json.dumps(config), "--seed", "5", "--input-shapes",
                        json.dumps({"input_ids": {"shape": [args.batch, args.seq],
                                                  "dtype": "int64", "high": args.vocab}}),
                        "-o", graph, "--weights", weights], check=True, env=ENV)
        from safetensors.torch import save_file
        gen = torch.Generator().manual_seed(4)
        save_file({"input_ids": torch.randint(0, args.vocab, (args.batch, args.seq),
                                              generator=gen)}, inputs)
        # The exporter names parameters as the module's state_dict: torch loads them back.
        rows = []
        for name, run in (("FSDP2", lambda: fsdp2_step(config, weights, inputs, args.ranks,
                                                         False)),
                          ("FSDP2 + checkpoint per block",
                           lambda: fsdp2_step(config, weights, inputs, args.ranks, True)),
                          *[("shardc" + "".join(" `%s`" % f for f in flags),
                             (lambda flags: lambda: shardc_step(args.shardc, graph, weights,
                                                                inputs, args.ranks, flags))(flags))
                            for flags in SHARDC_FLAGS]):
            result = run()
            rows.append((name, result))
            print("%s: peak %d B%s, losses %s" % (
                name, result["peak"], "".join(", %s %d" % kv for kv in
                                              sorted(result.get("parts", {}).items()) if kv[1]),
                result["losses"]), file=sys.stderr, flush=True)

        trained = [open(flags_file(graph, flags), "rb").read() for flags in SHARDC_FLAGS]
        same = all(t == trained[0] for t in trained)
    if not same:
        sys.exit("shardc's rows trained different parameters")

    print("GPT-2 (%d layers, width %d, vocabulary %d), batch %d x %d tokens, AdamW, "
          "N = %d; rank peak of a step; shardc's rows trained byte-identical parameters\n"
          % (args.layers, args.width, args.vocab, args.batch, args.seq, args.ranks))
    print("| run | peak per rank | MiB | / FSDP2 | step 2 s | / FSDP2 | first loss |\n"
          "|---|---|---|---|---|---|---|")
    base, base_time = rows[0][1]["peak"], rows[0][1]["step_seconds"]
    for name, result in rows:
        print("| %s | %s | %.1f | %.2f | %.3f | %.2f | %.6f |" % (
            name, format(result["peak"], ","), result["peak"] / 2**20, result["peak"] / base,
            result["step_seconds"], result["step_seconds"] / base_time, result["losses"][0]))


if __name__ == "__main__":
    main()
