"""Constructors that compute with tensors and read the values back
(test/lit/export/aten-views.test): torchvision's RegNet derives its widths
as below; swin_v2 initializes logit_scale as log(10 * ones)."""

import math

import torch
import torch.nn as nn


class WidthsFromTensors(nn.Module):
    def __init__(self):
        super().__init__()
        # RegNet's pattern: arange * slope + w0, rounded, read with tolist()
        widths = (torch.round((torch.arange(3) * 2.5 + 8) / 4) * 4).int().tolist()
        # timm's RegNet counts its stages: a value-dependent shape
        # (torch.unique has no meta kernel; it runs on the CPU shadow)
        stages = len(torch.unique(torch.tensor(widths, device="cpu")))
        assert stages == 2, stages
        dims = [4] + widths
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))
        self.depth = int(torch.tensor(len(widths)).item())
        self.logit_scale = nn.Parameter(torch.log(10 * torch.ones((widths[-1],))))

    def forward(self, x):
        for layer in self.layers[:self.depth]:
            x = torch.relu(layer(x))
        return x * self.logit_scale.clamp(max=math.log(100.0)).exp()


class ReadsParameter(nn.Module):
    """Reads a parameter's values in __init__: no shadow, still refused."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3))
        self.n = int(self.w.sum().item() > 0)

    def forward(self, x):
        return x * self.w


class BufferOnParamDevice(nn.Module):
    """Builds a non-persistent buffer on a parameter's device (timm's Swin
    builds its window mask on norm1.weight.device): built with parameters
    on meta, the buffer is on meta too, so the exporter builds the model
    again with real parameters to read its values."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 6))
        ramp = torch.arange(24, device=self.w.device, dtype=self.w.dtype).reshape(4, 6)
        self.register_buffer("table", torch.sin(ramp) * 3, persistent=False)

    def forward(self, x):
        return x * self.w + self.table


class BufferCopiedFromParamDevice(nn.Module):
    """Fills a CPU buffer from a tensor built on a parameter's device (timm's
    SwinV2-CR): with parameters on meta the copy itself fails, so the
    exporter builds the model with real parameters to read the buffer."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 6))
        self.register_buffer("table", torch.empty(4, 6), persistent=False)
        ramp = torch.arange(24, device=self.w.device, dtype=self.w.dtype).reshape(4, 6)
        self.table.copy_(torch.sin(ramp) * 3)

    def forward(self, x):
        return x * self.w + self.table


class ElementwiseInit(nn.Module):
    """ConViT's local init: a parameter written element by element in
    __init__, then scaled. No init op expresses it, but its values do not
    depend on the seed: constant data."""

    def __init__(self):
        super().__init__()
        self.pos = nn.Linear(3, 4, bias=False)
        for h in range(4):
            self.pos.weight.data[h, 2] = -1
            self.pos.weight.data[h, 1] = 2 * (h % 2) - 1
            self.pos.weight.data[h, 0] = 2 * (h // 2) - 1
        self.pos.weight.data *= 0.5

    def forward(self, x):
        return self.pos(x)


class SeedDependentPartialInit(nn.Module):
    """A random parameter with one element overwritten: neither an init chain
    nor constant data (an error)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 3))
        self.w.data[1, 2] = 0

    def forward(self, x):
        return x @ self.w.t()


class PartlyUninitialized(nn.Module):
    """torch.empty with only one column written: the rest is never
    initialized (an error, not constant data)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.empty(4, 3))
        self.w.data[:, 0] = 1.0

    def forward(self, x):
        return x @ self.w.t()
