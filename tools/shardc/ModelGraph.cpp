#include "tools/shardc/ModelGraph.h"

#include "compiler/Autodiff.h"
#include "compiler/FuseLinearCrossEntropy.h"
#include "compiler/MasterWeights.h"

#include <iostream>

namespace shardc::cli {

compiler::Graph loadModelGraph(const std::string &path, int64_t maxBytes,
                               const std::string &gradLoss, const std::string &masterDtype,
                               bool fuseLinearCrossEntropy, bool quiet) {
  if (gradLoss.empty() && fuseLinearCrossEntropy)  // a loss evaluated without its logits
    return compiler::parseGraph(
        compiler::fusedLossGraphText(compiler::readGraphText(path, maxBytes, masterDtype), path,
                                     "--fuse-linear-cross-entropy"),
        path);
  if (gradLoss.empty()) return compiler::loadGraph(path, maxBytes, masterDtype);
  compiler::JointGraph joint = compiler::withGradients(
      compiler::readGraphText(path, maxBytes, masterDtype), path, gradLoss, fuseLinearCrossEntropy);
  if (!quiet) noteWithoutGradient(gradLoss, joint.withoutGradient);
  return compiler::parseGraph(joint.text, path);
}

std::string masterDtypeOption(const ParsedArgs &parsed) {
  const std::string dtype = parsed.get("--master-dtype", "");
  if (parsed.has("--master-dtype") && !compiler::isMasterDtypeName(dtype))
    throw UsageError("--master-dtype must be float32 or float64, got '" + dtype + "'");
  return dtype;
}

void noteWithoutGradient(const std::string &loss, const std::vector<std::string> &params) {
  if (params.empty()) return;
  std::cerr << "shardc: note: " << params.size() << " parameter(s) do not affect " << loss
            << " and get no gradient:";
  for (size_t i = 0; i < params.size() && i < 8; ++i) std::cerr << " " << params[i];
  std::cerr << (params.size() > 8 ? " ...\n" : "\n");
}

}  // namespace shardc::cli
