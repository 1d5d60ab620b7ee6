"""Hugging Face transformers models for the model zoo (bench/zoo.py) and the
export tests (test/lit/export/aten-hf.test): each architecture built from a
small config, as a user builds it (AutoModel*.from_config, no downloaded
weights), in eval mode, with the KV cache off (use_cache=False) so forward
returns logits / hidden states only."""

import importlib


class _Lazy:
    """transformers, imported on first use: bench/zoo_models.py (and every
    torchvision export of the zoo) reads this module's ZOO table without
    paying transformers' import."""

    def __getattr__(self, name):
        return getattr(importlib.import_module("transformers"), name)


tf = _Lazy()

# Attention through F.scaled_dot_product_attention, the graph's fused op
# (docs/exporter.md, "Hugging Face models").
ATTN = "sdpa"

# One small shape for every decoder-only LM: 2 layers, 4 heads of 16.
LM = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
          num_attention_heads=4, max_position_embeddings=128, use_cache=False,
          tie_word_embeddings=False)


def _build(config, auto=None):
    auto = auto or tf.AutoModelForCausalLM
    try:
        config._attn_implementation = ATTN
        model = auto.from_config(config, attn_implementation=ATTN)
    except ValueError:
        # the architecture has no sdpa attention (BLOOM, Gemma 2): its own,
        # as transformers picks for it by default
        config._attn_implementation = "eager"
        model = auto.from_config(config, attn_implementation="eager")
    return model.eval()


def _lm(config_class, kw, **extra):
    """A small decoder-only LM (grouped-query attention: 4 heads share 2 key / value
    heads): LM's shape, then `extra`, then the caller's kw."""
    return _build(config_class(**dict(dict(LM, num_key_value_heads=2, **extra), **kw)))


def causal_lm(config, **kw):
    """A decoder-only LM of transformers' config class named `config`: LM's
    shape, then kw (names through the config's attribute_map: hidden_size is
    GPT-J's n_embd, MPT's d_model)."""
    return _build(getattr(tf, config)(**dict(LM, **kw)))


def encoder(config, **kw):
    """An encoder (BERT-like) of the config class named `config`, AutoModel."""
    cfg = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
               num_attention_heads=4, max_position_embeddings=128)
    return _build(getattr(tf, config)(**dict(cfg, **kw)), tf.AutoModel)


def hf_model(config, auto="AutoModel", **kw):
    """Any architecture: the config class named `config` from kw alone, built
    with the Auto class named `auto`."""
    return _build(getattr(tf, config)(**kw), getattr(tf, auto))


def llama(**kw):
    return _lm(tf.LlamaConfig, kw)


def mistral(**kw):
    return _lm(tf.MistralConfig, kw, sliding_window=None)


def qwen2(**kw):
    return _lm(tf.Qwen2Config, kw)


def gemma(**kw):
    return _lm(tf.GemmaConfig, kw, head_dim=16, tie_word_embeddings=True)


def phi(**kw):
    return _lm(tf.PhiConfig, kw)


def mixtral(**kw):
    return _lm(tf.MixtralConfig, kw, num_local_experts=4, num_experts_per_tok=2)


def qwen2_moe(**kw):
    # Mixture of experts with a shared expert (gated by a sigmoid) beside the routed ones.
    return _lm(tf.Qwen2MoeConfig, kw, num_experts=4, num_experts_per_tok=2,
               moe_intermediate_size=64, shared_expert_intermediate_size=128)


def qwen3_moe(**kw):
    return _lm(tf.Qwen3MoeConfig, kw, num_experts=4, num_experts_per_tok=2,
               moe_intermediate_size=64)


def olmoe(**kw):
    return _lm(tf.OlmoeConfig, kw, num_experts=4, num_experts_per_tok=2,
               bos_token_id=0, eos_token_id=0, pad_token_id=0)


def gpt2(**kw):
    return _build(tf.GPT2Config(**dict(dict(vocab_size=256, n_embd=64, n_layer=2, n_head=4,
                                            n_positions=128, use_cache=False,
                                            bos_token_id=0, eos_token_id=0), **kw)))


def bert(**kw):
    cfg = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
               num_attention_heads=4, max_position_embeddings=128)
    return _build(tf.BertConfig(**dict(cfg, **kw)), tf.AutoModel)


def t5(**kw):
    cfg = dict(vocab_size=256, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
               use_cache=False)
    return _build(tf.T5Config(**dict(cfg, **kw)), tf.AutoModelForSeq2SeqLM)


