"""Integer values, comparisons and dtype conversion in forward
(test/lit/export/aten-int-values.test)."""

import torch
import torch.nn as nn


class PositionIds(nn.Module):
    """RoBERTa's embeddings: position ids counted from the token ids, so a
    padding token (id 1) gets position 1 and the others 2, 3, ... in order."""

    def __init__(self, vocab=32, dim=16, pad=1):
        super().__init__()
        self.pad = pad
        self.words = nn.Embedding(vocab, dim, padding_idx=pad)
        self.positions = nn.Embedding(64, dim, padding_idx=pad)

    def forward(self, input_ids):
        mask = input_ids.ne(self.pad).int()
        incremental = (torch.cumsum(mask, dim=1).type_as(mask)) * mask
        position_ids = incremental.long() + self.pad
        return self.words(input_ids) + self.positions(position_ids)


class MaskMath(nn.Module):
    """Masks combined with & | ~, a bfloat16 round trip, an int64 cumsum, and
    torch's type promotion of bool and int64 operands beside float32."""

    def __init__(self, dim=8):
        super().__init__()
        self.lin = nn.Linear(dim, dim)

    def forward(self, x):
        h = self.lin(x)
        keep = (h > 0) & (x < 0.5)
        either = (h < -0.2) | keep
        rounded = h.to(torch.bfloat16).float()
        counts = torch.cumsum(either.long(), dim=-1)
        return rounded * keep + counts * 0.5 + (~either).float()


class PaddedAttention(nn.Module):
    """Causal self-attention over a padded batch: the keys whose
    attention_mask is 0 are masked (a bool mask computed from the input, and'ed
    with a constant causal one; a query row with no key left gives zeros, as
    torch's sdpa), then the padded positions' outputs are zeroed with
    masked_fill. The mask is read through an index of all its elements, as
    transformers' mask functions read it (an identity view: a reshape, which
    --data-parallel splits)."""

    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x, attention_mask):
        b, t, d = x.shape
        q, k, v = (p.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for p in self.qkv(x).chunk(3, dim=-1))
        every = torch.arange(b * t, device=x.device)
        keys = attention_mask.bool().reshape(-1)[every].view(b, t)[:, None, None, :]
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keys & causal)
        y = y.transpose(1, 2).reshape(b, t, d)
        return y.masked_fill(attention_mask[..., None] == 0, 0.0)


class MaskedScores(nn.Module):
    """Scores masked with -inf where the input's mask is 0, then softmax: the
    fill value -inf, which JSON has no number for ("-inf" in the graph)."""

    def __init__(self, dim=8):
        super().__init__()
        self.lin = nn.Linear(dim, dim)

    def forward(self, x, attention_mask):
        s = self.lin(x).masked_fill(attention_mask[:, None, :] == 0, float("-inf"))
        return torch.softmax(s, -1)


class PositionTable(nn.Module):
    """M2M100's positions: a table read with index_select at position ids
    counted from the token ids (padding 1)."""

    def __init__(self, rows=40, dim=8):
        super().__init__()
        self.table = nn.Parameter(torch.randn(rows, dim))

    def forward(self, input_ids):
        mask = input_ids.ne(1).int()
        positions = torch.cumsum(mask, dim=1).type_as(mask) * mask + 1
        return self.table.index_select(0, positions.view(-1)).view(*input_ids.shape, -1)
