"""Modules whose forward returns a training loss, for shardc run --grad
(test/lit/export/grad-models.test)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class ResNetLoss(nn.Module):
    """torchvision's resnet18 (convolutions, batch norm, max pooling,
    residual adds, global average pooling) under cross-entropy."""

    def __init__(self):
        super().__init__()
        import torchvision
        self.net = torchvision.models.resnet18(num_classes=10)

    def forward(self, x, target):
        return F.cross_entropy(self.net(x), target)


class EncoderLoss(nn.Module):
    """Token embeddings with a padding row, torch's nn.TransformerEncoder
    (fused multi-head attention, layer norms, GELU), a tied output head and
    a next-token loss."""

    def __init__(self, vocab=50, dim=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, padding_idx=0)
        layer = nn.TransformerEncoderLayer(dim, 4, 64, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)

    def forward(self, ids):
        T = ids.shape[1]
        mask = torch.triu(torch.full((T, T), float("-inf"), device=ids.device), diagonal=1)
        h = self.norm(self.encoder(self.embed(ids), mask=mask, is_causal=True))
        logits = h @ self.embed.weight.t()
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                               ids[:, 1:].reshape(-1))


class BatchNormNet(nn.Module):
    """Batch norm as it trains (export --train): BatchNorm2d after
    convolutions, one without affine parameters and with its own momentum,
    and a BatchNorm1d over [N, C] features, under cross-entropy."""

    def __init__(self):
        super().__init__()
        # no biases before batch norm (as ResNet's): their gradient is zero
        # in exact arithmetic, rounding noise in both frameworks
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16, affine=False, momentum=0.3)
        self.bn3 = nn.BatchNorm1d(16)
        self.fc = nn.Linear(16, 10)

    def forward(self, x, target):
        h = F.relu(self.bn1(self.conv1(x)))
        h = F.relu(self.bn2(self.conv2(h)))
        h = self.bn3(h.mean(dim=(2, 3)))
        return F.cross_entropy(self.fc(h), target)


class DropoutNet(nn.Module):
    """A linear layer under dropout: export --train gives the graph's dropout
    for p > 0 and nothing for p = 0."""

    def __init__(self, p=0.1, inplace=False):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.drop = nn.Dropout(p, inplace=inplace)

    def forward(self, x):
        return self.drop(self.fc(x)).sum()


class DetachNet(nn.Module):
    """A stop-gradient inside forward: a consistency loss whose target is
    the model's own detached output (BYOL's, a teacher's), so b's gradient
    comes from the student path only."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        h = torch.tanh(self.a(x))
        target = self.b(h).detach()
        return ((self.b(h * 0.5) - target) ** 2).mean()


class DropPathNet(nn.Module):
    """A drop path written with torch.rand, as Hugging Face's (and timm's
    older) drop_path: floor(keep + rand) is a per-sample bernoulli(keep)
    mask. raw=True uses the uniform values themselves, which has no graph
    form."""

    def __init__(self, keep=0.8, raw=False):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.keep, self.raw = keep, raw

    def forward(self, x):
        h = self.fc(x)
        noise = torch.rand((h.shape[0], 1), dtype=h.dtype, device=h.device)
        if self.raw:
            return (h * noise).sum()
        mask = (self.keep + noise).floor_()
        return (h.div(self.keep) * mask).sum()


