"""Prints, for each op of a plan (`shardc compile --emit plan`) that may
write over one of its operands (plan::overwritableOperand), whether it
does: embedding_backward into its acc, cross_entropy_backward into its
logits, either into the operand's buffer or a view of the same base
buffer. Exits 1 if one does not, or if there is neither.

    python3 in_place.py PLAN.json
"""
import json
import sys

OVERWRITABLE = {"embedding_backward": 2, "cross_entropy_backward": 0}

plan = json.load(open(sys.argv[1]))
found = 0
ok = True
for function in plan["functions"]:
    buffers = function["buffers"]

    def base(buffer_id):
        return buffers[buffer_id].get("alias_of", buffer_id)

    for inst in function["body"]:
        operand = OVERWRITABLE.get(inst["op"])
        if operand is None or operand >= len(inst["inputs"]):
            continue
        found += 1
        source, out = inst["inputs"][operand], inst["outputs"][0]
        in_place = base(source) == base(out)
        ok &= in_place
        print("%s: %s into %s, operand %s: %s" % (
            function["name"], inst["op"], buffers[out]["name"], buffers[source]["name"],
            "in place" if in_place else "NOT in place"))
if not found:
    print("no op that may write over an operand")
sys.exit(0 if found and ok else 1)
