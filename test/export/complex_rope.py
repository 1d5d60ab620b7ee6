"""Rotary embeddings through complex numbers, as Meta's Llama reference code
and torchtitan write them: `freqs_cis = torch.polar(ones, outer(t, freqs))`
(a non-persistent complex buffer, or computed in forward), queries and keys
viewed as complex pairs, multiplied, viewed back as reals
(test/lit/export/complex-rope.test)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def precompute_freqs_cis(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    return torch.polar(torch.ones_like(freqs), freqs)


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


class Attention(nn.Module):
    """torchtitan's Llama attention block (no grouped key / value heads), its
    freqs_cis a non-persistent buffer sliced to the sequence length."""

    def __init__(self, dim=64, n_heads=4, max_seq_len=64):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.register_buffer("freqs_cis", precompute_freqs_cis(self.head_dim, max_seq_len),
                             persistent=False)

    def forward(self, x):
        B, T, _ = x.shape
        xq = self.wq(x).view(B, T, self.n_heads, self.head_dim)
        xk = self.wk(x).view(B, T, self.n_heads, self.head_dim)
        xv = self.wv(x).view(B, T, self.n_heads, self.head_dim)
        xq, xk = apply_rotary_emb(xq, xk, self.freqs_cis[:T])
        out = F.scaled_dot_product_attention(xq.transpose(1, 2), xk.transpose(1, 2),
                                             xv.transpose(1, 2), is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(B, T, -1))


class InForward(Attention):
    """The table computed in forward and scaled (Llama 4's attention factor),
    and a product of two complex values."""

    def forward(self, x):
        B, T, _ = x.shape
        xq = self.wq(x).view(B, T, self.n_heads, self.head_dim)
        xk = self.wk(x).view(B, T, self.n_heads, self.head_dim)
        freqs_cis = precompute_freqs_cis(self.head_dim, T).to(x.device) * 0.75
        xq, xk = apply_rotary_emb(xq, xk, freqs_cis)
        q = torch.view_as_complex(xq.reshape(B, T, self.n_heads, -1, 2))
        k = torch.view_as_complex(xk.reshape(B, T, self.n_heads, -1, 2))
        return self.wo(torch.view_as_real(q * k).reshape(B, T, -1))


class ComplexAbs(Attention):
    """A complex op the exporter does not write: refused with the reason."""

    def forward(self, x):
        B, T, _ = x.shape
        xq = self.wq(x).view(B, T, self.n_heads, self.head_dim)
        xq_ = torch.view_as_complex(xq.float().reshape(B, T, self.n_heads, -1, 2))
        return xq_.abs()
