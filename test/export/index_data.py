"""Parameters read at a constant index that no strided read expresses
(test/lit/export/aten-index-data.test): the index becomes constant data, an
int64 buffer, read by `embedding`."""

import torch
import torch.nn as nn


def beit_index(w):
    """BEiT's relative position index for a w x w grid plus a class token:
    the grid's pairs are affine in their coordinates, the class token's row,
    column and corner take the table's last three entries, so the whole
    index is not affine."""
    coords = torch.stack(torch.meshgrid(torch.arange(w), torch.arange(w), indexing="ij"))
    coords = coords.flatten(1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (w - 1)
    n = (2 * w - 1) ** 2
    index = torch.zeros(w * w + 1, w * w + 1, dtype=torch.int64)
    index[1:, 1:] = rel[:, :, 0] * (2 * w - 1) + rel[:, :, 1]
    index[0, :] = n
    index[:, 0] = n + 1
    index[0, 0] = n + 2
    return index


class BeitBias(nn.Module):
    """table[index.view(-1)] on dim 0 of a [(2w-1)^2 + 3, heads] parameter."""

    def __init__(self, w=3, heads=2):
        super().__init__()
        self.w, self.heads = w, heads
        self.table = nn.Parameter(torch.randn((2 * w - 1) ** 2 + 3, heads))
        self.register_buffer("index", beit_index(w), persistent=False)

    def forward(self, x):
        n = self.w * self.w + 1
        bias = self.table[self.index.view(-1)].view(n, n, self.heads).permute(2, 0, 1)
        return x + bias


class LevitBias(nn.Module):
    """biases[:, offsets] on dim 1 of a [heads, w * w] parameter, offsets
    |dy| * w + |dx| between the grid's points (LeViT, EfficientFormer)."""

    def __init__(self, w=3, heads=2):
        super().__init__()
        points = [(y, x) for y in range(w) for x in range(w)]
        offsets = [[abs(a[0] - b[0]) * w + abs(a[1] - b[1]) for b in points] for a in points]
        self.biases = nn.Parameter(torch.randn(heads, w * w))
        self.register_buffer("offsets", torch.tensor(offsets), persistent=False)

    def forward(self, x):
        return x + self.biases[:, self.offsets]


class MiddleDim(nn.Module):
    """A [2, 5, 3] parameter read on its middle dim at a non-affine index of
    shape [2, 2]: the rows move to dim 0 and back around `embedding`."""

    def __init__(self):
        super().__init__()
        self.p = nn.Parameter(torch.randn(2, 5, 3))
        self.register_buffer("idx", torch.tensor([[4, 0], [1, 1]]), persistent=False)

    def forward(self, x):
        return x + self.p[:, self.idx]
