"""A model whose state_dict is more than its parameters: tied input / output
embeddings (two state_dict names, one tensor), a persistent buffer and a
non-persistent one (register_buffer(persistent=False): not in state_dict),
both read by forward. A shardc checkpoint of it must load into this module
with load_state_dict(strict=True) (docs/checkpoints.md)."""

import torch
import torch.nn as nn


class StateLM(nn.Module):
    def __init__(self, vocab=37, d=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.proj = nn.Linear(d, d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.embed.weight
        self.register_buffer("shift", torch.full((d,), 0.5))
        self.register_buffer("gain", torch.ones(d), persistent=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        x = self.proj(x) * self.gain + self.shift
        return self.head(x)


def load_strict(checkpoint):
    """Loads a shardc checkpoint into a fresh StateLM with strict=True and
    checks the tie survived and every tensor has the file's values."""
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tools"))
    import torch_reference as tr
    tensors = tr.read_safetensors(checkpoint)
    model = StateLM()
    result = model.load_state_dict(tensors, strict=True)
    assert model.head.weight is model.embed.weight, "the tie was broken"
    state = model.state_dict()
    for name, t in tensors.items():
        assert torch.equal(state[name], t), name
    print("strict load:", result, "tensors:", ", ".join(sorted(tensors)))


if __name__ == "__main__":
    import sys
    load_strict(sys.argv[1])
