"""Padded batches: what an attention mask costs (bench/README.md, "Padded
batches").

For each sequence length T, HF Llama (the zoo's WIDE config: 4 layers of
width 256, 4 heads, 2 key / value heads) is exported twice through ATen
capture: given input_ids only, and given input_ids and an attention_mask of
0s and 1s (a padded batch of 2; transformers builds a bool [B, 1, T, T] mask
of padding and causality that every layer's sdpa reads). Both run under
`shardc run --world-size 4`; the table prints the largest per-rank forward
peak of each (exact: predicted == measured is required), the masked one as
a ratio of the unmasked one measured in the same run, the bytes of the
scores [B, H, T, T] that an attention computed op by op holds per layer,
and both forward times at N = 1 (one thread; a cold forward: first touch of
its memory included) beside torch eager's masked forward (median of 3 warm
ones, one thread).

    /opt/shardc-venv/bin/python bench/masked_attention.py [--seq 512 1024 2048]
        [--build DIR] [--workdir DIR]
"""

import os
import sys

from hf_llama_runs import ROOT, export_llama, parse_args, run_shardc, torch_warm_seconds

WIDE = {"hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 4,
        "vocab_size": 1024}
BATCH, HEADS = 2, 4


def export(seq, masked, out):
    inputs = {"input_ids": {"shape": [BATCH, seq], "dtype": "int64", "high": 1024}}
    if masked:
        inputs["attention_mask"] = {"shape": [BATCH, seq], "dtype": "int64", "high": 2}
    export_llama(dict(WIDE, max_position_embeddings=seq), inputs, out)


def torch_masked_seconds(seq):
    import torch
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import zoo_hf
    model = zoo_hf.llama(**dict(WIDE, max_position_embeddings=seq))
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 1024, (BATCH, seq), generator=gen)
    mask = torch.randint(0, 2, (BATCH, seq), generator=gen)
    return torch_warm_seconds(model, input_ids=ids, attention_mask=mask)


def main():
    args, shardc, work = parse_args(__doc__, [512, 1024, 2048], "shardc-mask-")
    print("| T | unmasked peak/rank N=4 B | masked peak/rank N=4 B | masked / unmasked | "
          "scores per layer B | shardc fwd s unmasked N=1 | shardc fwd s masked N=1 | "
          "torch fwd s masked |")
    print("|---|---|---|---|---|---|---|---|")
    for seq in args.seq:
        plain, masked = (os.path.join(work, "llama-%d-%s.json" % (seq, kind))
                         for kind in ("plain", "masked"))
        export(seq, False, plain)
        export(seq, True, masked)
        # peaks at N = 4; seconds at N = 1 (one rank, one thread: torch's
        # conditions; N = 4 replicates the forward on every rank)
        (plain_peak, _), (masked_peak, _) = (run_shardc(shardc, g, 4) for g in (plain, masked))
        plain_s, masked_s = (run_shardc(shardc, g, 1)[1] for g in (plain, masked))
        scores = BATCH * HEADS * seq * seq * 4
        print("| %d | %d | %d | %.2f | %d | %.3f | %.3f | %.3f |" % (
            seq, plain_peak, masked_peak, masked_peak / plain_peak, scores, plain_s, masked_s,
            torch_masked_seconds(seq)), flush=True)


if __name__ == "__main__":
    main()
