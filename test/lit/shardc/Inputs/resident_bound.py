"""Checks the OS's resident figure of a `shardc run --report json` report
against the ledger's (README.md, "Two memory figures"):

    largest rank peak <= resident peak growth <= held + copies + slack

held: the ranks' host allocator peaks summed (the ledger's bytes plus
freed blocks kept for reuse); slack = 8 MiB + 1 MiB per rank
(test/pipeline/ResidentMemoryTest.cpp says why). Run on a fresh `shardc
run` process, where nothing freed earlier can be reused without a page
fault, so the lower bound holds too.
Prints one line; exits 1 when a bound fails.
"""
import json
import sys

report = json.load(open(sys.argv[1]))
growth = report["resident_peak_growth_bytes"]
ledger = report["ledger_peak_sum_bytes"]
held = report["held_peak_sum_bytes"]
copies = report["host_copy_bytes"]
n = report["world_size"]
largest = max(max(r["init"]["peak_bytes"], r.get("forward", {}).get("peak_bytes", 0))
              for r in report["ranks"])
upper = held + copies + (8 << 20) + (1 << 20) * n
ok = growth is not None and ledger <= held and largest <= growth <= upper
print("%s N=%d: %d <= growth %s <= %d: %s" % (report["model"].split("/")[-1], n, largest,
                                              growth, upper, "ok" if ok else "FAILED"))
sys.exit(0 if ok else 1)
