"""ATen ops of video models (torchvision.models.video): 3-d convolutions,
batch norm and pooling over [N, C, T, H, W] (test/lit/export/aten-video-ops.test)."""

import torch
import torch.nn as nn


class Video3d(nn.Module):
    """r3d's stem (3x7x7 stride 1,2,2), r2plus1d's factorized (1x3x3 then
    3x1x1) convolutions, a depthwise 3x3x3 one, S3D's max pooling, an average
    pooling that excludes padding, and the classifier's adaptive pooling."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv3d(3, 8, (3, 7, 7), stride=(1, 2, 2), padding=(1, 3, 3), bias=False),
            nn.BatchNorm3d(8), nn.ReLU())
        self.spatial = nn.Conv3d(8, 12, (1, 3, 3), padding=(0, 1, 1))
        self.temporal = nn.Conv3d(12, 8, (3, 1, 1), stride=(2, 1, 1), padding=(1, 0, 0))
        self.depthwise = nn.Conv3d(8, 8, 3, padding=1, groups=8)
        self.maxpool = nn.MaxPool3d((1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1))
        self.avgpool = nn.AvgPool3d(3, stride=2, padding=1, count_include_pad=False,
                                    ceil_mode=True)
        self.pool = nn.AdaptiveAvgPool3d((1, 2, 2))
        self.fc = nn.Linear(32, 5)

    def forward(self, x):
        x = self.stem(x)
        x = self.maxpool(x)
        x = self.temporal(self.spatial(x))
        x = x + self.depthwise(x)
        x = self.avgpool(x)
        return self.fc(self.pool(x).flatten(1))


class Transposed3d(nn.Module):
    """A 3-d transposed convolution (a video decoder's upsampling)."""

    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose3d(2, 3, 2, stride=2)

    def forward(self, x):
        return self.up(x)


class ClassToken(nn.Module):
    """MViT's class token: a parameter expanded over the batch, then
    unsqueezed (stays a lazy broadcast), beside a reshape that merges an
    expanded dim (materialized first)."""

    def __init__(self):
        super().__init__()
        self.cls = nn.Parameter(torch.randn(4))

    def forward(self, x):  # x [B, T, 4]
        token = self.cls.expand(x.size(0), -1).unsqueeze(1)
        merged = self.cls.expand(x.size(0), 2, -1).reshape(x.size(0), 8)
        return torch.cat([token, x], dim=1), merged * 2
