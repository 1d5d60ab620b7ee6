"""Code written for the CPU: tensors made inside forward without a device,
mixed with the inputs (test/lit/export/aten-cpu-factories.test)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class PositionsAndMask(nn.Module):
    """torch.arange(T) for positions and torch.ones(B, T, 1) for a mask, as
    many training scripts write them for the CPU (eager runs them; traced
    on meta inputs they are made on meta too)."""

    def __init__(self, width=8, positions=16):
        super().__init__()
        self.embed = nn.Embedding(positions, width)
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        batch, steps = x.shape[0], x.shape[1]
        positions = self.embed(torch.arange(steps))
        mask = torch.ones(batch, steps, 1)
        mask[:, -1] = 0.0
        return self.fc(x + positions) * mask


class PositionsSmoothedLoss(nn.Module):
    """The same positions under a label-smoothed loss, which the fx capture
    (the auto path's second try) cannot trace: the auto path comes back to
    ATen capture with the positions on meta."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 5)

    def forward(self, x, y):
        positions = torch.arange(x.shape[0]).unsqueeze(-1).to(x.dtype)
        return F.cross_entropy(self.fc(x + positions), y, label_smoothing=0.1)
