"""Checks `shardc run --profile --report json` against the plan: on every
rank, each op kind's calls per forward equal the forward's instructions of
that op that run on the rank (those without a `rank` attribute or with the
rank's own), and the seconds are positive and sum to at most the slowest
forward's wall time. Prints one line per rank."""
import collections
import json
import sys

plan = json.load(open(sys.argv[1]))
report = json.load(open(sys.argv[2]))
forward = next(f for f in plan["functions"] if f["name"] == "forward")
for rank in report["ranks"]:
    r = rank["rank"]
    expected = collections.Counter(
        i["op"] for i in forward["body"] if i.get("attrs", {}).get("rank", r) == r)
    profile = rank["forward_profile"]
    got = {o["op"]: o["calls"] for o in profile["ops"]}
    total = sum(o["seconds"] for o in profile["ops"])
    walls = [rank["forward_seconds"]] + [x["seconds"] for x in rank.get("forward_repeats", [])]
    problems = []
    if got != dict(expected):
        problems.append("calls %r, the plan has %r" % (got, dict(expected)))
    if not all(o["seconds"] >= 0 for o in profile["ops"]) or total <= 0:
        problems.append("seconds %r" % profile["ops"])
    if total > max(walls) + 1e-3:
        problems.append("ops sum to %.6f s, more than the slowest forward %.6f s" % (total, max(walls)))
    print("rank %d: %d forwards, %s" % (r, profile["forwards"], "; ".join(problems) or "ok"))
