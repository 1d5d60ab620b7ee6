//===- CheckpointOptions.cpp - shardc run --load / --rename ---------------===//
#include "tools/shardc/CheckpointOptions.h"
#include "tools/shardc/CommandLine.h"

namespace shardc::cli {
RenameRule parseRenameRule(const std::string &text) {
  auto equals = text.find('=');
  if (equals == std::string::npos)
    throw UsageError("--rename takes OLD=NEW (a checkpoint name prefix and the "
                     "parameter name prefix it becomes), got '" + text + "'");
  return {text.substr(0, equals), text.substr(equals + 1)};
}

void requireLoadFiles(const compiler::Graph &graph) {
  for (const compiler::GraphParam &param : graph.params)
    for (const compiler::InitStep &step : param.init)
      if (step.op == "load" && step.file.empty())
        throw compiler::GraphError(graph.sourceName + ": " + step.path +
                                   ": load has no \"file\"; give one or run with "
                                   "--load CKPT");
}

} // namespace shardc::cli
