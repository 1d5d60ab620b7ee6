"""Classifiers under F.cross_entropy's options (test/lit/export/aten-cross-entropy.test)."""

import torch.nn as nn
import torch.nn.functional as F


class PaddedLoss(nn.Module):
    """ignore_index a class (a tokenizer's pad id): those targets are left out."""

    def __init__(self, pad=1):
        super().__init__()
        self.pad = pad
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 5)

    def forward(self, x, y):
        return F.cross_entropy(self.fc2(F.gelu(self.fc1(x))), y, ignore_index=self.pad)


class SmoothedLoss(nn.Module):
    """label_smoothing (torchvision's classification recipes use 0.1) with a
    padding target: ATen capture writes the smoothing term out in graph ops."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 5)

    def forward(self, x, y):
        return F.cross_entropy(self.fc2(F.gelu(self.fc1(x))), y, ignore_index=-1,
                               label_smoothing=0.1)
