"""Classifiers under F.cross_entropy's options (test/lit/export/aten-cross-entropy.test)."""

import torch
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


class ReducedLoss(nn.Module):
    """F.cross_entropy's other reductions and class weights in one loss:
    'sum' (Hugging Face's loss when the Trainer passes num_items_in_batch:
    the graph's cross_entropy times the counted targets), 'none' (per-token
    losses, squared) and class weights (both torch's own
    gather / where / sum graph), with nanoGPT's -1 padding."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 5)
        self.register_buffer("class_weight", torch.tensor([1.0, 2.0, 0.5, 1.0, 3.0]))

    def forward(self, x, y):
        logits = self.fc2(F.gelu(self.fc1(x)))
        summed = F.cross_entropy(logits, y, ignore_index=-1, reduction="sum") / 4.0
        per_token = F.cross_entropy(logits, y, ignore_index=-1, reduction="none")
        weighted = F.cross_entropy(logits, y, weight=self.class_weight, ignore_index=-1)
        return summed + (per_token * per_token).mean() + weighted


class DistillLoss(nn.Module):
    """Losses beyond cross_entropy whose decompositions reach isnan, any,
    an infinity, log1p and maximum: knowledge distillation (F.kl_div: xlogy's
    NaN test), a router-style z-loss (torch.logsumexp: compares |max| with
    inf), a regression onto F.one_hot targets (checks its classes with any)
    and nn.BCELoss on probabilities (max(log1p(-p), -100))."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 5)

    def forward(self, x, teacher, y):
        logits = self.fc2(F.gelu(self.fc1(x)))
        distill = F.kl_div(F.log_softmax(logits, -1), F.softmax(teacher, -1),
                           reduction="batchmean")
        z_loss = torch.logsumexp(logits, -1).square().mean()
        regression = F.mse_loss(logits, F.one_hot(y, 5).to(logits.dtype))
        bce = F.binary_cross_entropy(torch.sigmoid(logits), F.softmax(teacher, -1))
        return distill + 1e-3 * z_loss + regression + bce
