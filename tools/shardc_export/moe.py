"""Hugging Face mixtures of experts (transformers 5: Mixtral, Qwen-MoE, ...) as
the graph's one `moe_experts` op (docs/ops.md, docs/exporter.md).

transformers picks an experts forward by config._experts_implementation.
Its default ("eager") loops over the experts hit and picks each one's tokens
with torch.where: how many tokens an expert gets is data, a shape no static
graph holds. While tracing, the exporter selects "batched_mm" (static
shapes) and, for experts the graph op describes (gated, concatenated
[gate; up] weights [E, 2I, H], down [E, H, I], no bias, a known activation),
serves that name with a forward that is one custom ATen op,
shardc::moe_experts: torch.export keeps it whole and aten.py maps it onto
the graph's `moe_experts`, whose kernel groups tokens by expert. Other
experts keep transformers' batched_mm (every token's k expert matrices
gathered: correct, but k expert matrices per token in memory).
"""

import contextlib

import torch

# The activation modules transformers builds (ACT2FN), by class name.
_ACTIVATIONS = {"SiLUActivation": "silu", "SiLU": "silu", "GELUActivation": "gelu",
                "GELU": "gelu", "NewGELUActivation": "gelu_tanh", "GELUTanh": "gelu_tanh",
                "PytorchGELUTanh": "gelu_tanh", "ReLU": "relu"}


def _reference(x: torch.Tensor, index: torch.Tensor, weights: torch.Tensor,
               gate_up: torch.Tensor, down: torch.Tensor, activation: str) -> torch.Tensor:
    """The op's definition in torch (its eager kernel; the export never runs
    it): each expert on its tokens in ascending order, as transformers'
    looping forward adds them."""
    act = {"silu": torch.nn.functional.silu, "relu": torch.relu,
           "gelu": torch.nn.functional.gelu,
           "gelu_tanh": lambda v: torch.nn.functional.gelu(v, approximate="tanh")}[activation]
    out = torch.zeros_like(x)
    for e in range(gate_up.shape[0]):
        token, slot = torch.where(index == e)
        if token.numel() == 0:
            continue
        gate, up = torch.nn.functional.linear(x[token], gate_up[e]).chunk(2, dim=-1)
        y = torch.nn.functional.linear(act(gate) * up, down[e])
        out.index_add_(0, token, (y * weights[token, slot, None]).to(out.dtype))
    return out


_OP = None


def moe_experts_op():
    """torch.ops.shardc.moe_experts, defined on first use (torch >= 2.4's
    torch.library.custom_op); None on an older torch."""
    global _OP
    if _OP is None and hasattr(torch.library, "custom_op"):
        op = torch.library.custom_op("shardc::moe_experts", mutates_args=())(_reference)
        op.register_fake(lambda x, index, weights, gate_up, down, activation:
                         torch.empty_like(x))
        _OP = op
    return _OP


def _activation(module):
    return _ACTIVATIONS.get(type(getattr(module, "act_fn", None)).__name__)


def fits(module):
    """Whether the graph op describes this experts module."""
    from transformers.integrations import moe as hf_moe
    gate_up, down = getattr(module, "gate_up_proj", None), getattr(module, "down_proj", None)
    if not isinstance(gate_up, torch.Tensor) or not isinstance(down, torch.Tensor):
        return False
    if gate_up.dim() != 3 or down.dim() != 3:
        return False
    E, two_i, H = gate_up.shape
    return (getattr(module, "has_gate", False) and not getattr(module, "has_bias", True)
            and getattr(module, "is_concatenated", False)
            and not getattr(module, "is_transposed", True)
            and not getattr(module, "has_post_expert_norm", True)
            and not getattr(module, "_is_expert_parallel", True)
            and getattr(type(module), "_apply_gate", None) is hf_moe._default_apply_gate
            and two_i % 2 == 0 and tuple(down.shape) == (E, H, two_i // 2)
            and _activation(module) is not None)


def _switchable(module):
    """A transformers model whose experts forward can be chosen."""
    config = getattr(module, "config", None)
    return hasattr(module, "set_experts_implementation") and \
        isinstance(getattr(config, "_experts_implementation", None), str)


@contextlib.contextmanager
def static_experts(model):
    """Selects the static experts forward while tracing (see the top of this
    file); the model's own setting and transformers' table are restored.
    `model` may be a transformers model or any module holding one (a loss
    wrapper): the outermost one found is switched."""
    model = next((m for m in model.modules() if _switchable(m)), None)
    if model is None:
        yield
        return
    before = model.config._experts_implementation
    from transformers.integrations import moe as hf_moe
    table = hf_moe.ALL_EXPERTS_FUNCTIONS
    batched = hf_moe.batched_mm_experts_forward
    op = moe_experts_op()

    def forward(self, hidden_states, top_k_index, top_k_weights):
        if op is None or not fits(self):
            return batched(self, hidden_states, top_k_index, top_k_weights)
        return op(hidden_states, top_k_index, top_k_weights.to(hidden_states.dtype),
                  self.gate_up_proj, self.down_proj, _activation(self))

    had_local = "batched_mm" in table._local_mapping
    saved = table._local_mapping.get("batched_mm")
    table["batched_mm"] = forward
    if before != "batched_mm":
        model.set_experts_implementation("batched_mm")
    try:
        yield
    finally:
        if before != "batched_mm":
            model.set_experts_implementation(before)
        if had_local:
            table["batched_mm"] = saved
        else:
            del table["batched_mm"]
