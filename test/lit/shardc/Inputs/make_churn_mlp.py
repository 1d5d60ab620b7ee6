"""Writes an MLP training graph whose buffers come in many sizes: the layer
widths are argv[2] (comma-separated), the batch argv[3] rows, the file
argv[1]. With the widths of memory-replay.test, a warm training step served
by best fit alone first-touched memory every step (docs/design.md, "Host
memory")."""
import json
import sys

path, widths, rows = sys.argv[1], [int(w) for w in sys.argv[2].split(",")], int(sys.argv[3])
params, nodes, previous = [], [], "x"
for i, (fan_in, fan_out) in enumerate(zip(widths, widths[1:])):
    params += [{"name": "fc%d.weight" % i, "shape": [fan_out, fan_in], "dtype": "float32",
                "device": "cpu", "init": [{"op": "kaiming_uniform", "a": 2.23606797749979}]},
               {"name": "fc%d.bias" % i, "shape": [fan_out], "dtype": "float32", "device": "cpu",
                "init": [{"op": "zeros"}]}]
    nodes.append({"name": "h%d" % i, "op": "linear",
                  "inputs": [previous, "fc%d.weight" % i, "fc%d.bias" % i]})
    previous = "h%d" % i
    if i + 2 < len(widths):  # no activation after the last layer
        nodes.append({"name": "a%d" % i, "op": "gelu", "inputs": [previous]})
        previous = "a%d" % i
nodes.append({"name": "loss", "op": "cross_entropy", "inputs": [previous, "target"]})
with open(path, "w") as out:
    json.dump({"format": "shardc-graph", "version": 1, "name": "churn-mlp", "parameters": params,
               "inputs": [{"name": "x", "shape": [rows, widths[0]], "dtype": "float32"},
                          {"name": "target", "shape": [rows], "dtype": "int64",
                           "high": widths[-1]}],
               "nodes": nodes, "outputs": ["loss"]}, out, indent=1)
