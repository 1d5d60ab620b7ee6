#include "tools/shardc/ModelGraph.h"

#include "compiler/Autodiff.h"

#include <iostream>

namespace shardc::cli {

compiler::Graph loadModelGraph(const std::string &path, int64_t maxBytes,
                               const std::string &gradLoss) {
  if (gradLoss.empty()) return compiler::loadGraph(path, maxBytes);
  compiler::JointGraph joint =
      compiler::withGradients(compiler::readGraphText(path, maxBytes), path, gradLoss);
  noteWithoutGradient(gradLoss, joint.withoutGradient);
  return compiler::parseGraph(joint.text, path);
}

void noteWithoutGradient(const std::string &loss, const std::vector<std::string> &params) {
  if (params.empty()) return;
  std::cerr << "shardc: note: " << params.size() << " parameter(s) do not affect " << loss
            << " and get no gradient:";
  for (size_t i = 0; i < params.size() && i < 8; ++i) std::cerr << " " << params[i];
  std::cerr << (params.size() > 8 ? " ...\n" : "\n");
}

}  // namespace shardc::cli
