"""Attention with fewer key / value heads than query heads
(test/lit/export/aten-attention-heads.test)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiQuery(nn.Module):
    """Falcon's multi-query attention: one fused projection split by list
    indices (`fused[..., [-2], :]`, a tensor built in forward), one key /
    value head that sdpa broadcasts over the query heads."""

    def __init__(self, dim=16, heads=4):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, dim + 2 * self.head_dim)

    def forward(self, x):  # x [B, T, dim]
        b, t, _ = x.shape
        fused = self.qkv(x).view(b, t, self.heads + 2, self.head_dim)
        q, k, v = fused[..., :-2, :], fused[..., [-2], :], fused[..., [-1], :]
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).reshape(b, t, -1)


class GroupedQuery(nn.Module):
    """sdpa's enable_gqa: 4 query heads share 2 key / value heads."""

    def __init__(self, dim=16, heads=4, kv_heads=2):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * kv_heads * self.head_dim)

    def forward(self, x):
        b, t, _ = x.shape
        q = self.q(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(x).view(b, t, 2, self.kv_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        return y.transpose(1, 2).reshape(b, t, -1)


class RepeatKV(nn.Module):
    """transformers' grouped-query attention (repeat_kv: each key / value
    head expanded over a new dim and viewed as g query heads), with a
    padding mask when `mask` is given (bool [B, 1, 1, S], as transformers
    builds it for a padded batch of an encoder)."""

    def __init__(self, dim=24, heads=6, kv_heads=2):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, kv_heads * self.head_dim)
        self.v = nn.Linear(dim, kv_heads * self.head_dim)

    @staticmethod
    def repeat_kv(x, n_rep):  # transformers.integrations.sdpa_attention.repeat_kv
        b, kv, s, d = x.shape
        return x[:, :, None, :, :].expand(b, kv, n_rep, s, d).reshape(b, kv * n_rep, s, d)

    def forward(self, x, mask=None):  # x [B, T, dim], mask [B, T] of 0 / 1
        b, t, _ = x.shape
        q = self.q(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k, v = (p(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
                for p in (self.k, self.v))
        g = self.heads // self.kv_heads
        k, v = self.repeat_kv(k, g), self.repeat_kv(v, g)
        attn_mask = None if mask is None else mask[:, None, None, :].bool()
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        return y.transpose(1, 2).reshape(b, t, -1)


class BoolMaskBias(nn.Module):
    """HF BEiT's `relative_position_bias + attention_mask`: a bool constant
    built in forward added to a float tensor (torch promotes it to 1.0)."""

    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(1, 2, 5, 5))

    def forward(self, x):  # x [B, 2, 5, 5]
        mask = torch.ones(x.shape[0], 1, 5, 5, dtype=torch.bool, device=x.device)
        return torch.softmax(x + (self.bias + mask), dim=-1)
