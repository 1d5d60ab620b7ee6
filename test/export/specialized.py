"""Modules whose forward's Python control flow reads input values
(test/lit/export/specialized.test): the ATen capture specialises on an
input's example values (docs/exporter.md, "Specialising on input values")."""

import torch
import torch.nn as nn


class LengthsMask(nn.Module):
    """Self-attention over the first lengths[b] frames of each sequence: the
    padding mask's width comes from `.item()` on lengths (torchaudio's
    Conformer builds its mask the same way); forward returns lengths too."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.proj = nn.Linear(d, d)

    def forward(self, x, lengths):
        width = int(torch.max(lengths).item())
        mask = torch.arange(width, device=lengths.device).expand(lengths.shape[0], width) >= lengths.unsqueeze(1)
        y, _ = self.attn(x, x, x, key_padding_mask=mask, need_weights=False)
        return self.proj(y), lengths


class CountsActivations(nn.Module):
    """A shape decided by an activation's values (how many are positive):
    nothing an example input value can fix, so still refused."""

    def __init__(self, d=8):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x, lengths):
        y = self.proj(x)
        n = int((y > 0).sum().item()) + int(lengths.sum().item())
        return y.reshape(-1)[:n]
