// shardc::dropout in the JIT API (docs/jit.md, docs/rng.md "Dropout
// masks"): every forward() draws a new mask (the traced graph advances its
// step counter), the masks are the same at every world size and in a
// data-parallel split, even an uneven one, and about p of the elements drop.
#include <shardc/jit.h>
#include <shardc/nn.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>

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

/// Dropout inside a classifier trained by SGD (the loss of its rows).
struct DroppedLoss : Model {
  DroppedLoss() {
    fc = add<nn::Linear>("fc", 16, 32);
    head = add<nn::Linear>("head", 32, 5);
  }
  std::vector<Tensor> forward(const std::vector<Tensor> &in) override {
    return {cross_entropy((*head)(dropout((*fc)(in[0]), 0.25)), in[1])};
  }
  std::shared_ptr<nn::Linear> fc, head;
};

JitOptions trainOptions(int64_t worldSize, bool dataParallel) {
  JitOptions o;
  o.world_size = worldSize;
  o.data_parallel = dataParallel;
  o.inputs = {{"x", {6, 16}}, {"target", {6}, DType::Int64, 5}};
  o.output_names = {"loss"};
  o.grad = "loss";
  o.optimizer.name = "sgd";
  o.optimizer.lr = 0.1;
  o.optimizer.momentum = 0.9;
  return o;
}

std::string fileBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
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

TEST_CASE("jit dropout: a resumed run continues the straight run's masks", "[jit][dropout]") {
  // save_optimizer() writes the step counter with the momentum buffers, so
  // 2 + 2 steps are the 4 straight ones byte for byte (resumed at another
  // world size, and data-parallel).
  DroppedLoss model;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("shardc-jit-dropout-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  for (bool dataParallel : {false, true}) {
    INFO("data-parallel " << dataParallel);
    const std::string straight = (dir / "straight.st").string(), half = (dir / "half.st").string(),
                      state = (dir / "state.st").string(), resumed = (dir / "resumed.st").string();
    CompiledModel a = jit(model, trainOptions(2, dataParallel));
    const std::vector<HostTensor> batch = a.example_inputs(5);
    for (int step = 0; step < 4; ++step) a.forward(batch);
    a.save(straight);
    CompiledModel b = jit(model, trainOptions(2, dataParallel));
    for (int step = 0; step < 2; ++step) b.forward(batch);
    b.save(half);
    b.save_optimizer(state);
    CHECK(fileBytes(state).find("rng.step") != std::string::npos);
    JitOptions resume = trainOptions(dataParallel ? 2 : 3, dataParallel);
    resume.optimizer.state_file = state;
    CompiledModel c = jit(model, resume);
    c.load(half);
    for (int step = 0; step < 2; ++step) c.forward(batch);
    c.save(resumed);
    CHECK(fileBytes(resumed) == fileBytes(straight));
  }
  std::filesystem::remove_all(dir);
}
