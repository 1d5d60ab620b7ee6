"""F.grid_sample through ATen capture (test/lit/export/aten-grid-sample.test)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class GridSampleModes(nn.Module):
    """x read at positions computed from an input (tanh(flow) * 1.3: past
    the edges too), in each mode, padding and alignment the graph op has;
    the first read is of a convolution's output (parameters to shard)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 2, 1)

    def forward(self, x, flow):  # x [N, 3, H, W], flow [N, Ho, Wo, 2]
        grid = torch.tanh(flow) * 1.3
        return (F.grid_sample(self.conv(x), grid, mode="bilinear", padding_mode="zeros",
                              align_corners=False),
                F.grid_sample(x, grid, mode="nearest", padding_mode="border", align_corners=True),
                F.grid_sample(x, grid, mode="bilinear", padding_mode="reflection",
                              align_corners=False),
                F.grid_sample(x, grid, mode="bilinear", padding_mode="reflection",
                              align_corners=True))


class Bicubic(nn.Module):
    def forward(self, x, grid):
        return F.grid_sample(x, grid, mode="bicubic", align_corners=False)
