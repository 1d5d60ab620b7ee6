"""Mixture-of-experts blocks written by hand (test/lit/export/aten-hf-errors.test):
the router is static (topk, gather), the expert loop is not."""

import torch
import torch.nn as nn


class LoopedExperts(nn.Module):
    """A router with topk, then each expert run on the tokens routed to it,
    found with torch.where: how many tokens an expert gets depends on the
    router's values, a shape no static graph holds."""

    def __init__(self, dim=16, experts=4, k=2):
        super().__init__()
        self.k = k
        self.router = nn.Linear(dim, experts, bias=False)
        self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(experts))

    def forward(self, x):
        weights, chosen = torch.topk(self.router(x).softmax(-1), self.k, dim=-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            token, slot = torch.where(chosen == e)
            out = out.index_add(0, token, expert(x[token]) * weights[token, slot, None])
        return out
