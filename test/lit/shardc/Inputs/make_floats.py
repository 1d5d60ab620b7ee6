"""Writes one float32 tensor as a safetensors file (stdlib only):
   make_floats.py OUT NAME DIM [DIM ...]
Values are a fixed pseudo-random sequence in [-1, 1), so tests can give a
sequence-first batch to `shardc run --inputs`."""
import json
import random
import struct
import sys

out, name, shape = sys.argv[1], sys.argv[2], [int(d) for d in sys.argv[3:]]
count = 1
for d in shape:
    count *= d
rng = random.Random(0)
data = struct.pack("<%df" % count, *(rng.uniform(-1, 1) for _ in range(count)))
header = json.dumps({name: {"dtype": "F32", "shape": shape,
                            "data_offsets": [0, len(data)]}}).encode()
header += b" " * (-len(header) % 8)
with open(out, "wb") as f:
    f.write(struct.pack("<Q", len(header)) + header + data)
