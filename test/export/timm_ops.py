"""ATen ops as timm's models use them (test/lit/export/aten-timm-ops.test)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class NormsAndRepeat(nn.Module):
    """A layer norm and a group norm without bias (MetaFormer's), a layer
    norm without weight and bias,
    one over the last two dims (normalized_shape [4, 8]), and parameters
    repeated over new and existing dims (XCiT's positional encoding)."""

    def __init__(self):
        super().__init__()
        self.no_bias = nn.LayerNorm(8, bias=False)
        self.group_no_bias = nn.GroupNorm(1, 3, bias=False)
        self.no_affine = nn.LayerNorm(8, elementwise_affine=False)
        self.two_dims = nn.LayerNorm([4, 8])
        self.pos = nn.Parameter(torch.randn(1, 1, 4, 8))
        self.grid = nn.Parameter(torch.randn(2, 8))

    def forward(self, x):
        return (self.no_bias(x) + self.no_affine(x) + self.two_dims(x) + self.group_no_bias(x)
                + self.pos.repeat(2, 3, 1, 1) + self.grid.repeat(2, 3, 2, 1))


class UnfoldFlip(nn.Module):
    """nn.Unfold (a gather with two constant index tensors on adjacent dims,
    VOLO's and CrossViT's patches) and torch.flip (a bidirectional LSTM's
    reversed sequence) on parameters and the input."""

    def __init__(self):
        super().__init__()
        self.unfold = nn.Unfold(kernel_size=2, stride=2)
        self.scale = nn.Parameter(torch.randn(2, 12, 4))

    def forward(self, x):
        patches = self.unfold(x)  # [2, 3 * 2 * 2, 4]
        return torch.flip(patches, [1, 2]) * self.scale + torch.flip(self.scale, [0])


class AttentionUpsample(nn.Module):
    """scaled_dot_product_attention on 5-d (Hiera's mask units) and 3-d
    tensors, and nearest upsampling by 2 and to a size that is no multiple
    (GhostNetV2's attention map)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):  # x [2, 3, 2, 5, 8]
        q = self.proj(x)
        a5 = F.scaled_dot_product_attention(q, x, x)
        a3 = F.scaled_dot_product_attention(q[:, 0, 0], x[:, 0, 0], x[:, 0, 0])
        maps = a5[:, :, 0]  # [2, 3, 5, 8]
        up = F.interpolate(maps, scale_factor=2, mode="nearest")  # [2, 3, 10, 16]
        odd = F.interpolate(maps, size=(7, 13), mode="nearest")
        return up.sum() + odd.sum() + a3.sum() + a5


class StdConvWindows(nn.Module):
    """A weight-standardized conv with a gain (timm's ScaledStdConv2d:
    F.batch_norm over the weight with batch statistics and a weight but no
    bias), batch statistics over a real batch,
    Tensor.unfold's sliding windows (HaloNet) and a permuted expanded view
    (BoTNet's relative logits)."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 3, 3, 3))
        self.rel = nn.Parameter(torch.randn(1, 5, 1, 6))
        self.gain = nn.Parameter(torch.rand(4) + 0.5)

    def forward(self, x):  # x [2, 3, 6, 6]
        w = F.batch_norm(self.weight.reshape(1, 4, -1), None, None, weight=self.gain,
                         training=True, momentum=0.0, eps=1e-6).reshape_as(self.weight)
        y = F.conv2d(x, w, padding=1)  # [2, 4, 6, 6]
        z = F.batch_norm(y, None, None, training=True, eps=1e-5)
        win = y.unfold(2, 3, 2).unfold(3, 3, 2)  # [2, 4, 2, 2, 3, 3]
        rel = self.rel.expand(2, 5, 4, 6).permute(0, 2, 1, 3)  # [2, 4, 5, 6]
        return z.sum() + win.sum(dim=(4, 5)).sum() + rel.sum() + y


class SliceAssign(nn.Module):
    """An in-place assignment into a slice of an intermediate (MViTv2's
    relative position terms added into attn[:, :, 1:, 1:]): functionalized
    into aten.copy and slice_scatter."""

    def __init__(self):
        super().__init__()
        self.p = nn.Parameter(torch.randn(2, 3, 4))

    def forward(self, x):  # x [2, 4, 4]
        y = x * 2
        y[:, 1:, 1:] = (y[:, 1:, 1:].view(2, 3, 3, 1)
                        + self.p[:, :, 1:, None]).view(2, 3, 3)
        return y


class BilinearUp(nn.Module):
    """Bilinear upsampling by 2 (EfficientFormerV2), to a size that is no
    multiple with align_corners, and linear in 1-d."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3, 1, 1))

    def forward(self, x):  # x [2, 3, 4, 5]
        y = x * self.w
        up = F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)
        odd = F.interpolate(y, size=(7, 9), mode="bilinear", align_corners=True)
        line = F.interpolate(y[:, :, 0], size=11, mode="linear")
        return up.sum() + odd.sum() * 2 + line.sum() * 3 + up


class Fold(nn.Module):
    """F.fold of F.unfold's blocks (VOLO's outlook attention): overlapping
    blocks (3x3, stride 2, padding 1) summed back, and a non-overlapping
    2x2 fold whose blocks reach the last row only with output padding."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(27, 27)

    def forward(self, x):  # x [B, 3, 7, 9]
        cols = F.unfold(x, 3, padding=1, stride=2)            # [B, 27, 4 * 5]
        cols = self.proj(cols.transpose(1, 2)).transpose(1, 2)
        y = F.fold(cols, (7, 9), 3, padding=1, stride=2)
        blocks = F.unfold(x[:, :, :6, :8], 2, stride=2)        # [B, 12, 12]
        z = F.fold(blocks * 2, (7, 9), 2, stride=2)            # row 7, col 9 stay 0
        return y + z


class MaxMinDim(nn.Module):
    """torch.max / torch.min along a dim (VOLO's head: `x.max(1)[0]`), the
    values and the indices."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 6)

    def forward(self, x):  # x [B, T, 6]
        y = self.proj(x)
        values, indices = y.max(1)
        low = y.min(-1, keepdim=True)[0]
        return values + 0.5 * low.sum(1), indices, y.min(2)[1]
