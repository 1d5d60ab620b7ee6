"""Grouped-query attention: what reading shared key / value heads in place
saves (bench/README.md, "Grouped-query attention").

HF Llama with Llama 3's head layout scaled down (8 query heads of 64 sharing
2 key / value heads, width 512, MLP 1536, 4 layers, batch 2) is exported
through ATen capture at each sequence length T. Its graph's attention op
reads the 2 shared heads in place. The baseline is the same graph with the
copies the exporter made before (transformers' repeat_kv: each head
reshaped to [B, Hkv, 1, T, 64], copied g = 4 times by `cat`, reshaped to
[B, H, T, 64], for k and for v), built from it here, so both run in the
same process tree on the same runtime. Printed per T: the bytes the copies
write per layer, the largest per-rank forward peak at N = 4 of each (exact:
predicted == measured is required), and the warm forward seconds at N = 1,
one thread (median of `--repeat` warm forwards of one `shardc run`), with
torch eager's (HF's own sdpa path with repeat_kv; median of the same number,
one thread) beside them. Both graphs' outputs must be byte-identical.

    /opt/shardc-venv/bin/python bench/gqa_attention.py [--seq 1024 2048 4096]
        [--repeat 3] [--build DIR] [--workdir DIR]
"""

import copy
import json
import os
import sys

from hf_llama_runs import ROOT, export_llama, parse_args, run_shardc, torch_warm_seconds

CONFIG = {"hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 4,
          "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1024}
BATCH = 2


def export(seq, out):
    inputs = {"input_ids": {"shape": [BATCH, seq], "dtype": "int64", "high": 1024}}
    export_llama(dict(CONFIG, max_position_embeddings=seq), inputs, out)


def with_copies(graph, seq):
    """The graph with every attention's grouped k and v repeated by copies,
    as the exporter wrote them before: reshape, cat of g, reshape."""
    g = copy.deepcopy(graph)
    heads, kv = CONFIG["num_attention_heads"], CONFIG["num_key_value_heads"]
    d = CONFIG["hidden_size"] // heads
    nodes = []
    for n in g["nodes"]:
        if n["op"] == "scaled_dot_product_attention":
            for i in (1, 2):
                src = n["inputs"][i]
                one, cat, full = (n["name"] + ".repeat%d.%s" % (i, s)
                                  for s in ("one", "cat", "full"))
                nodes += [
                    {"name": one, "op": "reshape", "inputs": [src],
                     "shape": [BATCH, kv, 1, seq, d]},
                    {"name": cat, "op": "cat", "inputs": [one] * (heads // kv), "dim": 2},
                    {"name": full, "op": "reshape", "inputs": [cat],
                     "shape": [BATCH, heads, seq, d]}]
                n["inputs"][i] = full
        nodes.append(n)
    g["nodes"] = nodes
    return g


def torch_seconds(seq, repeat):
    import torch
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import zoo_hf
    model = zoo_hf.llama(**dict(CONFIG, max_position_embeddings=seq))
    ids = torch.randint(0, 1024, (BATCH, seq), generator=torch.Generator().manual_seed(0))
    return torch_warm_seconds(model, repeat, input_ids=ids)


def main():
    args, shardc, work = parse_args(__doc__, [1024, 2048, 4096], "shardc-gqa-", repeat=3)
    print("| T | copies per layer B | peak/rank N=4 B, shared | copied | shared / copied | "
          "fwd s N=1, shared | copied | shared / copied | torch eager s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for seq in args.seq:
        shared, copied = (os.path.join(work, "llama-gqa-%d-%s.json" % (seq, kind))
                          for kind in ("shared", "copied"))
        export(seq, shared)
        with open(copied, "w") as f:
            json.dump(with_copies(json.load(open(shared)), seq), f)
        peaks = [run_shardc(shardc, g, 4)[0] for g in (shared, copied)]
        outs = [os.path.join(work, "out-%d-%s.st" % (seq, k)) for k in ("shared", "copied")]
        secs = [run_shardc(shardc, g, 1, args.repeat, o)[1] for g, o in zip((shared, copied), outs)]
        if open(outs[0], "rb").read() != open(outs[1], "rb").read():
            raise SystemExit("T = %d: the shared and copied graphs' outputs differ" % seq)
        heads, d = CONFIG["num_attention_heads"], CONFIG["hidden_size"] // CONFIG[
            "num_attention_heads"]
        copies = 2 * BATCH * heads * seq * d * 4
        print("| %d | %d | %d | %d | %.2f | %.3f | %.3f | %.2f | %.3f |" % (
            seq, copies, peaks[0], peaks[1], peaks[0] / peaks[1], secs[0], secs[1],
            secs[0] / secs[1], torch_seconds(seq, args.repeat)), flush=True)


if __name__ == "__main__":
    main()
