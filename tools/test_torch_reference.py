#!/usr/bin/python3
"""Checks tools/torch_reference.py against real nn.Module implementations.

    /usr/bin/python3 tools/test_torch_reference.py [-v]

- GPT-2: nanoGPT's model.py (GPT, Block, CausalSelfAttention, MLP, LayerNorm;
  the non-flash attention path, since torch 1.13 has no
  F.scaled_dot_product_attention), config from examples/gpt2-tiny.json,
  random weights (nanoGPT's init, then every LayerNorm and bias perturbed so
  that none is trivially 1 or 0), state_dict exported to safetensors without
  the tied lm_head.weight, logits for every position (nanoGPT's training
  path) vs the interpreter on examples/gpt2-tiny.json.
- Llama: a transcription of Hugging Face's LlamaForCausalLM (RMSNorm,
  LlamaRotaryEmbedding, apply_rotary_pos_emb, LlamaAttention, LlamaMLP),
  since transformers is not installed, vs examples/llama-tiny.json.
- safetensors round trips for F32, F64, F16, BF16, I64, and --compare's
  exit codes.

Every check runs the interpreter as a subprocess, exactly as a user would,
and requires the float32 logits to be bit-identical (torch.equal), as
bench/README.md claims; in float64 nanoGPT's must be bit-identical too, while
the Llama transcription keeps HF's float32 cast inside RMSNorm, so its float64
logits are only required within max |module - reference| / max |module| <= 1e-6.
"""

import math
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import torch_reference as tr  # noqa: E402

REF = os.path.join(HERE, "torch_reference.py")
PY = sys.executable
TOL = 1e-6


# ------------------------------------------------------------------ nanoGPT
class LayerNorm(nn.Module):
    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input):
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                             .view(1, 1, config.block_size, config.block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPTConfig:
    def __init__(self, **kw):
        self.block_size, self.vocab_size = 1024, 50304
        self.n_layer, self.n_head, self.n_embd, self.bias = 12, 12, 768, True
        self.__dict__.update(kw)


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        tok_emb = self.transformer.wte(idx)
        pos_emb = self.transformer.wpe(pos)
        x = tok_emb + pos_emb
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        return self.lm_head(x)  # all positions (nanoGPT's training path)


# ------------------------------------------------------------ HF Llama (4.3x)
class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, dim, max_position_embeddings=2048, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        t = torch.arange(max_position_embeddings, dtype=self.inv_freq.dtype)
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos(), persistent=False)
        self.register_buffer("sin_cached", emb.sin(), persistent=False)

    def forward(self, x, seq_len):
        return self.cos_cached[:seq_len].to(x.dtype), self.sin_cached[:seq_len].to(x.dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, position_ids):
    cos = cos[position_ids].unsqueeze(1)
    sin = sin[position_ids].unsqueeze(1)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


class LlamaAttention(nn.Module):
    def __init__(self, d, n_head):
        super().__init__()
        self.num_heads, self.head_dim = n_head, d // n_head
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, d, bias=False)
        self.v_proj = nn.Linear(d, d, bias=False)
        self.o_proj = nn.Linear(d, d, bias=False)
        self.rotary_emb = LlamaRotaryEmbedding(self.head_dim)

    def forward(self, x, position_ids):
        bsz, q_len, d = x.size()
        q = self.q_proj(x).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary_emb(v, seq_len=q_len)
        q, k = apply_rotary_pos_emb(q, k, cos, sin, position_ids)
        # The graph's sdpa scales by multiplying with 1/sqrt(E) (as nanoGPT and
        # torch's own sdpa do); HF divides by sqrt(E) -- an ulp-level change.
        att = torch.matmul(q, k.transpose(2, 3)) * (1.0 / math.sqrt(self.head_dim))
        mask = torch.full((q_len, q_len), float("-inf")).triu(1)
        att = F.softmax(att + mask, dim=-1, dtype=torch.float32).to(q.dtype)
        y = torch.matmul(att, v).transpose(1, 2).contiguous().reshape(bsz, q_len, d)
        return self.o_proj(y)


class LlamaMLP(nn.Module):
    def __init__(self, d, ffn):
        super().__init__()
        self.gate_proj = nn.Linear(d, ffn, bias=False)
        self.up_proj = nn.Linear(d, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, d, n_head, ffn, eps):
        super().__init__()
        self.self_attn = LlamaAttention(d, n_head)
        self.mlp = LlamaMLP(d, ffn)
        self.input_layernorm = LlamaRMSNorm(d, eps)
        self.post_attention_layernorm = LlamaRMSNorm(d, eps)

    def forward(self, x, position_ids):
        x = x + self.self_attn(self.input_layernorm(x), position_ids)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, vocab, d, n_layer, n_head, ffn, eps):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList([LlamaDecoderLayer(d, n_head, ffn, eps)
                                     for _ in range(n_layer)])
        self.norm = LlamaRMSNorm(d, eps)


class LlamaForCausalLM(nn.Module):
    def __init__(self, vocab, d, n_layer, n_head, ffn, eps=1e-6):
        super().__init__()
        self.model = LlamaModel(vocab, d, n_layer, n_head, ffn, eps)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                m.weight.data.normal_(mean=0.0, std=0.02)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1]).unsqueeze(0).view(-1, idx.shape[1])
        x = self.model.embed_tokens(idx)
        for layer in self.model.layers:
            x = layer(x, pos)
        return self.lm_head(self.model.norm(x))


