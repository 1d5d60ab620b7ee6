//===- Nn.cpp - built-in modules -------------------------------------------===//
#include "shardc/nn.h"

#include <cmath>

namespace shardc::nn {

Linear::Linear(int64_t in_features, int64_t out_features, LinearOptions options)
    : in_(in_features), out_(out_features), bias_(options.bias) {
  double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
  register_parameter("weight", {out_features, in_features},
                     options.weight_init.value_or(init::kaiming_uniform(std::sqrt(5.0))),
                     options.dtype);
  if (options.bias)
    register_parameter("bias", {out_features},
                       options.bias_init.value_or(init::uniform(-bound, bound)),
                       options.dtype);
}

Tensor Linear::operator()(const Tensor &x, SourceLocation loc) const {
  auto s = scope();
  if (bias_)
    return linear(x, param("weight", loc), param("bias", loc), loc);
  return linear(x, param("weight", loc), loc);
}

Embedding::Embedding(int64_t num_embeddings, int64_t dim, std::optional<Init> weight_init,
                     DType dtype) {
  register_parameter("weight", {num_embeddings, dim},
                     weight_init.value_or(init::normal(0.0, 1.0)), dtype);
}

Tensor Embedding::operator()(const Tensor &ids, SourceLocation loc) const {
  auto s = scope();
  return embedding(param("weight", loc), ids, loc);
}

LayerNorm::LayerNorm(int64_t dim, double eps, DType dtype) : eps_(eps) {
  register_parameter("weight", {dim}, init::ones(), dtype);
  register_parameter("bias", {dim}, init::zeros(), dtype);
}

Tensor LayerNorm::operator()(const Tensor &x, SourceLocation loc) const {
  auto s = scope();
  return layer_norm(x, param("weight", loc), param("bias", loc), eps_, loc);
}

RMSNorm::RMSNorm(int64_t dim, double eps, DType dtype) : eps_(eps) {
  register_parameter("weight", {dim}, init::ones(), dtype);
}

Tensor RMSNorm::operator()(const Tensor &x, SourceLocation loc) const {
  auto s = scope();
  return rms_norm(x, param("weight", loc), eps_, loc);
}

CausalSelfAttention::CausalSelfAttention(int64_t dim, int64_t heads,
                                         AttentionOptions options)
    : dim_(dim), heads_(heads), options_(options) {
  LinearOptions attn{options.bias, options.weight_init, options.bias_init, options.dtype};
  LinearOptions proj{options.bias, options.proj_weight_init, options.bias_init, options.dtype};
  c_attn_ = add<Linear>("c_attn", dim, 3 * dim, attn);
  c_proj_ = add<Linear>("c_proj", dim, dim, proj);
}

Tensor CausalSelfAttention::operator()(const Tensor &x, SourceLocation loc) const {
  auto s = scope();
  if (x.rank() != 3 || x.shape()[2] != dim_)
    throw TraceError("attention: x '" + x.name() + "' " + shape_string(x.shape()) +
                         " must be [B, T, " + std::to_string(dim_) + "]",
                     loc, path());
  if (heads_ <= 0 || dim_ % heads_ != 0)
    throw TraceError("attention: " + std::to_string(heads_) + " heads do not divide dim " +
                         std::to_string(dim_),
                     loc, path());
  int64_t B = x.shape()[0], T = x.shape()[1], hd = dim_ / heads_;
  std::vector<Tensor> qkv = (*c_attn_)(x, loc).split({dim_, dim_, dim_}, -1, loc);
  auto heads = [&](const Tensor &t) {
    return t.reshape({B, T, heads_, hd}, loc).transpose(1, 2, loc);
  };
  Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
  if (options_.rope) {
    q = rotary_embedding(q, options_.rope_theta, loc);
    k = rotary_embedding(k, options_.rope_theta, loc);
  }
  Tensor y = scaled_dot_product_attention(q, k, v, options_.causal, std::nullopt, loc);
  y = y.transpose(1, 2, loc).reshape({B, T, dim_}, loc);
  return (*c_proj_)(y, loc);
}

MLP::MLP(int64_t dim, int64_t hidden, MLPOptions options) : activation_(options.activation) {
  if (activation_ != "gelu" && activation_ != "gelu_tanh" && activation_ != "relu" &&
      activation_ != "silu")
    throw Error("MLP: unknown activation '" + activation_ +
                "' (expected gelu, gelu_tanh, relu or silu)");
  c_fc_ = add<Linear>("c_fc", dim, hidden,
                      LinearOptions{options.bias, options.fc_weight_init, options.bias_init,
                                    options.dtype});
  c_proj_ = add<Linear>("c_proj", hidden, dim,
                        LinearOptions{options.bias, options.proj_weight_init,
                                      options.bias_init, options.dtype});
}

Tensor MLP::operator()(const Tensor &x, SourceLocation loc) const {
  auto s = scope();
  Tensor h = (*c_fc_)(x, loc);
  if (activation_ == "gelu")
    h = gelu(h, "none", loc);
  else if (activation_ == "gelu_tanh")
    h = gelu(h, "tanh", loc);
  else if (activation_ == "relu")
    h = relu(h, loc);
  else
    h = silu(h, loc);
  return (*c_proj_)(h, loc);
}

} // namespace shardc::nn
