//===- CheckpointLoad.cpp - init chains that load from a checkpoint ------===//
#include "compiler/CheckpointLoad.h"
#include "runtime/checkpoint/SafetensorsIndex.h"

#include <map>

namespace shardc::compiler {
using runtime::checkpoint::CheckpointError;

std::string renameTensor(const std::string &tensor, const std::vector<RenameRule> &rules) {
  for (const auto &[from, to] : rules)
    if (tensor.compare(0, from.size(), from) == 0)
      return to + tensor.substr(from.size());
  return tensor;
}

std::vector<std::string> applyCheckpointLoad(Graph &graph,
                                             const std::string &path,
                                             const std::vector<RenameRule> &rules) {
  auto checkpoint = runtime::checkpoint::Checkpoint::open(path);
  std::map<std::string, std::string> tensorOf; // parameter name -> tensor
  for (const std::string &tensor : checkpoint->tensorNames()) {
    std::string name = renameTensor(tensor, rules);
    auto [it, inserted] = tensorOf.emplace(name, tensor);
    if (!inserted)
      throw CheckpointError(checkpoint->path() + ": tensors '" + it->second + "' and '" +
                            tensor + "' both map to parameter '" + name +
                            "' (check the rename rules)");
  }
  std::vector<std::string> keptInit;
  for (GraphParam &param : graph.params) {
    InitStep &first = param.init.front();
    bool fileless = first.op == "load" && first.file.empty();
    if (fileless && first.tensor != param.name) {
      first.file = path; // an explicit "tensor" names the checkpoint's tensor as is
      continue;
    }
    auto found = tensorOf.find(param.name);
    if (found == tensorOf.end()) {
      if (fileless)
        throw CheckpointError(checkpoint->path() + ": tensor '" + first.tensor +
                              "': not in the checkpoint (parameter '" + param.name + "', " +
                              first.path + ", loads from --load)");
      // A non-persistent buffer is never in a checkpoint (torch's
      // state_dict leaves it out): keeping its init is no news.
      if (!param.isBuffer || param.persistent) keptInit.push_back(param.name);
      continue;
    }
    // A non-persistent buffer keeps its own file (the exporter's constant
    // data, which checkpoints never hold); a parameter or persistent buffer
    // that loads its own file (an exporter constant such as ConViT's
    // positional projection) takes the checkpoint's trained values.
    if (first.op == "load" && !first.file.empty() && param.isBuffer && !param.persistent)
      continue;
    if (fileless) {
      first.file = path;
      // An explicit "tensor" names the checkpoint's tensor as is.
      if (first.tensor == param.name)
        first.tensor = found->second;
      continue;
    }
    InitStep load;
    load.op = "load";
    load.kind = InitStepKind::Generator;
    load.shape = param.shape;
    load.file = path;
    load.tensor = found->second;
    load.path = param.path + ".init";
    param.init = {load};
  }
  return keptInit;
}

} // namespace shardc::compiler
