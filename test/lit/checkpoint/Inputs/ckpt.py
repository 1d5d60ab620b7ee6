"""Checkpoint fixtures for test/lit/checkpoint: models, good and bad files.

  ckpt.py model OUT.json [DTYPE] [LOADS]   the test model (7x5 w, 5 b, 0-d s)
  ckpt.py bad DIR                          one malformed checkpoint per error
  ckpt.py torch-write OUT.st DTYPE         torch-made checkpoint (seeded)
  ckpt.py torch-check SHARDC.st REF.st DTYPE  values equal REF converted to DTYPE
  ckpt.py retorch IN.st OUT.st             read with torch, write with torch
"""
import json, os, struct, sys

TORCH_DT = None


def model(out, dtype="float32", loads=""):
    def p(name, shape, dt, init):
        return {"name": name, "shape": shape, "dtype": dt, "device": "cpu", "init": init}
    params = [p("w", [7, 5], dtype, [{"op": "normal", "std": 0.5}]),
              p("b", [5], "bfloat16", [{"op": "uniform"}]),
              p("s", [], "float64", [{"op": "fill", "value": 3.0}])]
    if loads == "fileless":
        params[0]["init"] = [{"op": "load"}, {"op": "mul", "value": 2.0}]
    g = {"format": "shardc-graph", "version": 1, "name": "ck", "parameters": params,
         "inputs": [{"name": "x", "shape": [5], "dtype": dtype}],
         "nodes": [{"name": "y", "op": "add", "inputs": ["w", "x"]}], "outputs": ["y"]}
    if dtype == "float16":  # forward kernels compute f32/f64/bf16: init only
        for key in ("inputs", "nodes", "outputs"):
            del g[key]
    with open(out, "w") as f:
        json.dump(g, f)


def raw(path, header, data, length=None):
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h) if length is None else length))
        f.write(h)
        f.write(data)


def bad(d):
    os.makedirs(d, exist_ok=True)
    good = {"w": {"dtype": "F32", "shape": [7, 5], "data_offsets": [0, 140]}}
    data = bytes(140)
    raw(d + "/length.st", good, data, length=1 << 40)
    raw(d + "/notjson.st", b"{not json", data)
    raw(d + "/notobject.st", b"[1, 2, 3]", b"")
    raw(d + "/dtype.st", {"w": {"dtype": "F8", "shape": [7, 5], "data_offsets": [0, 140]}}, data)
    raw(d + "/span.st", {"w": {"dtype": "F32", "shape": [7, 5], "data_offsets": [0, 70]}}, data[:70])
    raw(d + "/overlap.st", {"w": {"dtype": "F32", "shape": [7, 5], "data_offsets": [0, 140]},
                            "v": {"dtype": "F32", "shape": [1], "data_offsets": [136, 140]}}, data)
    raw(d + "/outside.st", {"w": {"dtype": "F32", "shape": [7, 5], "data_offsets": [8, 148]}}, data)
    raw(d + "/missing.st", {"v": {"dtype": "F32", "shape": [7, 5], "data_offsets": [0, 140]}}, data)
    raw(d + "/shape.st", {"w": {"dtype": "F32", "shape": [5, 7], "data_offsets": [0, 140]}}, data)
    raw(d + "/dup.st", b'{"w": {"dtype": "F32", "shape": [7, 5], "data_offsets": [0, 140]}, '
                       b'"w": {"dtype": "F32", "shape": [7, 5], "data_offsets": [0, 140]}}', data)
    raw(d + "/truncated.st", good, data[:100])
    raw(d + "/short.st", b"", b"")
    with open(d + "/tiny.st", "wb") as f:
        f.write(b"\x01\x02")
    os.makedirs(d + "/index", exist_ok=True)
    with open(d + "/index/model.safetensors.index.json", "w") as f:
        json.dump({"metadata": {}, "weight_map": {"w": "model-00001-of-00002.safetensors",
                                                  "b": "model-00002-of-00002.safetensors"}}, f)
    raw(d + "/index/model-00001-of-00002.safetensors", good, data)


def torch_write(out, dtype):
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../../../tools"))
    import torch_reference as tr
    g = torch.Generator().manual_seed(5)
    dt = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16}[dtype]
    tensors = {"w": (torch.randn(7, 5, generator=g) * 3).to(dt),
               "b": torch.rand(5, generator=g).to(dt),
               "s": torch.tensor(2.5, dtype=torch.float64).to(dt)}
    tr.write_safetensors(out, tensors)


def torch_check(mine, ref, dtype):
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../../../tools"))
    import torch_reference as tr
    a, r = tr.read_safetensors(mine), tr.read_safetensors(ref)
    bad = 0
    for name, t in a.items():
        want = r[name].to(t.dtype)
        if name == "w" and dtype != "same":
            want = r[name].to(getattr(torch, dtype)).to(t.dtype)
        if t.shape != want.shape or not torch.equal(t, want):
            print("MISMATCH", name, t.dtype, want.dtype)
            bad += 1
    print("tensors", len(a), "mismatches", bad)


def retorch(src, out):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../../../tools"))
    import torch_reference as tr
    tr.write_safetensors(out, tr.read_safetensors(src))


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"model": model, "bad": bad, "torch-write": torch_write, "torch-check": torch_check,
     "retorch": retorch}[cmd](*args)
