// What the pipeline tests share: compiling a graph to a Plan the way
// `shardc run` does, failing the test when it does not compile.
#pragma once

#include "compiler/Pipeline.h"

#include <catch2/catch.hpp>

#include <string>

namespace shardc::test {

inline plan::Plan compileForTest(const compiler::Graph &graph, int64_t worldSize,
                                 const compiler::ShardOptions &options = {}) {
  mlir::MLIRContext context;
  compiler::loadTcDialects(context);
  mlir::FailureOr<plan::Plan> plan = compiler::compileToPlan(graph, worldSize, context, options);
  REQUIRE(mlir::succeeded(plan));
  return std::move(*plan);
}

/// A graph of examples/ by name ("seed", "gpt2-tiny", ...).
inline compiler::Graph loadExample(const std::string &name) {
  return compiler::loadGraph(std::string(SHARDC_EXAMPLES_DIR) + "/" + name + ".json");
}

}  // namespace shardc::test
