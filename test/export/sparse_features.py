"""Embedding bags as recommendation models use them (test/lit/export/
aten-embedding-bags.test): DLRM's shape, ragged bags of ids given as a 1-d
input and its offsets, next to bags of one size with a padding id."""

import torch
from torch import nn
from safetensors.torch import save_file


def _cos_weighted_mean(out):
    w = torch.cos(torch.arange(out.shape[-1], dtype=out.dtype, device=out.device))
    return (out * w).mean()


class SparseFeatures(nn.Module):
    """A small DLRM: a dense MLP and three ragged bag lookups (sum with
    per-sample weights; mean with padding id 0; sum with include_last_offset
    over a second id list), their pairwise dot products and a top linear."""

    def __init__(self, vocab=30, dim=6, dense=4):
        super().__init__()
        self.user = nn.EmbeddingBag(vocab, dim, mode="sum")
        self.item = nn.EmbeddingBag(vocab, dim, mode="mean", padding_idx=0)
        self.tags = nn.EmbeddingBag(vocab, dim, mode="sum", include_last_offset=True)
        self.bottom = nn.Linear(dense, dim)
        self.top = nn.Linear(dim + 16, 3)

    def forward(self, dense, ids, offsets, tag_ids, tag_offsets):
        weights = torch.cos(ids.float())
        feats = torch.stack([torch.relu(self.bottom(dense)),
                             self.user(ids, offsets, per_sample_weights=weights),
                             self.item(ids, offsets),
                             self.tags(tag_ids, tag_offsets)], dim=1)
        inter = torch.bmm(feats, feats.transpose(1, 2)).flatten(1)
        return _cos_weighted_mean(self.top(torch.cat([feats[:, 0], inter], dim=1)))


class RaggedMax(nn.Module):
    """mode max over ragged bags: refused by the exporter."""

    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(10, 4, mode="max")

    def forward(self, ids, offsets):
        return self.bag(ids, offsets)


class PaddedBags(nn.Module):
    """Bags of one size (a 2-d input) with padding id 0 in the three modes:
    padded ids are left out of each bag (and of mean's count); a bag of
    padding only gives 0."""

    def __init__(self, vocab=12, dim=5):
        super().__init__()
        self.bags = nn.ModuleDict({m: nn.EmbeddingBag(vocab, dim, mode=m, padding_idx=0)
                                   for m in ("sum", "mean", "max")})
        self.fc = nn.Linear(3 * dim, 3)

    def forward(self, ids):
        h = torch.cat([self.bags[m](ids) for m in ("sum", "mean", "max")], dim=1)
        return _cos_weighted_mean(self.fc(h))


def write_inputs(path):
    """Inputs for SparseFeatures (4 rows) and PaddedBags: bags of 0 to 4 ids,
    an empty one in each list, padding ids in some bags."""
    gen = torch.Generator().manual_seed(3)
    save_file({
        "dense": torch.rand(4, 4, generator=gen) * 2 - 1,
        "ids": torch.tensor([5, 0, 17, 2, 29, 0, 8, 13, 1, 0, 22]),
        "offsets": torch.tensor([0, 3, 3, 7]),
        "tag_ids": torch.tensor([4, 4, 9, 28, 3, 11]),
        "tag_offsets": torch.tensor([0, 2, 5, 5, 6]),
    }, path + "-ragged.st")
    save_file({"ids": torch.tensor([[3, 0, 7, 7], [0, 0, 0, 0], [11, 2, 0, 5]])},
              path + "-padded.st")


if __name__ == "__main__":
    import sys
    write_inputs(sys.argv[1])
