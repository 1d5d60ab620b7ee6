// JitOptions::master_dtype (docs/jit.md, docs/graph-format.md "Master
// weights"): a model declared in bfloat16 is stored, initialized, trained
// and saved in float32 while forward and backward read it in bfloat16, as
// FSDP2's MixedPrecisionPolicy. Its parameters report float32, its
// gradients come back in float32, init draws the float32 model's bytes, and
// training gives the same bytes at every world size.
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

/// Two linear layers under a cross-entropy loss, in `dtype`.
struct Mlp : Model {
  explicit Mlp(DType dtype) {
    nn::LinearOptions options;
    options.dtype = dtype;
    fc1 = add<nn::Linear>("fc1", 8, 16, options);
    fc2 = add<nn::Linear>("fc2", 16, 5, options);
  }
  std::vector<Tensor> forward(const std::vector<Tensor> &in) override {
    return {cross_entropy((*fc2)(relu((*fc1)(in[0]))), in[1])};
  }
  std::shared_ptr<nn::Linear> fc1, fc2;
};

JitOptions mlpOptions(DType dtype, int64_t worldSize) {
  JitOptions options;
  options.world_size = worldSize;
  options.seed = 5;
  options.inputs = {{"x", {6, 8}, dtype}, {"target", {6}, DType::Int64, 5}};
  options.output_names = {"loss"};
  options.grad = "loss";
  return options;
}

std::string fileBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("jit master weights: float32 state, bfloat16 compute, float32 gradients",
          "[jit][grad]") {
  Mlp bf16(DType::BFloat16), f32(DType::Float32);
  JitOptions options = mlpOptions(DType::BFloat16, 1);
  options.master_dtype = "float32";
  CompiledModel master = jit(bf16, options);
  for (const ParameterInfo &p : master.parameters()) {
    INFO(p.name);
    CHECK(p.dtype == DType::Float32);
  }
  const std::vector<HostTensor> inputs = master.example_inputs(3);
  const std::vector<HostTensor> out = master.forward(inputs);
  REQUIRE(out.size() == 1 + master.parameters().size());
  CHECK(out[0].dtype == DType::BFloat16);  // the loss is computed in bfloat16
  for (size_t i = 1; i < out.size(); ++i) {
    INFO(out[i].name);
    CHECK(out[i].dtype == DType::Float32);
  }

  // Init draws the float32 model's values: the same checkpoint bytes.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("shardc-jit-master-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  CompiledModel plain = jit(f32, mlpOptions(DType::Float32, 1));
  plain.init();
  master.init();
  plain.save((dir / "f32.safetensors").string());
  master.save((dir / "master.safetensors").string());
  CHECK(fileBytes((dir / "f32.safetensors").string()) ==
        fileBytes((dir / "master.safetensors").string()));

  // Without master_dtype the bfloat16 model keeps bfloat16 state.
  CompiledModel bare = jit(bf16, mlpOptions(DType::BFloat16, 1));
  for (const ParameterInfo &p : bare.parameters()) CHECK(p.dtype == DType::BFloat16);

  // AdamW on float32 shards: the same bytes at N = 1 and 3.
  std::vector<std::string> saved;
  for (int64_t n : {1, 3}) {
    JitOptions train = mlpOptions(DType::BFloat16, n);
    train.master_dtype = "float32";
    train.optimizer.name = "adamw";
    train.optimizer.lr = 0.01;
    CompiledModel step = jit(bf16, train);
    for (uint64_t batch = 0; batch < 3; ++batch) step.forward(step.example_inputs(10 + batch));
    for (const RankMemory &r : step.memory_report().ranks)
      CHECK(r.forward_peak == r.forward_predicted_peak);
    const std::string path = (dir / ("adamw." + std::to_string(n) + ".safetensors")).string();
    step.save(path);
    saved.push_back(fileBytes(path));
  }
  CHECK(saved[0] == saved[1]);
  std::filesystem::remove_all(dir);

  options.master_dtype = "int64";
  CHECK_THROWS_WITH(jit(bf16, options),
                    Catch::Contains("master_dtype must be float32, float64 or empty, got 'int64'"));
}
