"""Prints each tensor of a safetensors file as "NAME DTYPE [SHAPE]", in the
file's order: what a test checks when the stored dtype is the point."""
import json
import struct
import sys

with open(sys.argv[1], "rb") as f:
    size = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(size))
for name, info in header.items():
    if name != "__metadata__":
        print(name, info["dtype"], info["shape"])