def vit(**kw):
    cfg = dict(image_size=32, patch_size=8, num_channels=3, hidden_size=64,
               intermediate_size=128, num_hidden_layers=2, num_attention_heads=4)
    return _build(tf.ViTConfig(**dict(cfg, **kw)), tf.AutoModel)


# The zoo's sizes: 4 layers of width 256 (4 heads of 64), vocabulary 1024,
# 2 sequences of 128 tokens: big enough for forward times in milliseconds,
# small enough to export in seconds. The tests use the factories' defaults.
WIDE = {"hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 4,
        "vocab_size": 1024, "max_position_embeddings": 256}
IDS = {"input_ids": {"shape": [2, 128], "dtype": "int64", "high": 1024}}
ZOO = {
    "HF GPT-2": ("zoo_hf:gpt2", {"n_embd": 256, "n_layer": 4, "vocab_size": 1024,
                                 "n_positions": 256}, IDS),
    "HF Llama": ("zoo_hf:llama", WIDE, IDS),
    "HF Mistral": ("zoo_hf:mistral", WIDE, IDS),
    "HF Qwen2": ("zoo_hf:qwen2", WIDE, IDS),
    "HF Gemma": ("zoo_hf:gemma", dict(WIDE, head_dim=64), IDS),
    "HF Phi": ("zoo_hf:phi", WIDE, IDS),
    "HF Mixtral (MoE)": ("zoo_hf:mixtral", WIDE, IDS),
    "HF Qwen2-MoE": ("zoo_hf:qwen2_moe", dict(WIDE, moe_intermediate_size=256,
                                              shared_expert_intermediate_size=1024), IDS),
    "HF Qwen3-MoE": ("zoo_hf:qwen3_moe", dict(WIDE, moe_intermediate_size=256), IDS),
    "HF OLMoE": ("zoo_hf:olmoe", WIDE, IDS),
    "HF BERT": ("zoo_hf:bert", WIDE, IDS),
    "HF T5": ("zoo_hf:t5", {"d_model": 256, "d_kv": 64, "d_ff": 1024, "num_layers": 4,
                            "vocab_size": 1024},
              dict(IDS, decoder_input_ids={"shape": [2, 32], "dtype": "int64", "high": 1024})),
    "HF ViT": ("zoo_hf:vit", {"image_size": 224, "patch_size": 16, "hidden_size": 192,
                              "intermediate_size": 768, "num_hidden_layers": 4,
                              "num_attention_heads": 3}, {"pixel_values": [2, 3, 224, 224]}),
}

# More architectures through the generic factories, at the zoo's sizes
# (2026-12-03: each passed the full check at a small size first).
GQA = dict(WIDE, num_key_value_heads=2)
for _name, _config, _kw in (
        ("GPT-NeoX", "GPTNeoXConfig", WIDE),
        ("OPT", "OPTConfig", dict(WIDE, ffn_dim=1024, word_embed_proj_dim=256)),
        ("BLOOM", "BloomConfig", WIDE),
        ("Falcon", "FalconConfig", WIDE),
        ("GPT-J", "GPTJConfig", dict(WIDE, rotary_dim=16)),
        ("CodeGen", "CodeGenConfig", dict(WIDE, rotary_dim=16, n_ctx=256)),
        ("StableLM", "StableLmConfig", dict(WIDE, num_key_value_heads=4)),
        ("Phi-3", "Phi3Config", dict(WIDE, pad_token_id=0)),
        ("Qwen3", "Qwen3Config", dict(GQA, head_dim=64)),
        ("Gemma 2", "Gemma2Config", dict(GQA, head_dim=64)),
        ("Gemma 3", "Gemma3TextConfig", dict(GQA, head_dim=64)),
        ("Cohere", "CohereConfig", GQA),
        ("OLMo 2", "Olmo2Config", GQA),
        ("Granite", "GraniteConfig", GQA),
        ("StarCoder2", "Starcoder2Config", GQA),
        ("GPTBigCode", "GPTBigCodeConfig", WIDE),
        ("MPT", "MptConfig", dict(WIDE, max_seq_len=256)),
        ("SmolLM3", "SmolLM3Config", dict(GQA, pad_token_id=0))):
    ZOO["HF " + _name] = ("zoo_hf:causal_lm", dict(_kw, config=_config), IDS)

