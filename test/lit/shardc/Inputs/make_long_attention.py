"""Writes a graph of one causal attention over a long sequence, grouped
query heads (2 query heads reading 1 key / value head), its loss the mean
square of the output: [1, 2, T, T] probabilities, 2T^2 elements, which the
attention gradient rule differentiates blockwise from 2^24 elements on
(sdpa_backward). With `masked`, the attention also adds an input `mask`
[1, 1, 1, T] (a padded batch's additive mask: 0 or -inf per key).

    python3 make_long_attention.py OUT.json T [masked]
"""
import json
import sys

out, T = sys.argv[1], int(sys.argv[2])
masked = sys.argv[3:] == ["masked"]


def param(name, shape):
    return {"name": name, "shape": shape, "dtype": "float32", "device": "cpu",
            "init": [{"op": "uniform", "a": -0.5, "b": 0.5}]}


def heads(name, source, n):  # [1, T, n * 4] -> [1, n, T, 4]
    return [{"name": name + ".split", "op": "reshape", "inputs": [source], "shape": [1, T, n, 4]},
            {"name": name, "op": "transpose", "inputs": [name + ".split"], "dim0": 1, "dim1": 2}]


nodes = [{"name": "q0", "op": "linear", "inputs": ["x", "wq"]},
         {"name": "k0", "op": "linear", "inputs": ["x", "wk"]},
         {"name": "v0", "op": "linear", "inputs": ["x", "wv"]}]
nodes += heads("q", "q0", 2) + heads("k", "k0", 1) + heads("v", "v0", 1)
nodes += [{"name": "att", "op": "scaled_dot_product_attention",
           "inputs": ["q", "k", "v"] + (["mask"] if masked else []), "causal": True},
          {"name": "square", "op": "mul", "inputs": ["att", "att"]},
          {"name": "loss", "op": "mean", "inputs": ["square"]}]
graph = {"format": "shardc-graph", "version": 1, "name": "long-attention",
         "parameters": [param("wq", [8, 8]), param("wk", [4, 8]), param("wv", [4, 8])],
         "inputs": [{"name": "x", "shape": [1, T, 8], "dtype": "float32"}]
         + ([{"name": "mask", "shape": [1, 1, 1, T], "dtype": "float32"}] if masked else []),
         "nodes": nodes, "outputs": ["loss"]}
json.dump(graph, open(out, "w"), indent=1)
