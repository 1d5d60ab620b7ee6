"""check_dp_memory.py REPORT.json ROWS...: a data-parallel run's JSON report
holds, for every rank, forward peak predicted == measured, and ranks with
fewer rows (ROWS, in rank order) peak strictly lower than those with more."""
import json
import sys

report = json.load(open(sys.argv[1]))
rows = [int(r) for r in sys.argv[2:]]
ranks = report["ranks"]
assert report["predictions_hold"], "predictions_hold is false"
assert len(ranks) == len(rows), (len(ranks), rows)
peaks = []
for rank in ranks:
    fwd = rank["forward"]
    assert fwd["peak_bytes"] == fwd["predicted_peak_bytes"], rank["rank"]
    assert fwd["end_bytes"] == fwd["predicted_end_bytes"], rank["rank"]
    peaks.append(fwd["peak_bytes"])
for a in range(len(rows)):
    for b in range(len(rows)):
        if rows[a] > rows[b]:
            assert peaks[a] > peaks[b], ("rank", a, rows[a], peaks[a], "rank", b, rows[b], peaks[b])
        if rows[a] == rows[b]:
            assert peaks[a] == peaks[b], ("rank", a, peaks[a], "rank", b, peaks[b])
print("ok", peaks)
