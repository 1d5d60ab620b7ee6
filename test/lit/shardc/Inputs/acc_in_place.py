"""Prints, for each embedding_backward with an acc operand in a plan
(`shardc compile --emit plan`), whether it writes into acc's own buffer,
and exits 1 if one does not or there is none.

    python3 acc_in_place.py PLAN.json
"""
import json
import sys

plan = json.load(open(sys.argv[1]))
found = 0
ok = True
for function in plan["functions"]:
    for inst in function["body"]:
        if inst["op"] != "embedding_backward" or len(inst["inputs"]) != 3:
            continue
        found += 1
        acc, out = inst["inputs"][2], inst["outputs"][0]
        in_place = acc == out
        ok &= in_place
        print("%s: embedding_backward into %s, acc %s: %s" % (
            function["name"], function["buffers"][out]["name"],
            function["buffers"][acc]["name"], "in place" if in_place else "NOT in place"))
if not found:
    print("no embedding_backward with an acc operand")
sys.exit(0 if found and ok else 1)
