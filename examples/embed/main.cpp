// examples/embed: a GPT defined in C++, traced once, initialized and run
// sharded over N local ranks (docs/jit.md).
//
//   app [--world-size N] [--seed S] [--outputs FILE] [--inputs-out FILE]
//       [--graph-out FILE] [--save FILE] [--load CKPT] [--inputs FILE]
//
// --load replaces the initialized values by a checkpoint's (each rank reads
// its own rows); --inputs reads forward's inputs instead of generating them.
#include "gpt.h"

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <string>

int main(int argc, char **argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i + 1 < argc; i += 2)
    args[argv[i]] = argv[i + 1];
  auto get = [&](const std::string &key, const std::string &fallback) {
    auto it = args.find(key);
    return it == args.end() ? fallback : it->second;
  };
  try {
    // Parameters remember the device they were meant for (cuda:0), whatever
    // runs them; nothing is allocated while the model is built.
    shardc::DeviceGuard device("cuda:0");
    gpt::GPT model;

    shardc::JitOptions options;
    options.name = "gpt2-tiny";
    options.world_size = std::stoll(get("--world-size", "1"));
    options.seed = std::stoull(get("--seed", "0"));
    options.inputs = model.inputs(/*batch=*/2, /*T=*/8);
    options.output_names = {"logits"};
    shardc::CompiledModel compiled = shardc::jit(model, options);

    std::vector<shardc::HostTensor> inputs =
        args.count("--inputs") ? shardc::load_tensors(args["--inputs"])
                               : compiled.example_inputs(options.seed);
    if (args.count("--load")) {
      std::vector<std::string> kept = compiled.load(args["--load"]);
      std::cout << "loaded " << args["--load"] << "; " << kept.size()
                << " parameter(s) keep their init\n";
    }
    // The shards stay resident: a second forward would reuse them.
    std::vector<shardc::HostTensor> outputs = compiled.forward(inputs);

    if (args.count("--outputs"))
      shardc::save_tensors(args["--outputs"], outputs);
    if (args.count("--inputs-out"))
      shardc::save_tensors(args["--inputs-out"], inputs);
    if (args.count("--save"))
      compiled.save(args["--save"]);
    if (args.count("--graph-out")) {
      std::ofstream file(args["--graph-out"]);
      file << compiled.graph_json();
    }
    const shardc::HostTensor shard = compiled.shard("transformer.wte.weight", 0);
    std::cout << "world size " << compiled.world_size() << ": rank 0 holds "
              << shardc::shape_string(shard.shape) << " of transformer.wte.weight "
              << "(full [" << model.config.vocab << ", " << model.config.dim << "])\n"
              << compiled.memory_report().to_string();
    return 0;
  } catch (const shardc::Error &error) {
    std::cerr << "app: error: " << error.what() << "\n";
    return 1;
  }
}
