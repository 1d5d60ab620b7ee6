"""Reads shardc's initial parameters of the Mamba in
test/lit/export/hf-mamba.test: softplus of every dt_proj bias must be a time
step in [time_step_min, time_step_max] (0.001, 0.1), spread log-uniformly
(the mean of the logs within six standard errors of the span's middle)."""
import math
import sys

import torch
from safetensors.torch import load_file

params = load_file(sys.argv[1])
dt = torch.cat([torch.nn.functional.softplus(t.double()) for name, t in sorted(params.items())
                if name.endswith("dt_proj.bias")])
lo, hi = 0.001, 0.1
inside = bool(((dt >= lo * (1 - 1e-6)) & (dt <= hi * (1 + 1e-6))).all())
logs = dt.log()
middle = (math.log(lo) + math.log(hi)) / 2
standard_error = (math.log(hi) - math.log(lo)) / math.sqrt(12 * dt.numel())
spread = abs(float(logs.mean()) - middle) < 6 * standard_error and float(logs.std()) > 1.0
if not inside:
    print("dt outside [%g, %g]: min %g max %g" % (lo, hi, float(dt.min()), float(dt.max())))
else:
    print("dt in [%g, %g]: %d values, log-uniform: %s" % (lo, hi, dt.numel(), spread))