# 2026-12-07: RoPE tables of the scaled kinds (Llama 3's rope_type "llama3",
# YaRN) as constant data, DeepSeek-V3's latent attention and group-limited
# routing, and the 2025 decoders that needed nothing new (each probed at 2
# layers of width 64 first). Mixtures of experts: 8 experts, 2 per token.
MOE = dict(n_routed_experts=8, num_experts_per_tok=2, n_group=4, topk_group=2,
           moe_intermediate_size=256, first_k_dense_replace=1)
for _name, _config, _kw in (
        ("Llama 3.1 (rope llama3)", "LlamaConfig",
         dict(GQA, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 4.0,
                                 "original_max_position_embeddings": 64})),
        ("Qwen2 (YaRN)", "Qwen2Config",
         dict(GQA, rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                 "original_max_position_embeddings": 64})),
        ("DeepSeek-V3", "DeepseekV3Config",
         dict(WIDE, num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=64,
              q_lora_rank=96, qk_rope_head_dim=16, qk_nope_head_dim=32, v_head_dim=32, **MOE)),
        ("dots.llm1", "Dots1Config", dict(GQA, head_dim=64, n_shared_experts=1, **MOE)),
        ("GPT-OSS", "GptOssConfig", dict(GQA, head_dim=64, num_local_experts=8,
                                         num_experts_per_tok=2, sliding_window=64)),
        ("GLM-4", "Glm4Config", dict(GQA, head_dim=64, pad_token_id=0)),
        ("ERNIE 4.5", "Ernie4_5Config", dict(GQA, head_dim=64)),
        ("OLMo 3", "Olmo3Config", dict(GQA, sliding_window=64)),
        ("Helium", "HeliumConfig", dict(GQA, head_dim=64)),
        ("EXAONE 4", "Exaone4Config", dict(GQA, head_dim=64, sliding_window=64)),
        ("Nemotron", "NemotronConfig", dict(GQA, head_dim=64)),
        ("DiffLlama", "DiffLlamaConfig", GQA),
        ("Arcee", "ArceeConfig", GQA),
        ("Seed-OSS", "SeedOssConfig", dict(GQA, head_dim=64)),
        ("HunYuan dense", "HunYuanDenseV1Config", dict(GQA, head_dim=64)),
        ("LFM2", "Lfm2Config", GQA),
        ("Apertus", "ApertusConfig", GQA),
        ("Jamba", "JambaConfig", dict(GQA, num_experts=8, num_experts_per_tok=2,
                                      mamba_d_state=8, mamba_dt_rank=16, attn_layer_period=2,
                                      attn_layer_offset=1, expert_layer_period=2,
                                      expert_layer_offset=1))):
    ZOO["HF " + _name] = ("zoo_hf:causal_lm", dict(_kw, config=_config), IDS)

# 2026-12-08: state-space and linear-attention decoders, whose init writes
# the time step's bias as softplus's inverse of a log-uniform draw
# (inverse_softplus) and A_log as log of a draw or of arange. Mamba-2 heads:
# 8 of 64 over the 512 inner channels (expand 2).
SSM = dict(mamba_d_state=16, mamba_n_groups=1, mamba_chunk_size=32)
for _name, _config, _kw in (
        ("Mamba", "MambaConfig", dict(WIDE, state_size=16, expand=2, conv_kernel=4)),
        ("FalconMamba", "FalconMambaConfig", dict(WIDE, state_size=16, expand=2,
                                                  conv_kernel=4)),
        ("Mamba2", "Mamba2Config", dict(WIDE, state_size=16, expand=2, conv_kernel=4,
                                        num_heads=8, head_dim=64, n_groups=1,
                                        chunk_size=32)),
        ("Bamba", "BambaConfig", dict(GQA, mamba_n_heads=8, mamba_d_head=64,
                                      attn_layer_indices=[1, 3], **SSM)),
        ("NemotronH", "NemotronHConfig", dict(GQA, mamba_num_heads=8, mamba_head_dim=64,
                                              ssm_state_size=16, n_groups=1, chunk_size=32,
                                              hybrid_override_pattern="M*M-", head_dim=64)),
        ("GraniteMoeHybrid", "GraniteMoeHybridConfig",
         dict(GQA, mamba_n_heads=8, mamba_d_head=64, num_local_experts=8,
              num_experts_per_tok=2, layer_types=["mamba", "attention", "mamba", "attention"],
              **SSM)),
        ("Zamba2", "Zamba2Config", dict(WIDE, num_key_value_heads=4, mamba_d_state=16,
                                        mamba_headdim=64, n_mamba_heads=8, mamba_ngroups=1,
                                        chunk_size=32, num_hidden_layers=4,
                                        layers_block_type=["mamba", "hybrid", "mamba", "hybrid"],
                                        use_shared_attention_adapter=False)),
        ("Qwen3-Next", "Qwen3NextConfig", dict(GQA, head_dim=64, num_experts=8,
                                               num_experts_per_tok=2, moe_intermediate_size=256,
                                               linear_num_value_heads=4, linear_num_key_heads=2,
                                               linear_key_head_dim=64,
                                               linear_value_head_dim=64)),
        ("Qwen3.5 (text)", "Qwen3_5TextConfig", dict(GQA, head_dim=64, linear_num_value_heads=4,
                                                     linear_num_key_heads=2,
                                                     linear_key_head_dim=64,
                                                     linear_value_head_dim=64)),
        ("Falcon-H1", "FalconH1Config", dict(GQA, head_dim=64, mamba_n_heads=8, mamba_d_head=64,
                                             mamba_expand=2, mamba_d_ssm=512, **SSM)),
        ("Kimi Linear", "KimiLinearConfig",
         dict(GQA, head_dim=64, pad_token_id=0, num_experts=8, num_experts_per_token=2,
              moe_intermediate_size=256, kv_lora_rank=64, qk_rope_head_dim=16,
              qk_nope_head_dim=32, v_head_dim=32, linear_head_dim=64, linear_num_heads=4)),
        ("OLMo-Hybrid", "OlmoHybridConfig", dict(GQA, pad_token_id=0)),
        # the same day: rotary embedding through complex numbers, a router's
        # scatter of its top scores
        ("Llama 4 (text)", "Llama4TextConfig", dict(GQA, head_dim=64, num_local_experts=4,
                                                    num_experts_per_tok=1,
                                                    intermediate_size_mlp=1024,
                                                    attention_chunk_size=64))):
    ZOO["HF " + _name] = ("zoo_hf:causal_lm", dict(_kw, config=_config), IDS)
