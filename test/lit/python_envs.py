"""Are the Pythons the lit suite needs there? (ctest test python-envs)

Without them lit marks their tests UNSUPPORTED inside the one ctest test
`lit`, which still passes; this test puts the fact into ctest's closing
summary instead: "Skipped" (prints SKIPPED:) when one is missing, and a
failure when CI=true, where scripts/install-deps.sh installs both (lit's
own configuration fails then too, test/lit/lit.cfg.py).
"""
import os
import subprocess
import sys

ENVS = [("/usr/bin/python3", ["torch"], "Debian's torch 1.13 (python3-torch)"),
        (os.path.join(os.environ.get("SHARDC_VENV", "/opt/shardc-venv"), "bin", "python"),
         ["torch", "safetensors", "numpy"], "the pinned environment (docs/python-env.md)"),
        (os.path.join(os.environ.get("SHARDC_VENV", "/opt/shardc-venv"), "bin", "python"),
         ["transformers", "timm"], "its Hugging Face packages (docs/python-env.md)")]

missing = []
for python, modules, what in ENVS:
    probe = ("import importlib.util, sys; "
             "sys.exit(any(importlib.util.find_spec(m) is None for m in %r))" % (modules,))
    try:
        ok = subprocess.run([python, "-c", probe], capture_output=True).returncode == 0
    except OSError:
        ok = False
    print("%s: %s (%s)" % (python, "has " + ", ".join(modules) if ok else "MISSING", what))
    if not ok:
        missing.append("%s lacks %s" % (python, ", ".join(modules)))

if missing and os.environ.get("CI") == "true":
    print("FAIL: CI=true but " + "; ".join(missing) + ": run scripts/install-deps.sh")
    sys.exit(1)
if missing:
    print("SKIPPED: lit tests needing them are UNSUPPORTED: " + "; ".join(missing))
