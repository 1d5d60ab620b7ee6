"""Writes one int64 tensor of token ids as a safetensors file (stdlib only):
   make_ids.py OUT NAME ROWS COLS HIGH [SEED]
Ids are a fixed pseudo-random sequence in [0, HIGH), so tests can give a
global batch of any size to `shardc run --inputs`."""
import json
import random
import struct
import sys

out, name, rows, cols, high = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
rng = random.Random(int(sys.argv[6]) if len(sys.argv) > 6 else 0)
data = struct.pack("<%dq" % (rows * cols), *(rng.randrange(high) for _ in range(rows * cols)))
header = json.dumps({name: {"dtype": "I64", "shape": [rows, cols],
                            "data_offsets": [0, len(data)]}}).encode()
header += b" " * (-len(header) % 8)
with open(out, "wb") as f:
    f.write(struct.pack("<Q", len(header)) + header + data)