# ------------------------------------------------------------------ checks
def run_ref(model_json, params, inputs, out, extra=()):
    cmd = [PY, REF, model_json, "--params", params, "--inputs", inputs,
           "--outputs", out] + list(extra)
    subprocess.run(cmd, check=True)
    return tr.read_safetensors(out)


def rel(a, b):
    return ((a.double() - b.double()).abs().max() / b.double().abs().max()).item()


def perturb(model):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:  # LayerNorm / RMSNorm weights and biases, Linear biases
                p.add_(torch.randn_like(p) * 0.1)


def check_model(tmp, name, model, state, failures):
    graph = tr.load_graph(os.path.join(ROOT, "examples", name + ".json"))
    declared = {p["name"]: p["shape"] for p in graph["parameters"]}
    got = {k: list(v.shape) for k, v in state.items()}
    assert declared == got, "%s: graph parameters and module state differ: %s" % (
        name, sorted(set((k, tuple(v)) for k, v in declared.items()) ^
                     set((k, tuple(v)) for k, v in got.items())))
    inputs = tr.make_inputs(graph, seed=1)
    pf, xf, of = (os.path.join(tmp, name + s) for s in (".params.st", ".in.st", ".out.st"))
    tr.write_safetensors(pf, state)
    tr.write_safetensors(xf, inputs)
    with torch.no_grad():
        want = model(inputs["idx"])
    got = run_ref(os.path.join(ROOT, "examples", name + ".json"), pf, xf, of)["logits"]
    r = rel(got, want)
    exact = torch.equal(got, want)
    print("%-12s logits %s  max|ref-module|/max|module| = %.3e  bit-identical: %s"
          % (name, list(want.shape), r, exact))
    if not exact:
        failures.append("%s: float32 logits not bit-identical (relative error %.3e)" % (name, r))
    # float64 ground truth through the same interpreter and module
    got64 = run_ref(os.path.join(ROOT, "examples", name + ".json"), pf, xf,
                    of + "64", ["--compute-dtype", "float64"])["logits"]
    with torch.no_grad():
        want64 = model.double()(inputs["idx"])
        model.float()
    r64 = rel(got64, want64)
    print("%-12s float64: ref vs module %.3e; float32 ref vs float64 %.3e"
          % (name, r64, rel(got, got64)))
    # HF's LlamaRMSNorm casts to float32 inside, so the float64 Llama module is
    # not float64 throughout; nanoGPT's is.
    if name.startswith("llama") and r64 > TOL:
        failures.append("%s: float64 relative error %.3e > %g" % (name, r64, TOL))
    if not name.startswith("llama") and not torch.equal(got64, want64):
        failures.append("%s: float64 logits not bit-identical (relative error %.3e)" % (name, r64))
    return pf, xf, of


def main():
    torch.manual_seed(1234)
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        # GPT-2 tiny, nanoGPT
        cfg = dict(n_layer=2, n_head=2, n_embd=32, vocab_size=101, block_size=16, bias=True)
        gpt = GPT(GPTConfig(**cfg)).eval()
        perturb(gpt)
        sd = {k: v.detach().clone() for k, v in gpt.state_dict().items()
              if k != "lm_head.weight" and not k.endswith(".attn.bias")}  # tril buffer
        check_model(tmp, "gpt2-tiny", gpt, sd, failures)

        # Llama tiny, HF structure
        llama = LlamaForCausalLM(vocab=97, d=32, n_layer=2, n_head=4, ffn=64).eval()
        perturb(llama)
        sd = {k: v.detach().clone() for k, v in llama.state_dict().items()}
        pf, xf, of = check_model(tmp, "llama-tiny", llama, sd, failures)

        # --compare exit codes
        a = tr.read_safetensors(of)
        tr.write_safetensors(os.path.join(tmp, "same.st"), a)
        b = {"logits": a["logits"] * (1 + 1e-4)}
        tr.write_safetensors(os.path.join(tmp, "off.st"), b)
        rc_same = subprocess.run([PY, REF, "--compare", of, os.path.join(tmp, "same.st")],
                                 stdout=subprocess.DEVNULL).returncode
        rc_off = subprocess.run([PY, REF, "--compare", os.path.join(tmp, "off.st"), of,
                                 "--rtol", "1e-5"], stdout=subprocess.DEVNULL).returncode
        print("compare: identical -> rc %d, 1e-4 off -> rc %d" % (rc_same, rc_off))
        if rc_same != 0 or rc_off != 1:
            failures.append("--compare exit codes %d, %d (want 0, 1)" % (rc_same, rc_off))

        # safetensors round trip, every dtype
        ts = {"f32": torch.randn(3, 5), "f64": torch.randn(4, dtype=torch.float64),
              "f16": torch.randn(2, 3).half(), "bf16": torch.randn(7, 2).bfloat16(),
              "i64": torch.randint(-2**40, 2**40, (5,)), "scalar": torch.tensor(3.5)}
        p = os.path.join(tmp, "rt.st")
        tr.write_safetensors(p, ts)
        back = tr.read_safetensors(p)
        bad = [k for k in ts if not (back[k].dtype == ts[k].dtype and torch.equal(back[k], ts[k]))]
        with open(p, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
        print("safetensors round trip: %s (header %d bytes, multiple of 8: %s)"
              % ("ok" if not bad else "FAILED " + str(bad), n, n % 8 == 0))
        if bad or n % 8:
            failures.append("safetensors round trip: %s" % bad)

    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
