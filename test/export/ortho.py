"""An MLP whose weights use nn.init.orthogonal_ (not shardable: shardc computes
each on an owner rank and scatters it) next to shardable ones."""

import math

import torch
import torch.nn as nn


class OrthoMLP(nn.Module):
    def __init__(self, d_in=16, hidden=36, d_out=12):
        super().__init__()
        self.inp = nn.Linear(d_in, hidden)
        self.mid = nn.Linear(hidden, hidden, bias=False)
        self.out = nn.Linear(hidden, d_out)
        nn.init.orthogonal_(self.inp.weight)
        nn.init.orthogonal_(self.mid.weight, gain=math.sqrt(2))
        nn.init.kaiming_normal_(self.out.weight, nonlinearity="relu")
        nn.init.zeros_(self.inp.bias)

    def forward(self, x):
        h = torch.relu(self.inp(x))
        h = torch.nn.functional.silu(self.mid(h))
        return torch.softmax(self.out(h), dim=-1)
