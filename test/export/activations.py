"""torch.nn's activation modules as users build models with them, for
test/lit/export/aten-activations.test: each reads its own linear's output,
and the loss is a cos-weighted mean of all of them, so that every
activation's forward and gradient is checked against torch."""

import torch
import torch.nn as nn

ACTIVATIONS = {
    # decomposed by torch.export into ops the graph lacks (log1p, expm1,
    # minimum): kept whole by the exporter
    "mish": lambda: nn.Mish(),
    "softplus": lambda: nn.Softplus(beta=2.0, threshold=5.0),
    "celu": lambda: nn.CELU(0.5),
    "logsigmoid": lambda: nn.LogSigmoid(),
    # aten.elu with a scale: the graph's elu times the scale
    "selu": lambda: nn.SELU(),
    "elu": lambda: nn.ELU(0.7),
    # eval mode: leaky_relu with the mean slope
    "rrelu": lambda: nn.RReLU(0.1, 0.3),
}


class Activations(nn.Module):
    def __init__(self, width=6):
        super().__init__()
        self.names = list(ACTIVATIONS)
        self.fc = nn.ModuleDict({n: nn.Linear(4, width) for n in self.names})
        self.act = nn.ModuleDict({n: ACTIVATIONS[n]() for n in self.names})

    def forward(self, x):
        # * 4: both sides of every activation's bends (softplus's threshold,
        # logsigmoid's large negative inputs) are reached
        out = torch.stack([self.act[n](self.fc[n](x) * 4) for n in self.names])
        w = torch.cos(torch.arange(out.numel(), dtype=out.dtype, device=out.device))
        return (out * w.reshape(out.shape)).mean()
