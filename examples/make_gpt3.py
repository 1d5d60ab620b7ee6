#!/usr/bin/env python3
"""Writes a GPT-3-shaped graph (GPT-2 architecture at GPT-3 sizes).

    python3 examples/make_gpt3.py --preset 175b -o gpt3-175b.json
    python3 examples/make_gpt3.py --layers 24 --hidden 2048 --heads 16 -o x.json

Presets follow Brown et al. 2020, table 2.1 (vocabulary 50257, context 2048).
The file holds the program (init chains and forward), never weights, so
even the 175B graph is small; shardc plans it without allocating tensors.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_models  # noqa: E402  (the GPT-2 builder)

PRESETS = {
    "125m": dict(layers=12, hidden=768, heads=12),
    "1.3b": dict(layers=24, hidden=2048, heads=16),
    "13b": dict(layers=40, hidden=5140, heads=40),
    "175b": dict(layers=96, hidden=12288, heads=96),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS))
    ap.add_argument("--layers", type=int)
    ap.add_argument("--hidden", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--seq", type=int, default=2048, help="context length")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args(argv)
    config = dict(PRESETS[args.preset]) if args.preset else {}
    for key in ("layers", "hidden", "heads"):
        if getattr(args, key) is not None:
            config[key] = getattr(args, key)
    if set(config) != {"layers", "hidden", "heads"}:
        ap.error("give --preset or all of --layers, --hidden, --heads")
    graph = make_models.gpt2(
        "gpt3", n_layer=config["layers"], n_head=config["heads"],
        d=config["hidden"], vocab=args.vocab, block=args.seq, B=args.batch,
        T=args.seq).to_json()
    make_models.write_graph(graph, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
