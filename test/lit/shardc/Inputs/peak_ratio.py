"""Prints the forward peaks of two `shardc run --report json` reports (the
largest rank's) and their ratio; exits 1 unless the second is at most
MAX_RATIO times the first.

    python3 peak_ratio.py KEEP.json RECOMPUTE.json MAX_RATIO
"""
import json
import sys


def peak(path):
    return max(r["forward"]["peak_bytes"] for r in json.load(open(path))["ranks"])


keep, recompute, bound = peak(sys.argv[1]), peak(sys.argv[2]), float(sys.argv[3])
ratio = recompute / keep
print("forward peak: keep %d, recompute %d, ratio %.2f <= %.2f: %s"
      % (keep, recompute, ratio, bound, "ok" if ratio <= bound else "FAILED"))
sys.exit(0 if ratio <= bound else 1)
