"""Weight normalization as torch.nn.utils.parametrizations.weight_norm makes
it: g = norm_except_dim(v, 2, dim) at construction, weight = g * v / ||v||
in forward (test/lit/export/weight-norm.test)."""

import torch.nn as nn
from torch.nn.utils.parametrizations import weight_norm


class WeightNormNet(nn.Module):
    def __init__(self):
        super().__init__()
        # torchaudio wav2vec2's positional conv: grouped, normed over dims 0, 1
        self.conv = weight_norm(nn.Conv1d(8, 8, 5, padding=2, groups=2), name="weight", dim=2)
        # the default dim=0: g has one row per output feature, sharded too
        self.proj = weight_norm(nn.Linear(8, 6))

    def forward(self, x):
        return self.proj(self.conv(x).transpose(1, 2))
