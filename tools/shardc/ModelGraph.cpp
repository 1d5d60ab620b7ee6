#include "tools/shardc/ModelGraph.h"

#include "compiler/Autodiff.h"

#include <iostream>

namespace shardc::cli {

compiler::Graph loadModelGraph(const std::string &path, int64_t maxBytes,
                               const std::string &gradLoss) {
  if (gradLoss.empty()) return compiler::loadGraph(path, maxBytes);
  compiler::JointGraph joint =
      compiler::withGradients(compiler::readGraphText(path, maxBytes), path, gradLoss);
  if (!joint.withoutGradient.empty()) {
    std::cerr << "shardc: note: " << joint.withoutGradient.size() << " parameter(s) do not affect "
              << gradLoss << " and get no gradient:";
    for (size_t i = 0; i < joint.withoutGradient.size() && i < 8; ++i)
      std::cerr << " " << joint.withoutGradient[i];
    std::cerr << (joint.withoutGradient.size() > 8 ? " ...\n" : "\n");
  }
  return compiler::parseGraph(joint.text, path);
}

}  // namespace shardc::cli
