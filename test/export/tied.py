"""A small language model with tied input / output embeddings and torch's
default initializers (nn.Embedding: normal_; nn.Linear: kaiming_uniform_
weight and uniform_ bias; nn.LayerNorm: ones_ / zeros_), plus explicit
trunc_normal_, xavier_uniform_, constant_ and an in-place chain
(uniform_ then mul_ / add_) so every recording path is exercised."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class TiedLM(nn.Module):
    def __init__(self, vocab=61, d=24, hidden=40):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.fc1 = nn.Linear(d, hidden)
        self.fc2 = nn.Linear(hidden, d)
        self.gate = nn.Linear(d, d, bias=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.embed.weight
        self.scale = nn.Parameter(torch.empty(d))
        nn.init.trunc_normal_(self.fc2.weight, std=0.05, a=-0.1, b=0.1)
        nn.init.xavier_uniform_(self.gate.weight, gain=0.5)
        nn.init.constant_(self.fc2.bias, 0.25)
        with torch.no_grad():
            self.scale.uniform_(-1.0, 1.0).mul_(0.5).add_(1.0)

    def forward(self, tokens):
        x = self.embed(tokens)
        h = F.gelu(self.fc1(x), approximate="tanh")
        x = x + self.fc2(F.relu(h))
        x = x + F.silu(self.gate(x)) * self.scale
        return self.head(self.norm(x))
