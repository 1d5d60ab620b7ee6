"""Budgets for test/lit/shardc/memory-budget.test, from `shardc run --report
json` reports, and the check that a run kept to one.

    python3 budget.py peak REPORT.json          the largest rank's peak
    python3 budget.py between A.json B.json     halfway between two peaks
    python3 budget.py check REPORT.json BUDGET  exits 1 unless every rank's
                                                peak, measured and predicted,
                                                is at most BUDGET
"""
import json
import sys


def peaks(path):
    """Every rank's measured and predicted peak over init and forward."""
    for rank in json.load(open(path))["ranks"]:
        for phase in ("init", "forward"):
            if phase in rank:
                yield rank[phase]["peak_bytes"], rank[phase]["predicted_peak_bytes"]


def peak(path):
    return max(max(pair) for pair in peaks(path))


command = sys.argv[1]
if command == "peak":
    print(peak(sys.argv[2]))
elif command == "between":
    print((peak(sys.argv[2]) + peak(sys.argv[3])) // 2)
elif command == "check":
    budget, largest = int(sys.argv[3]), peak(sys.argv[2])
    print("peak %d <= budget %d: %s" % (largest, budget, "ok" if largest <= budget else "FAILED"))
    sys.exit(0 if largest <= budget else 1)
else:
    sys.exit("unknown command " + command)
