// scaled_dot_product_attention with torch's float attn_mask through the
// JIT API: a padded batch's keys are excluded, the other sample is
// untouched, world sizes agree bit for bit, and a mask that does not
// broadcast to the scores is a TraceError naming the call.
#include <shardc/shardc.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

using namespace shardc;

namespace {

/// Self-attention of x [2, 5, 8] in 2 heads of 4, with mask [mB, 1, 1, 5].
class MaskedAttention : public Model {
public:
  explicit MaskedAttention(std::vector<int64_t> maskShape = {2, 1, 1, 5})
      : maskShape_(std::move(maskShape)) {
    q_ = add<nn::Linear>("q", 8, 8);
    k_ = add<nn::Linear>("k", 8, 8);
    v_ = add<nn::Linear>("v", 8, 8);
  }
  std::vector<Tensor> forward(const std::vector<Tensor> &in) override {
    auto heads = [&](const Tensor &t) { return t.reshape({2, 5, 2, 4}).transpose(1, 2); };
    return {scaled_dot_product_attention(heads((*q_)(in[0])), heads((*k_)(in[0])),
                                         heads((*v_)(in[0])), in[1])};
  }
  std::vector<int64_t> maskShape_;

private:
  std::shared_ptr<nn::Linear> q_, k_, v_;
};

JitOptions options(const MaskedAttention &model, int64_t worldSize) {
  JitOptions o;
  o.world_size = worldSize;
  o.seed = 5;
  o.inputs = {{"x", {2, 5, 8}, DType::Float32}, {"mask", model.maskShape_, DType::Float32}};
  o.output_names = {"out"};
  return o;
}

/// keys [padFrom, 5) of sample 1 excluded (-inf), everything else 0.
HostTensor paddingMask(int64_t padFrom) {
  HostTensor mask{"mask", DType::Float32, {2, 1, 1, 5}, {}};
  mask.data.resize(10 * sizeof(float));
  for (int64_t s = 0; s < 5; ++s) {
    mask.as<float>()[s] = 0.0f;
    mask.as<float>()[5 + s] = s >= padFrom ? -INFINITY : 0.0f;
  }
  return mask;
}

std::vector<float> floats(const HostTensor &t) {
  std::vector<float> v(static_cast<size_t>(t.num_elements()));
  std::memcpy(v.data(), t.data.data(), v.size() * sizeof(float));
  return v;
}

} // namespace

TEST_CASE("jit: sdpa with an additive mask excludes padded keys", "[jit][run]") {
  MaskedAttention model;
  CompiledModel compiled = jit(model, options(model, 1));
  std::vector<HostTensor> inputs = compiled.example_inputs(5);
  inputs[1] = paddingMask(5);  // nothing padded
  const std::vector<float> open = floats(compiled.forward(inputs).at(0));
  inputs[1] = paddingMask(3);  // sample 1's keys 3 and 4 padded
  const std::vector<float> padded = floats(compiled.forward(inputs).at(0));
  // [2, 2, 5, 4]: sample 0 (the first 40 values) is untouched, sample 1
  // changes in every query row.
  for (size_t i = 0; i < 40; ++i) CHECK(padded[i] == open[i]);
  for (size_t row = 10; row < 20; ++row) {
    bool differs = false;
    for (size_t e = 0; e < 4; ++e) differs |= padded[row * 4 + e] != open[row * 4 + e];
    CHECK(differs);
  }
  for (int64_t n : {2, 3}) {
    INFO("world size " << n);
    CHECK(floats(compiled.with_world_size(n).forward(inputs).at(0)) == padded);
  }
  inputs[1] = paddingMask(0);  // every key of sample 1 padded: zeros, as torch
  const std::vector<float> none = floats(compiled.forward(inputs).at(0));
  for (size_t i = 40; i < 80; ++i) CHECK(none[i] == 0.0f);
}

TEST_CASE("jit: an sdpa mask that does not broadcast is a trace error", "[jit][trace]") {
  MaskedAttention model({2, 1, 1, 4});
  try {
    jit(model, options(model, 1));
    FAIL("no error for a [2, 1, 1, 4] mask over 5 keys");
  } catch (const Error &error) {
    CHECK_THAT(error.what(), Catch::Contains("does not broadcast to the scores [2, 2, 5, 5]"));
  }
}

namespace {

/// Grouped-query attention of x [2, 5, 8]: 4 query heads of 2 share 2 key /
/// value heads. Outputs the op on the shared heads and on their copies
/// (transformers' repeat_kv: head j copied to heads 2j, 2j + 1).
class GroupedAttention : public Model {
public:
  GroupedAttention() {
    q_ = add<nn::Linear>("q", 8, 8);
    k_ = add<nn::Linear>("k", 8, 4);
    v_ = add<nn::Linear>("v", 8, 4);
  }
  std::vector<Tensor> forward(const std::vector<Tensor> &in) override {
    auto heads = [](const Tensor &t, int64_t h) { return t.reshape({2, 5, h, 2}).transpose(1, 2); };
    auto repeated = [](const Tensor &t) {
      const Tensor once = t.reshape({2, 2, 1, 5, 2});
      return cat({once, once}, 2).reshape({2, 4, 5, 2});
    };
    const Tensor q = heads((*q_)(in[0]), 4), k = heads((*k_)(in[0]), 2), v = heads((*v_)(in[0]), 2);
    return {scaled_dot_product_attention(q, k, v, in[1], true),
            scaled_dot_product_attention(q, repeated(k), repeated(v), in[1], true)};
  }

private:
  std::shared_ptr<nn::Linear> q_, k_, v_;
};

} // namespace

TEST_CASE("jit: sdpa reads grouped key / value heads as their copies would be read",
          "[jit][run]") {
  GroupedAttention model;
  JitOptions o;
  o.seed = 5;
  o.inputs = {{"x", {2, 5, 8}, DType::Float32}, {"mask", {2, 1, 1, 5}, DType::Float32}};
  o.output_names = {"shared", "copied"};
  CompiledModel compiled = jit(model, o);
  std::vector<HostTensor> inputs = compiled.example_inputs(5);
  inputs[1] = paddingMask(3);
  const std::vector<HostTensor> out = compiled.forward(inputs);
  REQUIRE(out.at(0).shape == std::vector<int64_t>{2, 4, 5, 2});
  CHECK(floats(out.at(0)) == floats(out.at(1)));
  for (int64_t n : {2, 3}) {
    INFO("world size " << n);
    CHECK(floats(compiled.with_world_size(n).forward(inputs).at(0)) == floats(out.at(0)));
  }
}
