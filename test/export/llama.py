"""A Llama-style decoder with Hugging Face's structure and names
(model.embed_tokens, model.layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj,
post_attention_layernorm, mlp.{gate,up,down}_proj}, model.norm, lm_head),
RMSNorm, rotate-half RoPE applied by a module (LlamaRotary.forward(x) -> x
rotated), an additive causal mask built in forward, SwiGLU MLP, and HF's
_init_weights (normal(0, initializer_range) for Linear / Embedding)."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states


class LlamaRotary(nn.Module):
    """Rotate-half RoPE on x [B, H, T, D] at positions 0..T-1."""

    def __init__(self, dim, theta=10000.0):
        super().__init__()
        self.theta = theta
        self.dim = dim

    def forward(self, x):
        T, D = x.shape[-2], x.shape[-1]
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, D, 2, device=x.device).float() / D))
        t = torch.arange(T, device=x.device).type_as(inv_freq)
        freqs = torch.einsum("i,j->ij", t, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        x1, x2 = x[..., : D // 2], x[..., D // 2:]
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class LlamaAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, rope_theta):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.k_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.v_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.rotary_emb = LlamaRotary(self.head_dim, rope_theta)

    def forward(self, x):
        bsz, q_len, hidden = x.size()
        q = self.q_proj(x).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        q = self.rotary_emb(q)
        k = self.rotary_emb(k)
        att = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        mask = torch.full((q_len, q_len), float("-inf")).triu(1)
        att = F.softmax(att + mask, dim=-1, dtype=torch.float32).to(q.dtype)
        y = torch.matmul(att, v)
        y = y.transpose(1, 2).contiguous().reshape(bsz, q_len, hidden)
        return self.o_proj(y)


class LlamaMLP(nn.Module):
    def __init__(self, hidden_size, intermediate_size):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.self_attn = LlamaAttention(cfg["hidden_size"], cfg["num_heads"], cfg["rope_theta"])
        self.mlp = LlamaMLP(cfg["hidden_size"], cfg["intermediate_size"])
        self.input_layernorm = LlamaRMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.post_attention_layernorm = LlamaRMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList([LlamaDecoderLayer(cfg) for _ in range(cfg["num_layers"])])
        self.norm = LlamaRMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])

    def forward(self, input_ids):
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class LlamaForCausalLM(nn.Module):
    def __init__(self, vocab_size=32000, hidden_size=4096, intermediate_size=11008,
                 num_layers=32, num_heads=32, rms_norm_eps=1e-6, rope_theta=10000.0,
                 initializer_range=0.02):
        super().__init__()
        cfg = dict(vocab_size=vocab_size, hidden_size=hidden_size,
                   intermediate_size=intermediate_size, num_layers=num_layers,
                   num_heads=num_heads, rms_norm_eps=rms_norm_eps, rope_theta=rope_theta)
        self.initializer_range = initializer_range
        self.model = LlamaModel(cfg)
        self.lm_head = nn.Linear(hidden_size, vocab_size, bias=False)
        self.apply(self._init_weights)

    def _init_weights(self, module):
        std = self.initializer_range
        if isinstance(module, nn.Linear):
            module.weight.data.normal_(mean=0.0, std=std)
            if module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.Embedding):
            module.weight.data.normal_(mean=0.0, std=std)

    def forward(self, input_ids):
        return self.lm_head(self.model(input_ids))
