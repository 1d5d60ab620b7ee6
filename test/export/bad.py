"""Models the exporter must refuse with a clear message (test/lit/export/errors.test)."""

import torch
import torch.nn as nn


class Unmapped(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return torch.tanh(self.fc(x))  # no graph op for tanh


class Uninitialized(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.empty(4, 8))

    def forward(self, x):
        return x @ self.w


class PartialInit(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        # zeroes column 0 in place: a partial write other than whole rows
        # (nn.Embedding's padding_idx row is whole rows: fill_rows)
        with torch.no_grad():
            self.emb.weight[:, 0].fill_(0)

    def forward(self, ids):
        return self.emb(ids)


class TwoDraws(nn.Module):
    """Softplus's inverse written over two draws, a + log(-expm1(-b)): not
    Mamba's idiom (one draw read twice), so no init chain expresses it."""

    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(4))
        with torch.no_grad():
            a, b = torch.rand(4), torch.rand(4)
            self.bias.copy_(a + torch.log(-torch.expm1(-b)))

    def forward(self, x):
        return x + self.bias


class KwargsForward(nn.Module):
    """forward(x, **kwargs): only `x` takes an --input-shapes entry."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, **kwargs):
        return self.fc(x)



class SummedLoss(nn.Module):
    """F.cross_entropy(reduction="sum"): the graph's cross_entropy is a mean."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x, y):
        return nn.functional.cross_entropy(self.fc(x), y, reduction="sum")
