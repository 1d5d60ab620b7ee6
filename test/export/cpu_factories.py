"""Code written for the CPU: tensors made inside forward without a device,
mixed with the inputs (test/lit/export/aten-cpu-factories.test)."""

import torch
import torch.nn as nn


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
