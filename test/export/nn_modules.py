"""torch.nn modules whose ATen forms needed mappings of their own, for
test/lit/export/aten-nn-modules.test: LPPool2d and Softshrink decompose
through torch.sign, CosineSimilarity through clamp with a tensor bound (its
eps floor), and AdaptiveMaxPool2d trains through max_pool_backward where
its blocks are equal. The loss is a cos-weighted mean of all of them."""

import torch
import torch.nn as nn


class PoolsAndSimilarity(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.lp = nn.LPPool2d(2, 2)
        self.shrink = nn.Softshrink(0.3)
        self.block_max = nn.AdaptiveMaxPool2d(2)   # 6 x 6 -> 2 x 2: 3 x 3 blocks
        self.global_max = nn.AdaptiveMaxPool2d(1)
        self.proj = nn.Linear(8, 8)
        self.cos = nn.CosineSimilarity(dim=1)

    def forward(self, x):
        h = self.conv(x)                                        # [N, 8, 6, 6]
        pooled = self.global_max(h).flatten(1)                  # [N, 8]
        parts = [self.lp(h).flatten(1), self.shrink(h).flatten(1),
                 self.block_max(h).flatten(1), self.cos(pooled, self.proj(pooled))[:, None]]
        out = torch.cat(parts, dim=1)
        w = torch.cos(torch.arange(out.shape[-1], dtype=out.dtype, device=out.device))
        return (out * w).mean()
