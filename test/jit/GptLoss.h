// examples/embed's GPT under a next-token loss, as the gradient and
// training tests of the JIT API use it (JitOptions::grad, ::optimizer).
#pragma once

#include "GptJitOptions.h"
#include "gpt.h"

#include <cstring>

/// examples/embed's GPT under a next-token loss over targets [B, T].
class GptLoss : public gpt::GPT {
public:
  explicit GptLoss(const gpt::Config &c = {}) : gpt::GPT(c) {}
  std::vector<shardc::Tensor> forward(const std::vector<shardc::Tensor> &inputs) override {
    shardc::Tensor logits = gpt::GPT::forward({inputs.at(0)}).at(0);
    const int64_t B = logits.size(0), T = logits.size(1), V = logits.size(2);
    return {shardc::cross_entropy(logits.reshape({B * T, V}), inputs.at(1).reshape({B * T}))};
  }
  std::vector<shardc::InputSpec> lossInputs(int64_t batch, int64_t T) const {
    std::vector<shardc::InputSpec> specs = inputs(batch, T);
    specs.push_back({"targets", {batch, T}, shardc::DType::Int64, config.vocab});
    return specs;
  }
};

/// The loss as forward's one output "loss", differentiated (grad = "loss").
inline shardc::JitOptions lossOptions(GptLoss &model, int64_t worldSize) {
  shardc::JitOptions options = gptJitOptions(model, worldSize, 7);
  options.inputs = model.lossInputs(2, 8);
  options.output_names = {"loss"};
  options.grad = "loss";
  return options;
}

/// A float32 0-d output's value.
inline float scalar(const shardc::HostTensor &t) {
  float value;
  std::memcpy(&value, t.data.data(), sizeof value);
  return value;
}
