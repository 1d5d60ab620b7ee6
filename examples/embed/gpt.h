// A small GPT defined with the shardc embedded API (docs/jit.md).
//
// It is examples/gpt2-tiny.json written in C++: the same parameter names,
// shapes, init programs and forward ops (nanoGPT's GPT with GPT-2 defaults,
// lm_head tied to transformer.wte.weight), so running it and running that
// graph file give identical bits.
#pragma once

#include <shardc/shardc.h>

#include <cmath>
#include <string>
#include <vector>

namespace gpt {

struct Config {
  int64_t vocab = 101;
  int64_t block_size = 16;
  int64_t layers = 2;
  int64_t heads = 2;
  int64_t dim = 32;
};

class Block : public shardc::Module {
public:
  explicit Block(const Config &c) {
    using namespace shardc;
    ln_1 = add<nn::LayerNorm>("ln_1", c.dim);
    // nanoGPT: normal(0, 0.02) weights, zero biases; both c_proj weights
    // normal(0, 0.02 / sqrt(2 * n_layer)).
    Init scaled = init::normal(0.0, 0.02 / std::sqrt(2.0 * double(c.layers)));
    nn::AttentionOptions a;
    a.weight_init = init::normal(0.0, 0.02);
    a.proj_weight_init = scaled;
    a.bias_init = init::zeros();
    attn = add<nn::CausalSelfAttention>("attn", c.dim, c.heads, a);
    ln_2 = add<nn::LayerNorm>("ln_2", c.dim);
    nn::MLPOptions m;
    m.fc_weight_init = init::normal(0.0, 0.02);
    m.proj_weight_init = scaled;
    m.bias_init = init::zeros();
    mlp = add<nn::MLP>("mlp", c.dim, 4 * c.dim, m);
  }

  shardc::Tensor operator()(const shardc::Tensor &x) const {
    auto s = scope();
    shardc::Tensor h = x + (*attn)((*ln_1)(x));
    return h + (*mlp)((*ln_2)(h));
  }

  std::shared_ptr<shardc::nn::LayerNorm> ln_1, ln_2;
  std::shared_ptr<shardc::nn::CausalSelfAttention> attn;
  std::shared_ptr<shardc::nn::MLP> mlp;
};

class GPT : public shardc::Model {
public:
  explicit GPT(const Config &c = {}) : config(c) {
    using namespace shardc;
    wte = add<nn::Embedding>("transformer.wte", c.vocab, c.dim, init::normal(0.0, 0.02));
    wpe = add<nn::Embedding>("transformer.wpe", c.block_size, c.dim, init::normal(0.0, 0.02));
    for (int64_t i = 0; i < c.layers; ++i)
      h.push_back(add<Block>("transformer.h." + std::to_string(i), c));
    ln_f = add<nn::LayerNorm>("transformer.ln_f", c.dim);
  }

  /// inputs: idx int64 [B, T]; returns logits [B, T, vocab].
  std::vector<shardc::Tensor> forward(const std::vector<shardc::Tensor> &inputs) override {
    const shardc::Tensor &idx = inputs.at(0);
    int64_t T = idx.size(1);
    // Positions 0..T-1: rows [0, T) of the position table.
    shardc::Tensor x = (*wte)(idx) + wpe->param("weight").slice(0, 0, T);
    for (const auto &block : h)
      x = (*block)(x);
    x = (*ln_f)(x);
    ++forward_calls;
    return {shardc::linear(x, wte->param("weight"))}; // lm_head tied to wte
  }

  /// The inputs forward takes, for shardc::JitOptions.
  std::vector<shardc::InputSpec> inputs(int64_t batch, int64_t T) const {
    return {{"idx", {batch, T}, shardc::DType::Int64, config.vocab}};
  }

  Config config;
  int64_t forward_calls = 0;
  std::shared_ptr<shardc::nn::Embedding> wte, wpe;
  std::vector<std::shared_ptr<Block>> h;
  std::shared_ptr<shardc::nn::LayerNorm> ln_f;
};

} // namespace gpt
