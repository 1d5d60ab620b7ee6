#!/usr/bin/env python3
"""compare_rows.py FULL PART WORLD RANKS: checks that the safetensors file
PART (written by `shardc run --ranks RANKS --save`) holds, for every tensor,
exactly FULL's bytes in the rows of RANKS (rank r owns rows
[r * ceil(d0 / WORLD), ...) of dim 0; a 0-d tensor is written whole) and zeros elsewhere, and that its metadata names RANKS.
Prints one line per tensor and "same rows: N tensor(s)"; exits 1 on the
first difference. Standard library only."""
import json
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    return header, data[8 + n:]


def ranks_of(text):
    out = []
    for item in text.split(","):
        a, _, b = item.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out


def main():
    full_path, part_path, world, ranks = sys.argv[1:5]
    world, ranks = int(world), ranks_of(ranks)
    full, full_data = read(full_path)
    part, part_data = read(part_path)
    meta = part.get("__metadata__", {})
    if meta.get("shardc.ranks") != ",".join(map(str, ranks)) or \
            meta.get("shardc.world_size") != str(world):
        sys.exit("metadata does not name ranks %s of %d: %s" % (ranks, world, meta))
    count = 0
    for name, entry in full.items():
        if name == "__metadata__":
            continue
        other = part[name]
        if other["shape"] != entry["shape"] or other["dtype"] != entry["dtype"]:
            sys.exit("%s: shape/dtype differ" % name)
        a0, a1 = entry["data_offsets"]
        b0, b1 = other["data_offsets"]
        mine, theirs = full_data[a0:a1], part_data[b0:b1]
        shape = entry["shape"]
        rows = shape[0] if shape else 1
        row_bytes = (a1 - a0) // rows if rows else 0
        chunk = -(-rows // world)
        # Every parameter but a 0-d one is sharded on dim 0 (DESIGN.md).
        sharded = len(shape) > 0
        expected = bytearray(len(mine))
        if sharded:
            for r in ranks:
                lo, hi = r * chunk * row_bytes, min((r + 1) * chunk, rows) * row_bytes
                if lo < hi:
                    expected[lo:hi] = mine[lo:hi]
        else:
            expected[:] = mine
        if bytes(expected) != theirs:
            sys.exit("%s: the rows of ranks %s differ from the full run's" % (name, ranks))
        print("%s: %d bytes, rows of ranks %s equal" % (name, len(mine), ranks))
        count += 1
    print("same rows: %d tensor(s)" % count)


main()
