// shardc embedded JIT API: built-in modules (docs/jit.md). Parameter names
// and default inits follow torch.nn (Linear: weight [out, in], bias [out]).
#pragma once

#include "shardc/module.h"

#include <cmath>
#include <optional>

namespace shardc::nn {

struct LinearOptions {
  bool bias = true;
  /// Default: torch's kaiming_uniform(a = sqrt(5)) weight and
  /// uniform(-1/sqrt(in), 1/sqrt(in)) bias.
  std::optional<Init> weight_init;
  std::optional<Init> bias_init;
  DType dtype = DType::Float32;
};

class Linear : public Module {
public:
  Linear(int64_t in_features, int64_t out_features, LinearOptions options = {});
  Tensor operator()(const Tensor &x, SourceLocation loc = SourceLocation::current()) const;
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

private:
  int64_t in_, out_;
  bool bias_;
};

class Embedding : public Module {
public:
  /// Default init: normal(0, 1), as torch.nn.Embedding.
  Embedding(int64_t num_embeddings, int64_t dim, std::optional<Init> weight_init = {},
            DType dtype = DType::Float32);
  Tensor operator()(const Tensor &ids, SourceLocation loc = SourceLocation::current()) const;
};

class LayerNorm : public Module {
public:
  LayerNorm(int64_t dim, double eps = 1e-5, DType dtype = DType::Float32);
  Tensor operator()(const Tensor &x, SourceLocation loc = SourceLocation::current()) const;

private:
  double eps_;
};

class RMSNorm : public Module {
public:
  RMSNorm(int64_t dim, double eps = 1e-6, DType dtype = DType::Float32);
  Tensor operator()(const Tensor &x, SourceLocation loc = SourceLocation::current()) const;

private:
  double eps_;
};

struct AttentionOptions {
  bool bias = true;     // on the projections
  bool causal = true;
  bool rope = false;    // rotary embedding on q and k (Llama)
  double rope_theta = 10000.0;
  std::optional<Init> weight_init;       // c_attn (default: Linear's)
  std::optional<Init> proj_weight_init;  // c_proj (default: Linear's)
  std::optional<Init> bias_init;
  DType dtype = DType::Float32;
};

/// GPT-2 style multi-head self-attention: c_attn (fused q, k, v: [3C, C]),
/// scaled dot-product attention over `heads` heads, c_proj ([C, C]).
/// x [B, T, C] -> [B, T, C].
class CausalSelfAttention : public Module {
public:
  CausalSelfAttention(int64_t dim, int64_t heads, AttentionOptions options = {});
  Tensor operator()(const Tensor &x, SourceLocation loc = SourceLocation::current()) const;

private:
  int64_t dim_, heads_;
  AttentionOptions options_;
  std::shared_ptr<Linear> c_attn_, c_proj_;
};

struct MLPOptions {
  bool bias = true;
  std::string activation = "gelu"; // gelu, gelu_tanh, relu, silu
  std::optional<Init> fc_weight_init, proj_weight_init, bias_init;
  DType dtype = DType::Float32;
};

/// c_fc ([hidden, C]), activation, c_proj ([C, hidden]).
class MLP : public Module {
public:
  MLP(int64_t dim, int64_t hidden, MLPOptions options = {});
  Tensor operator()(const Tensor &x, SourceLocation loc = SourceLocation::current()) const;

private:
  std::string activation_;
  std::shared_ptr<Linear> c_fc_, c_proj_;
};

} // namespace shardc::nn
