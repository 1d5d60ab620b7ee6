"""RoBERTa's position ids and the integer-value ops (test/lit/shardc/int-values.test):
`make` writes the inputs (token ids with padding 1s, floats with fractions,
NaN and values past int64); `check` recomputes every output with torch and
requires equal values and dtypes (bool results are int64 1/0 in the graph)."""
import sys

import torch
from safetensors.torch import load_file, save_file

if sys.argv[1] == "make":
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, 6, (3, 12), generator=g)
    ids[:, -3:] = 1  # right padding, as a tokenizer pads
    x = torch.randn(3, 12, generator=g) * 40
    x[0, 0], x[1, 1], x[2, 2] = float("nan"), 1e20, -2.5
    save_file({"ids": ids, "x": x}, sys.argv[2])
    sys.exit(0)

inputs, out = load_file(sys.argv[2]), load_file(sys.argv[3])
ids, x = inputs["ids"], inputs["x"]
mask = ids.ne(1).int()
positions = ((torch.cumsum(mask, dim=1).type_as(mask)) * mask).long() + 1
want = {
    "mask": mask.long(),
    "positions": positions,
    "offset": positions - ids,
    "truncated": x.long(),
    "below": (x < 0.5).long(),
    "same": (x.long() == positions).long(),
    "positions_bf16": positions.bfloat16(),
    "running": torch.cumsum(x, dim=0),
}
for name, w in want.items():
    got = out[name]
    assert got.dtype == w.dtype, (name, got.dtype, w.dtype)
    assert torch.equal(got, w) or (name == "running" and torch.equal(got.isnan(), w.isnan()) and
                                   torch.equal(got.nan_to_num(), w.nan_to_num())), (name, got, w)
print("int values equal torch's: %d outputs, positions %s" % (len(want), positions[0].tolist()))
