"""Constants built in forward, for ATen capture's folding (test/lit/export/aten-hf.test)."""

import torch
import torch.nn as nn


class RampScale(nn.Module):
    """Multiplies by a table built in forward from torch.arange: a constant
    the graph format cannot hold (it is neither a mask, ids, a rotary table
    nor all-equal), so the export must refuse it by name and line."""

    def __init__(self, d=8):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        ramp = torch.arange(x.shape[1], dtype=x.dtype, device=x.device)[:, None]
        return self.proj(x) * ramp
