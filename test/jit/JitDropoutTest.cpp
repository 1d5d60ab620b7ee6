// shardc::dropout in the JIT API (docs/jit.md, docs/rng.md "Dropout
// masks"): every forward() draws a new mask (the traced graph advances its
// step counter), the masks are the same at every world size and in a
// data-parallel split, even an uneven one, and about p of the elements drop.
#include <shardc/jit.h>
#include <shardc/nn.h>

#include <catch2/catch.hpp>

#include <cstring>

using namespace shardc;

namespace {

struct Dropped : Model {
  Dropped() { fc = add<nn::Linear>("fc", 16, 32); }
  std::vector<Tensor> forward(const std::vector<Tensor> &in) override {
    return {dropout((*fc)(in[0]), 0.25)};
  }
  std::shared_ptr<nn::Linear> fc;
};

JitOptions options(int64_t worldSize, bool dataParallel) {
  JitOptions o;
  o.world_size = worldSize;
  o.data_parallel = dataParallel;
  o.inputs = {{"x", {7, 16}}};
  return o;
}

int64_t zeros(const HostTensor &t) {
  int64_t n = 0;
  for (int64_t i = 0; i < t.num_elements(); ++i) n += t.as<float>()[i] == 0.0f;
  return n;
}

}  // namespace

TEST_CASE("jit dropout: a new mask each forward, the same at every world size", "[jit][dropout]") {
  Dropped model;
  CompiledModel one = jit(model, options(1, false));
  const std::vector<HostTensor> inputs = one.example_inputs(3);
  const HostTensor first = one.forward(inputs).at(0);
  const HostTensor second = one.forward(inputs).at(0);
  CHECK(first.data != second.data);  // the counter advanced
  const int64_t dropped = zeros(first);
  CHECK(dropped > 0.15 * first.num_elements());  // 224 elements at p = 0.25
  CHECK(dropped < 0.35 * first.num_elements());

  for (int64_t n : {2, 3}) {
    INFO("world size " << n);
    CompiledModel sharded = jit(model, options(n, false));
    CHECK(sharded.forward(inputs).at(0).data == first.data);
    CHECK(sharded.forward(inputs).at(0).data == second.data);
    // data-parallel: 7 rows over n ranks (4 + 3, 3 + 2 + 2), the whole batch's masks
    CompiledModel split = jit(model, options(n, true));
    CHECK(split.forward(inputs).at(0).data == first.data);
    CHECK(split.forward(inputs).at(0).data == second.data);
  }
}
