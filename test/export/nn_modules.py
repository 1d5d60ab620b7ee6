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


class EmbeddingBags(nn.Module):
    """nn.EmbeddingBag on a 2-d input (bags of one size) in its three modes,
    the sum one with per-sample weights, under a linear and a cos-weighted
    mean: embedding rows reshaped into bags, then sum / mean / amax."""

    def __init__(self, vocab=20, dim=8):
        super().__init__()
        self.bags = nn.ModuleDict({m: nn.EmbeddingBag(vocab, dim, mode=m)
                                   for m in ("sum", "mean", "max")})
        self.fc = nn.Linear(3 * dim, 3)

    def forward(self, ids):
        weights = torch.cos(ids.float())
        h = torch.cat([self.bags["sum"](ids, per_sample_weights=weights),
                       self.bags["mean"](ids), self.bags["max"](ids)], dim=1)
        out = self.fc(h)
        w = torch.cos(torch.arange(out.shape[-1], dtype=out.dtype, device=out.device))
        return (out * w).mean()


class BilinearNet(nn.Module):
    """nn.Bilinear (F.bilinear's aten._trilinear) between a feature and a
    linear of it, with its bias, under a cos-weighted mean."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 5)
        self.bil = nn.Bilinear(4, 5, 3)

    def forward(self, x):
        out = self.bil(x, torch.tanh(self.proj(x)))
        w = torch.cos(torch.arange(out.shape[-1], dtype=out.dtype, device=out.device))
        return (out * w).mean()
