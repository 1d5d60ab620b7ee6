"""Writes a nanoGPT graph (examples/make_models.py's GPT-2 builder) with a
next-token loss: targets [B, T] and loss = cross_entropy of the logits over
the B*T positions, the graph's one output.

    python3 make_lm_loss.py OUT.json LAYERS HEADS WIDTH VOCAB BATCH SEQ [bfloat16]

bfloat16: every parameter read in bfloat16 (float32 master weights) and the
logits cast to float32 before the loss, as a Hugging Face model's loss
does (logits.float()).
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "..", "examples"))
import make_models  # noqa: E402

out = sys.argv[1]
layers, heads, width, vocab, batch, seq = (int(a) for a in sys.argv[2:8])
graph = make_models.BUILDERS["gpt2"]("gpt", n_layer=layers, n_head=heads, d=width, vocab=vocab,
                                     block=seq, B=batch, T=seq).to_json()
graph["inputs"].append({"name": "targets", "shape": [batch, seq], "dtype": "int64",
                        "high": vocab})
graph["nodes"] += [
    {"name": "logits.flat", "op": "reshape", "inputs": ["logits"], "shape": [batch * seq, vocab]},
    {"name": "targets.flat", "op": "reshape", "inputs": ["targets"], "shape": [batch * seq]},
    {"name": "loss", "op": "cross_entropy", "inputs": ["logits.flat", "targets.flat"]},
]
graph["outputs"] = ["loss"]
if sys.argv[8:] == ["bfloat16"]:
    for param in graph["parameters"]:
        param["dtype"], param["master_dtype"] = "bfloat16", "float32"
    flat = next(n for n in graph["nodes"] if n.get("name") == "logits.flat")
    flat["inputs"] = ["logits.float"]
    graph["nodes"].insert(graph["nodes"].index(flat),
                          {"name": "logits.float", "op": "cast", "inputs": ["logits"],
                           "dtype": "float32"})
with open(out, "w") as f:
    json.dump(graph, f, indent=1)
