"""shardc's safetensors files against the reference `safetensors` library.

Runs with the pinned environment's python (scripts/python-requirements.txt,
docs/python-env.md): torch 2.15 and safetensors 0.8.0 from PyPI, code the
project did not write. Nothing here uses tools/torch_reference.py's parser.

  st_reference.py models DIR
      the test graphs: DIR/m-DTYPE.json (w [7, 5] DTYPE, b [5] bf16, s [] f64;
      forward y = w + x) for float32, float64, bfloat16; DIR/h.json (f16
      params, init only); DIR/e.json (an embedding of int64 ids, and the ids
      reshaped as an int64 output)
  st_reference.py fixtures DIR
      the library writes, for each DTYPE: DIR/ckpt-DTYPE.st (w, b, s in DTYPE)
      and DIR/x-DTYPE.st (the input x); DIR/ids.st (int64 ids)
  st_reference.py check-params SHARDC.st FIXTURE.st MODEL.json
      the library reads shardc's file: every tensor equals the fixture's,
      converted to the model's dtype with torch's .to()
  st_reference.py check-add OUT.st PARAMS.st INPUT.st
      y == w + x, all three read by the library (torch computes the sum)
  st_reference.py check-embedding OUT.st PARAMS.st IDS.st
      e == wte[ids], r == ids.reshape(6) (an I64 tensor shardc wrote)
  st_reference.py spec FILE...
      the header rules of the format (the safetensors README, "Format"):
      8-byte little-endian header length N; N bytes of UTF-8 JSON starting
      with '{', trailing padding only spaces; N a multiple of 8 (what the
      library writes, and what shardc documents); __metadata__ a str->str
      map; every other entry has dtype, shape, data_offsets with
      end - begin == numel * itemsize; sorted by offset the entries are
      contiguous from 0 and cover the byte buffer exactly (no holes, no
      overlap, nothing after the last tensor).

Several commands may be given in one call, separated by "+". Every check
prints one line and exits 1 on the first failure.
"""
import json
import os
import struct
import sys

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

DTYPES = {"float32": torch.float32, "float64": torch.float64,
          "bfloat16": torch.bfloat16, "float16": torch.float16}
ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4,
            "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def graph(params, inputs, nodes, outputs):
    g = {"format": "shardc-graph", "version": 1, "name": "st", "parameters": params}
    if nodes:
        g.update(inputs=inputs, nodes=nodes, outputs=outputs)
    return g


def param(name, shape, dtype, init):
    return {"name": name, "shape": shape, "dtype": dtype, "device": "cpu", "init": init}


def models(out):
    os.makedirs(out, exist_ok=True)
    for dtype in ("float32", "float64", "bfloat16"):
        g = graph([param("w", [7, 5], dtype, [{"op": "normal", "std": 0.5}]),
                   param("b", [5], "bfloat16", [{"op": "uniform"}]),
                   param("s", [], "float64", [{"op": "fill", "value": 3.0}])],
                  [{"name": "x", "shape": [5], "dtype": dtype}],
                  [{"name": "y", "op": "add", "inputs": ["w", "x"]}], ["y"])
        with open(os.path.join(out, "m-%s.json" % dtype), "w") as f:
            json.dump(g, f)
    h = graph([param("w", [7, 5], "float16", [{"op": "normal", "std": 0.5}]),
               param("b", [5], "bfloat16", [{"op": "uniform"}]),
               param("s", [], "float64", [{"op": "fill", "value": 3.0}])], [], [], [])
    with open(os.path.join(out, "h.json"), "w") as f:
        json.dump(h, f)
    e = graph([param("wte", [11, 4], "float32", [{"op": "normal"}])],
              [{"name": "ids", "shape": [2, 3], "dtype": "int64", "high": 11}],
              [{"name": "e", "op": "embedding", "inputs": ["wte", "ids"]},
               {"name": "r", "op": "reshape", "inputs": ["ids"], "shape": [6]}], ["e", "r"])
    with open(os.path.join(out, "e.json"), "w") as f:
        json.dump(e, f)


def fixtures(out):
    os.makedirs(out, exist_ok=True)
    g = torch.Generator().manual_seed(21)
    for name, dt in DTYPES.items():
        tensors = {"w": (torch.randn(7, 5, generator=g) * 3).to(dt),
                   "b": torch.rand(5, generator=g).to(dt),
                   "s": torch.tensor(2.5, dtype=torch.float64).to(dt)}
        save_file(tensors, os.path.join(out, "ckpt-%s.st" % name), metadata={"format": "pt"})
        save_file({"x": torch.randn(5, generator=g).to(dt)}, os.path.join(out, "x-%s.st" % name))
    ids = torch.tensor([[0, 10, 3], [7, 7, 1]], dtype=torch.int64)
    save_file({"ids": ids}, os.path.join(out, "ids.st"))
    print("fixtures: %d files written by safetensors" % (2 * len(DTYPES) + 1))


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def check_params(mine, fixture, model):
    got, ref = load_file(mine), load_file(fixture)
    with open(model) as f:
        dtypes = {p["name"]: DTYPES[p["dtype"]] for p in json.load(f)["parameters"]}
    if sorted(got) != sorted(dtypes):
        fail("%s holds %s, the model has %s" % (mine, sorted(got), sorted(dtypes)))
    for name, dt in dtypes.items():
        want = ref[name].to(dt)
        if not same(got[name], want):
            fail("%s: '%s' is %s %s, want %s %s" % (mine, name, got[name].dtype,
                                                   list(got[name].shape), want.dtype,
                                                   list(want.shape)))
    print("params: %d tensors equal the fixture's" % len(dtypes))