class VideoConvNet(nn.Module):
    """Convolutions over 3 spatial dims as video models use them (a strided,
    padded stem; a dilated one; a grouped one), 3-d average and max pooling,
    under a cos-weighted mean: every input gradient inside the net is a
    transposed convolution over 3 dims."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv3d(3, 8, (3, 5, 5), stride=(1, 2, 2), padding=(1, 2, 2))
        self.dilated = nn.Conv3d(8, 8, 3, padding=2, dilation=2, bias=False)
        self.grouped = nn.Conv3d(8, 12, (1, 3, 3), stride=2, padding=(0, 1, 1), groups=4)
        self.fc = nn.Linear(12, 5)

    def forward(self, x):
        h = F.relu(self.stem(x))
        h = F.avg_pool3d(F.elu(self.dilated(h)), 2)
        h = F.max_pool3d(F.mish(self.grouped(h)), (1, 2, 2))
        out = self.fc(h.mean(dim=(2, 3, 4)))
        weights = torch.cos(torch.arange(out.numel(), dtype=out.dtype, device=out.device)).reshape(out.shape)
        return (out * weights).mean()


class TransposedConvNet(nn.Module):
    """Transposed convolutions (a decoder's upsampling, a GAN generator's)
    over 1, 2 and 3 spatial dims: strided with output_padding, grouped,
    dilated with an output_padding of the stride or more (allowed below the
    dilation), with ELU and Mish between, under a cos-weighted mean."""

    def __init__(self):
        super().__init__()
        self.up1d = nn.ConvTranspose1d(4, 6, 4, stride=2, padding=1)
        self.up2d = nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1, output_padding=1, groups=2)
        self.dil2d = nn.ConvTranspose2d(4, 3, 3, stride=1, dilation=2, output_padding=1,
                                        bias=False)
        self.up3d = nn.ConvTranspose3d(3, 2, (2, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1),
                                       output_padding=(0, 1, 1))

    def forward(self, x):
        h = F.elu(self.up1d(x), alpha=0.7)                     # [N, 6, 2L]
        h = h.unsqueeze(-1) * h.unsqueeze(-2)                  # [N, 6, 2L, 2L]
        h = F.mish(self.up2d(h))
        h = torch.tanh(self.dil2d(h))
        out = self.up3d(torch.stack([h, h.flip(-1)], dim=2))  # [N, 2, 3, ...]
        weights = torch.cos(torch.arange(out.numel(), dtype=out.dtype, device=out.device)).reshape(out.shape)
        return (out * weights).mean()


class RunningSumNet(nn.Module):
    """torch.cumsum on the way to the loss: a running mean over a sequence,
    a reverse running sum (flip, cumsum, flip) and a running sum over
    features; cumsum's gradient is the reverse running sum of g."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(5, 6)

    def forward(self, x):                                      # [N, T, 5]
        h = torch.tanh(self.proj(x))
        steps = torch.arange(1, h.shape[1] + 1, dtype=h.dtype, device=h.device)
        ahead = h.cumsum(dim=1) / steps[:, None]
        behind = h.flip(1).cumsum(1).flip(1)
        out = ahead * behind + h.cumsum(-1)
        weights = torch.cos(torch.arange(out.numel(), dtype=out.dtype, device=out.device)).reshape(out.shape)
        return (out * weights).mean()


class SampledNet(nn.Module):
    """F.grid_sample on the way to the loss: a spatial transformer (a
    learned affine theta, F.affine_grid, reflection padding: the grid's
    gradient reaches theta) and flow lookups of features at that grid plus
    a learned offset: bilinear with border padding and align_corners;
    nearest (flat in the grid); and bilinear at the detached grid, as RAFT
    detaches its coordinates (only the features' gradient)."""

    def __init__(self):
        super().__init__()
        self.loc = nn.Linear(3 * 8 * 8, 6)
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.flow = nn.Conv2d(4, 2, 3, padding=1)

    def forward(self, x):                                      # [N, 3, 8, 8]
        eye = torch.eye(2, 3, device=x.device)
        theta = eye + 0.3 * torch.tanh(self.loc(x.flatten(1))).view(-1, 2, 3)
        grid = F.affine_grid(theta, list(x.shape), align_corners=False)
        a = F.grid_sample(x, grid, padding_mode="reflection", align_corners=False)
        f = torch.tanh(self.conv(a))
        offset = 0.4 * torch.tanh(self.flow(f)).permute(0, 2, 3, 1)
        moved = grid + offset
        b = F.grid_sample(f, moved, padding_mode="border", align_corners=True)
        c = F.grid_sample(f, moved, mode="nearest", align_corners=False)
        d = F.grid_sample(f, moved.detach(), align_corners=False)
        out = torch.cat([b, c, d], dim=1)
        weights = torch.cos(torch.arange(out.numel(), dtype=out.dtype, device=out.device)).reshape(out.shape)
        return (out * weights).mean()