for _name, _config, _kw in (
        ("DistilBERT", "DistilBertConfig", dict(WIDE, hidden_dim=1024)),
        ("ALBERT", "AlbertConfig", dict(WIDE, embedding_size=128)),
        ("DeBERTa-v2", "DebertaV2Config", WIDE),
        ("ELECTRA", "ElectraConfig", dict(WIDE, embedding_size=128)),
        ("ModernBERT", "ModernBertConfig", dict(WIDE, pad_token_id=0, bos_token_id=0,
                                                 eos_token_id=0, cls_token_id=0,
                                                 sep_token_id=0)),
        # position ids from the token ids (ne, cumsum, int64 arithmetic)
        ("RoBERTa", "RobertaConfig", dict(WIDE, pad_token_id=1)),
        ("XLM-RoBERTa", "XLMRobertaConfig", dict(WIDE, pad_token_id=1)),
        ("CamemBERT", "CamembertConfig", dict(WIDE, pad_token_id=1)),
        ("Data2VecText", "Data2VecTextConfig", dict(WIDE, pad_token_id=1)),
        ("ESM", "EsmConfig", dict(WIDE, pad_token_id=1, mask_token_id=2,
                                  position_embedding_type="rotary")),
        ("MPNet", "MPNetConfig", dict(WIDE, pad_token_id=1)),
        ("DeBERTa", "DebertaConfig", dict(WIDE, pad_token_id=0)),
        ("BigBird (full attention)", "BigBirdConfig",
         dict(WIDE, pad_token_id=0, attention_type="original_full")),
        ("ConvBERT", "ConvBertConfig", dict(WIDE, pad_token_id=0)),
        ("RoFormer", "RoFormerConfig", dict(WIDE, pad_token_id=0)),
        ("ERNIE", "ErnieConfig", dict(WIDE, pad_token_id=0)),
        ("MegatronBERT", "MegatronBertConfig", dict(WIDE, pad_token_id=0)),
        ("MobileBERT", "MobileBertConfig", dict(WIDE, pad_token_id=0, embedding_size=128,
                                                intra_bottleneck_size=128,
                                                true_hidden_size=128)),
        ("RemBERT", "RemBertConfig", dict(WIDE, pad_token_id=0, bos_token_id=0,
                                          eos_token_id=0, input_embedding_size=128,
                                          output_embedding_size=128))):
    ZOO["HF " + _name] = ("zoo_hf:encoder", dict(_kw, config=_config), IDS)

