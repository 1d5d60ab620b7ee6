// The JitOptions every JIT test uses for examples/embed's GPT: inputs of
// batch 2 x 8 tokens, one output named "logits".
#pragma once

#include "gpt.h"

#include <shardc/shardc.h>

inline shardc::JitOptions gptJitOptions(gpt::GPT &model, int64_t worldSize, uint64_t seed = 3) {
  shardc::JitOptions options;
  options.world_size = worldSize;
  options.seed = seed;
  options.inputs = model.inputs(2, 8);
  options.output_names = {"logits"};
  return options;
}