class UnevenPoolsNet(nn.Module):
    """Pools whose windows differ in size: average pools that leave padding
    out of the count (PoolFormer's token mixer, ResNet-D's ceil_mode
    downsampling) or overhang the input (ceil_mode), and adaptive average
    pools whose blocks differ (AlexNet's 13 to 6, 1-d and 3-d ones), under
    convolutions and a cos-weighted mean."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.mixer = nn.AvgPool2d(3, 1, 1, count_include_pad=False)
        self.down = nn.AvgPool2d(2, 2, ceil_mode=True, count_include_pad=False)
        self.overhang = nn.AvgPool2d(4, 3, padding=1, ceil_mode=True)
        self.alex = nn.AdaptiveAvgPool2d((6, 6))
        self.odd = nn.AdaptiveAvgPool2d((5, 3))
        self.line = nn.AdaptiveAvgPool1d(4)
        self.cube = nn.AdaptiveAvgPool3d((2, 3, 2))

    def forward(self, x):                                      # [N, 3, 13, 13]
        h = torch.tanh(self.conv(x))
        h = h + self.mixer(h)
        parts = [self.down(h), self.overhang(h), self.alex(h), self.odd(h),
                 self.line(h.flatten(2)).unsqueeze(-1),
                 self.cube(h.unsqueeze(1)).flatten(1, 2)]
        out = torch.cat([p.flatten(1) for p in parts], dim=1)
        weights = torch.cos(torch.arange(out.numel(), dtype=out.dtype, device=out.device)).reshape(out.shape)
        return (out * weights).mean()


class BoundaryNet(nn.Module):
    """Where torch's gradients decide at a boundary, on exact zeros (a row
    masked to 0, plus a zero-initialized shift, as batch norm's bias of a
    zero map): ReLU6 (hardtanh) passes no gradient at exactly 0, torch.clamp
    passes it there; F.normalize of a zero vector has gradient 0 (torch's
    vector norm), not its decomposition's 0 * inf = NaN."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 6)
        self.b = nn.Linear(6, 6, bias=False)
        self.shift = nn.Parameter(torch.zeros(6))

    def forward(self, x):                                      # [3, 4]
        keep = (torch.arange(x.shape[0], device=x.device) > 0).to(x.dtype)[:, None]
        z = self.b(torch.tanh(self.a(x)) * keep)               # row 0 exactly 0
        six = F.relu6(z * 8 + self.shift)
        clamped = torch.clamp(z + self.shift, 0.0, 0.5)
        unit = F.normalize(z, dim=-1)
        out = torch.cat([six, clamped, unit], dim=1)
        weights = torch.cos(torch.arange(out.numel(), dtype=out.dtype, device=out.device)).reshape(out.shape)
        return (out * weights).mean()


class MixtralLoss(nn.Module):
    """Hugging Face's Mixtral (a mixture of experts: a softmax router picking
    2 of 4 experts per token with topk, the experts exported as one
    moe_experts op) under its own causal-LM loss (`labels=`: the shifted
    next-token cross-entropy, the last position ignored)."""

    def __init__(self, layers=2):
        super().__init__()
        import os
        import sys
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
        import zoo_hf
        self.lm = zoo_hf.mixtral(num_hidden_layers=layers)

    def forward(self, input_ids):
        return self.lm(input_ids=input_ids, labels=input_ids).loss


class MixtralAuxLoss(MixtralLoss):
    """MixtralLoss with the router's load-balancing loss added
    (output_router_logits: transformers' load_balancing_loss_func times
    router_aux_loss_coef), as Mixtral is trained."""

    def __init__(self, layers=2):
        super().__init__(layers)
        self.lm.config.output_router_logits = True

    def forward(self, input_ids):
        return self.lm(input_ids=input_ids, labels=input_ids, output_router_logits=True).loss