def check_add(out, params, inputs):
    y, w, x = load_file(out)["y"], load_file(params)["w"], load_file(inputs)["x"]
    if not same(y, w + x):
        fail("%s: y != w + x (max diff %s)" % (out, (y.double() - (w + x).double()).abs().max()))
    print("add: y == w + x in %s" % str(y.dtype).replace("torch.", ""))


def check_embedding(out, params, ids):
    outputs, wte, i = load_file(out), load_file(params)["wte"], load_file(ids)["ids"]
    if not same(outputs["e"], wte[i]):
        fail("%s: e != wte[ids]" % out)
    if not same(outputs["r"], i.reshape(6)):
        fail("%s: the int64 output r != ids.reshape(6)" % out)
    print("embedding: e == wte[ids] for int64 ids %s; int64 output r == ids.reshape(6)"
          % list(i.shape))


def spec(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        fail("%s: shorter than the 8-byte header length" % path)
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        fail("%s: header length %d runs past the file (%d bytes)" % (path, n, len(data)))
    if n % 8 != 0:
        fail("%s: header length %d is not a multiple of 8" % (path, n))
    raw = data[8:8 + n]
    text = raw.decode("utf-8")
    if not text.startswith("{"):
        fail("%s: header does not begin with '{'" % path)
    body = text.rstrip(" ")
    if not body.endswith("}") or any(c.isspace() and c != " " for c in text[len(body):]):
        fail("%s: header is trailed by something other than spaces" % path)
    pairs = json.loads(body, object_pairs_hook=lambda kv: kv)
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        fail("%s: duplicate keys" % path)
    header = dict(pairs)
    meta = header.pop("__metadata__", [])  # pairs, like every object here
    if not isinstance(meta, list) or not all(isinstance(k, str) and isinstance(v, str)
                                             for k, v in meta):
        fail("%s: __metadata__ is not a str -> str map" % path)
    buffer = len(data) - 8 - n
    spans = []
    for name, entry in header.items():
        entry = dict(entry)
        if sorted(entry) != ["data_offsets", "dtype", "shape"]:
            fail("%s: '%s' has keys %s" % (path, name, sorted(entry)))
        begin, end = entry["data_offsets"]
        numel = 1
        for d in entry["shape"]:
            numel *= d
        if end - begin != numel * ITEMSIZE[entry["dtype"]]:
            fail("%s: '%s' spans %d bytes, its shape needs %d" % (path, name, end - begin,
                                                                 numel * ITEMSIZE[entry["dtype"]]))
        spans.append((begin, end, name))
    position = 0
    for begin, end, name in sorted(spans):
        if begin != position:
            fail("%s: '%s' begins at %d, the previous tensor ends at %d" % (path, name, begin,
                                                                           position))
        position = end
    if position != buffer:
        fail("%s: tensors cover %d bytes of a %d-byte buffer" % (path, position, buffer))
    # And the library itself opens it and reads every tensor.
    with safe_open(path, framework="pt") as f:
        for name in f.keys():
            f.get_tensor(name)
    print("spec: %s: header %d bytes, %d tensors, contiguous over %d bytes" %
          (os.path.basename(path), n, len(spans), buffer))


COMMANDS = {"models": (models, 1), "fixtures": (fixtures, 1), "check-params": (check_params, 3),
            "check-add": (check_add, 3), "check-embedding": (check_embedding, 3),
            "spec": (spec, 1)}


def main(argv):
    # Several commands per call, separated by "+": torch takes seconds to
    # import, so the lit test starts Python twice, not once per check.
    args = argv[1:]
    while args:
        command = args[0]
        if command not in COMMANDS:
            fail("unknown command " + command)
        function, count = COMMANDS[command]
        end = args.index("+") if "+" in args else len(args)
        operands = args[1:end]
        if command == "spec":
            for path in operands:
                spec(path)
        elif len(operands) != count:
            fail("%s takes %d operands, got %d" % (command, count, len(operands)))
        else:
            function(*operands)
        args = args[end + 1:]


if __name__ == "__main__":
    main(sys.argv)
