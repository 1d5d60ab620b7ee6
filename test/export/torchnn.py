"""torch.nn's own modules, exported through ATen capture (test/lit/export/aten-*.test)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def transformer_encoder(d_model=32, nhead=4, dim_feedforward=64, num_layers=2,
                        activation="relu", norm_first=False):
    """nn.TransformerEncoder, batch_first, as a user builds it."""
    layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout=0.0,
                                       activation=activation, batch_first=True,
                                       norm_first=norm_first)
    return nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)


class SelfAttention(nn.Module):
    """nn.MultiheadAttention used as self-attention, then a projection."""

    def __init__(self, embed_dim=32, num_heads=4):
        super().__init__()
        self.attn = nn.MultiheadAttention(embed_dim, num_heads, batch_first=True)
        self.proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x):
        y, _ = self.attn(x, x, x, need_weights=False)
        return self.proj(y)


class ConvNet(nn.Module):
    """A sort after a convolution: sort has no graph op yet (its values' order
    depends on the data), so the exporter must refuse it by name."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())

    def forward(self, x):
        return self.stem(x).sum(-1, keepdim=True).sort(dim=-2).values


class PoolIndices(nn.Module):
    """Max pooling whose indices forward reads: only the pooled values map."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        y, idx = F.max_pool2d(self.conv(x), 2, return_indices=True)
        return y + idx.to(y.dtype)


def transformer_decoder(d_model=32, nhead=4, dim_feedforward=64, num_layers=1,
                        activation="gelu", norm_first=True):
    """nn.TransformerDecoder: self-attention, then cross-attention on `memory`
    (its packed in-projection is split into q and kv weights)."""
    layer = nn.TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout=0.0,
                                       activation=activation, batch_first=True,
                                       norm_first=norm_first)
    return nn.TransformerDecoder(layer, num_layers)