# Padded batches: an attention mask of 0s and 1s beside the ids (random per
# token here: sdpa masks the keys whose mask is 0, as for right padding).
MASKED = dict(IDS, attention_mask={"shape": [2, 128], "dtype": "int64", "high": 2})
ZOO["HF BERT (attention mask)"] = ("zoo_hf:bert", WIDE, MASKED)
ZOO["HF RoBERTa (attention mask)"] = ("zoo_hf:encoder",
                                      dict(WIDE, config="RobertaConfig", pad_token_id=1), MASKED)
ZOO["HF Llama (attention mask)"] = ("zoo_hf:llama", WIDE, MASKED)
ZOO["HF GPT-2 (attention mask)"] = ZOO["HF GPT-2"][:2] + (MASKED,)

# Vision, sequence-to-sequence and speech models through hf_model (same date).
VISION = dict(image_size=64, patch_size=8, hidden_size=128, intermediate_size=512,
              num_hidden_layers=4, num_attention_heads=4)
PIXELS = {"pixel_values": [2, 3, 64, 64]}
SEQ2SEQ = dict(vocab_size=1024, d_model=256, encoder_layers=4, decoder_layers=4,
               encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=1024,
               decoder_ffn_dim=1024, max_position_embeddings=256, use_cache=False)
DECODER_IDS = {"decoder_input_ids": {"shape": [2, 32], "dtype": "int64", "high": 1024}}
for _name, _config, _auto, _kw, _inputs in (
        ("CLIP vision", "CLIPVisionConfig", "AutoModel", VISION, PIXELS),
        ("SigLIP vision", "SiglipVisionConfig", "AutoModel", VISION, PIXELS),
        ("DINOv2", "Dinov2Config", "AutoModel", VISION, PIXELS),
        ("DeiT", "DeiTConfig", "AutoModel", VISION, PIXELS),
        ("BEiT", "BeitConfig", "AutoModel", dict(VISION, use_relative_position_bias=True),
         PIXELS),
        ("Swin", "SwinConfig", "AutoModel",
         dict(image_size=64, patch_size=4, embed_dim=32, depths=[2, 2, 2],
              num_heads=[2, 4, 8], window_size=4), PIXELS),
        ("ConvNeXt", "ConvNextConfig", "AutoModel",
         dict(hidden_sizes=[32, 64, 128], depths=[2, 2, 2], num_stages=3), PIXELS),
        ("ResNet", "ResNetConfig", "AutoModel",
         dict(hidden_sizes=[32, 64, 128], depths=[2, 2, 2], embedding_size=32), PIXELS),
        ("SegFormer", "SegformerConfig", "AutoModel",
         dict(num_encoder_blocks=2, depths=[2, 2], sr_ratios=[2, 1], hidden_sizes=[32, 64],
              num_attention_heads=[1, 2], patch_sizes=[7, 3], strides=[4, 2],
              mlp_ratios=[4, 4]), PIXELS),
        ("BART", "BartConfig", "AutoModelForSeq2SeqLM", SEQ2SEQ, dict(IDS, **DECODER_IDS)),
        ("Pegasus", "PegasusConfig", "AutoModelForSeq2SeqLM", SEQ2SEQ,
         dict(IDS, **DECODER_IDS)),
        # sinusoidal positions read at ids counted from the token ids
        ("M2M100", "M2M100Config", "AutoModelForSeq2SeqLM", dict(SEQ2SEQ, pad_token_id=1),
         dict(IDS, **DECODER_IDS)),
        ("mBART", "MBartConfig", "AutoModelForSeq2SeqLM", SEQ2SEQ, dict(IDS, **DECODER_IDS)),
        ("Marian", "MarianConfig", "AutoModelForSeq2SeqLM", dict(SEQ2SEQ, pad_token_id=0,
                                                                  decoder_start_token_id=0),
         dict(IDS, **DECODER_IDS)),
        ("Whisper", "WhisperConfig", "AutoModelForSpeechSeq2Seq",
         dict(SEQ2SEQ, num_mel_bins=80, max_source_positions=100, max_target_positions=128,
              pad_token_id=0, bos_token_id=0, eos_token_id=0, decoder_start_token_id=0),
         dict({"input_features": [2, 80, 200]}, **DECODER_IDS)),
        ("Wav2Vec2", "Wav2Vec2Config", "AutoModel",
         dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
              intermediate_size=1024, conv_dim=[64, 64, 64], conv_stride=[5, 2, 2],
              conv_kernel=[10, 3, 3], num_conv_pos_embeddings=32,
              num_conv_pos_embedding_groups=4), {"input_values": [2, 16000]})):
    ZOO["HF " + _name] = ("zoo_hf:hf_model", dict(_kw, config=_config, auto=_auto), _inputs)
