"""Constants built in forward, for ATen capture's folding (test/lit/export/aten-hf.test)."""

import torch
import torch.nn as nn


class RampScale(nn.Module):
    """Multiplies by a table built in forward from torch.arange: a constant
    that is neither a mask, ids, a rotary table nor all-equal, expressed as
    one fill buffer per distinct value (T of them) joined with cat."""

    def __init__(self, d=8):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        ramp = torch.arange(x.shape[1], dtype=x.dtype, device=x.device)[:, None]
        return self.proj(x) * ramp


class RampTable(nn.Module):
    """Multiplies by a [T, D] table of T * D distinct values (torch.arange
    reshaped, not Toeplitz): with T = D = 24 its 576 runs are more than a
    table of fill buffers may take (const_tables.MAX_RUNS = 512), so it
    becomes constant data beside the graph (const_data.py; export needs -o)."""

    def __init__(self, d=24):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        table = torch.arange(x.shape[1] * x.shape[2], dtype=x.dtype,
                             device=x.device).reshape(x.shape[1], x.shape[2])
        return self.proj(x) * table


class PaddedEmbedding(nn.Module):
    """nn.Embedding(padding_idx=5): torch's reset_parameters zeroes row 5
    (weight[5].fill_(0)), recorded as fill_rows."""

    def __init__(self, vocab=12, d=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=5)

    def forward(self, ids):
        return self.emb(ids)
