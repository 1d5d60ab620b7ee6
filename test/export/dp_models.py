"""Models whose batch leaves dim 0 inside forward, for the data-parallel
export test (test/lit/export/data-parallel-models.test)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class TinyViT(nn.Module):
    """torchvision's ViT in small: a class token expanded to the batch and
    joined to the patches, learned positions, nn.TransformerEncoder
    (batch_first: its attention moves the batch to dim 1 and folds it into
    [T * B, E] rows), the head on the class token."""

    def __init__(self, dim=32, heads=4, layers=2, classes=10):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, 4, stride=4)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, 17, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, 64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        p = self.patch(x).flatten(2).transpose(1, 2)
        t = torch.cat([self.cls.expand(x.shape[0], -1, -1), p], dim=1) + self.pos
        return self.head(self.encoder(t)[:, 0])


class SeqFirstAttention(nn.Module):
    """nn.MultiheadAttention as torch's default lays it out (sequence
    first), fed from a batch-first input: the batch is in dim 1 of the
    attention's input and output, and back in dim 0 at the end; an
    all-ones mask built in forward multiplies it (a uniform constant of
    the batch's shape)."""

    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        keep = x.new_ones(x.shape[0], x.shape[1], 1)
        s = (x * keep).transpose(0, 1)
        y, _ = self.attn(s, s, s, need_weights=False)
        return self.norm(y.transpose(0, 1))


class UpsampleHead(nn.Module):
    """A segmentation head: convolutions, then bilinear upsampling to the
    input size (FCN's), which the exporter writes as interpolation tables
    read along each spatial dim with the batch elsewhere."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(),
                                  nn.Conv2d(8, 4, 3, stride=2, padding=1))

    def forward(self, x):
        return F.interpolate(self.body(x), size=x.shape[-2:], mode="bilinear",
                             align_corners=False)


class TwoFrames(nn.Module):
    """RAFT's pattern: both frames through one encoder (`cat` along the
    batch, then split back), instance norm (written as batch_norm over the
    batch folded into the channels), and a zero initial state of the
    batch's shape run through a convolution before it meets the frames."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1),
                                     nn.InstanceNorm2d(8), nn.ReLU())
        self.state = nn.Conv2d(2, 8, 3, padding=1)

    def forward(self, image1, image2):
        f1, f2 = self.encoder(torch.cat([image1, image2], dim=0)).chunk(2, dim=0)
        flow = image1.new_zeros(image1.shape[0], 2, f1.shape[2], f1.shape[3])
        return (f1 * f2).sum(1, keepdim=True) + self.state(flow)


class SeqFirstEncoder(nn.TransformerEncoder):
    """torch's default layout: nn.TransformerEncoder without batch_first,
    src [S, B, E] in and out (`shardc run --batch-dim src=1`)."""

    def __init__(self, dim=32, heads=4, layers=2):
        super().__init__(nn.TransformerEncoderLayer(dim, heads, 64, dropout=0.0), layers,
                         enable_nested_tensor=False)

    def forward(self, src):
        return super().forward(src)
