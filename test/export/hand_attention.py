"""Attention written by hand, as nanoGPT without flash, transformers'
attn_implementation="eager" and research code write it: softmax(q k^T *
scale + mask) v (test/lit/export/attention-fusion.test; the exporter's
attention_fusion.py makes it the graph's scaled_dot_product_attention)."""
import math

import torch
import torch.nn as nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):
    """nanoGPT's CausalSelfAttention on its slow path: the causal mask a
    buffer, applied with masked_fill."""

    def __init__(self, dim=64, heads=4, block=32):
        super().__init__()
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.c_proj = nn.Linear(dim, dim)
        self.heads = heads
        self.register_buffer("bias", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class Causal64(CausalSelfAttention):
    """nanoGPT's attention in float64: masked_fill of a constant condition
    stays a where on the scores (not an added mask)."""

    def __init__(self, dim=64, heads=4, block=32):
        super().__init__(dim, heads, block)
        self.double()


class PaddedAttention(CausalSelfAttention):
    """Bidirectional, with a padding mask input [B, T] of 1 / 0 applied by
    masked_fill (-inf where 0), the scale as a division."""

    def forward(self, x, mask):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(C // self.heads)
        att = att.masked_fill(mask[:, None, None, :] == 0, float("-inf"))
        y = torch.matmul(att.softmax(-1), v)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))


class BiasedAttention(CausalSelfAttention):
    """A learned [T, T] position bias added to the scaled scores, then the
    causal mask: two masks, one with a gradient."""

    def __init__(self, dim=64, heads=4, block=32):
        super().__init__(dim, heads, block)
        self.pos_bias = nn.Parameter(0.1 * torch.randn(block, block))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1))) + self.pos_bias[:T, :T]
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class AttentionLoss(nn.Module):
    """Two attention layers (one with a learned bias) under a mean-square
    loss (gradients)."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([CausalSelfAttention(), BiasedAttention()])

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x)
        return (x ** 2).mean()


class WeightsReturned(CausalSelfAttention):
    """The attention weights are an output too: nothing to fuse."""

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = F.softmax((q @ k.transpose(-2, -1)) * 0.25, dim=-1)
        return att @ v, att


class KeptWhere(CausalSelfAttention):
    """torch.where(keep, scores, -inf) on an input's mask, after a constant
    bias added with the scores as the second operand."""

    def forward(self, x, mask):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = self.bias[:, :, :T, :T] * 0.5 + (q @ k.transpose(-2, -1)) * 0.25
        att = torch.where(mask[:, None, None, :] != 0, att, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))


class FoldedBias(CausalSelfAttention):
    """BLOOM's form: heads folded into the batch, the scores made by
    baddbmm(alibi [B * H, 1, S], q, k^T, alpha=scale), the causal mask
    added to the 4-d view."""

    def __init__(self, dim=64, heads=4, block=32):
        super().__init__(dim, heads, block)
        slopes = torch.tensor([2.0 ** -(i + 1) for i in range(heads)])
        self.register_buffer("slopes", slopes)

    def forward(self, x):
        B, T, C = x.size()
        H, E = self.heads, C // self.heads
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, H, E).transpose(1, 2).reshape(B * H, T, E) for t in (q, k, v))
        alibi = (self.slopes[:, None] * torch.arange(T, dtype=x.dtype)).repeat(B, 1)[:, None, :]
        att = torch.baddbmm(alibi, q, k.transpose(1, 2), alpha=1.0 / math.sqrt(E))
        causal = torch.zeros(T, T).masked_fill(self.bias[0, 0, :T, :T] == 0, float("-inf"))
        att = att.view(B, H, T, T) + causal
        y = torch.bmm(F.softmax(att, dim=-1).view(B * H, T, T), v)
        return self.c_proj(y.view(B, H, T, E).transpose(1, 2).reshape(B, T, C))
