"""Checks shardc's topk and gather outputs (test/lit/shardc/topk-gather.test)
against torch on shardc's own logits and probabilities: torch.topk's indices
equal shardc's, and its values equal shardc's gather bit for bit."""
import sys

import torch
from safetensors.torch import load_file

out = load_file(sys.argv[1])
logits, probs = out["logits"], out["probs"]
values, indices = torch.topk(probs, 2, dim=-1)
assert torch.equal(out["top"], indices), (out["top"], indices)
assert torch.equal(out["weights"], values), (out["weights"], values)
values, indices = torch.topk(logits, 3, dim=0, largest=False)
assert torch.equal(out["bottom"], indices), (out["bottom"], indices)
assert torch.equal(out["low"], values), (out["low"], values)
assert torch.equal(torch.gather(probs, 1, out["top"]), out["weights"])
print("topk and gather equal torch's: %s indices, %s values"
      % (list(out["top"].shape), list(out["weights"].shape)))
