//===- RunCommand.cpp - shardc run ----------------------------------------===//
#include "compiler/Pipeline.h"
#include "runtime/LocalRun.h"
#include "runtime/RuntimeError.h"
#include "runtime/Safetensors.h"
#include "tools/shardc/CommandLine.h"
#include "tools/shardc/Commands.h"
#include "tools/shardc/Diagnostics.h"
#include "tools/shardc/RunReport.h"

#include <iostream>
#include <limits>
#include <sstream>

namespace shardc::cli {

const char *const kRunUsage =
    "usage: shardc run MODEL.json [--world-size N] [--seed S]\n"
    "                  [--inputs FILE.safetensors] [--outputs FILE.safetensors]\n"
    "                  [--save-params FILE.safetensors] [--report text|json]\n"
    "                  [--timeout SECONDS] [--units REGEX]... [--prefetch]\n"
    "\n"
    "Compiles the graph for N ranks and runs init, then forward, on N local\n"
    "ranks (threads of this process), then reports per-rank memory.\n"
    "  --world-size N     ranks (default 1)\n"
    "  --seed S           seed of every random init op and of generated\n"
    "                     inputs (default 0; docs/rng.md)\n"
    "  --inputs FILE      forward inputs by name; without it, deterministic\n"
    "                     inputs are made from the seed (docs/cli.md)\n"
    "  --outputs FILE     write the forward outputs\n"
    "  --save-params FILE write the full parameters (gathered once after\n"
    "                     forward, outside the measured window)\n"
    "  --report text|json the memory report format (default text)\n"
    "  --timeout SECONDS  how long a rank waits in a collective (default 60)\n"
    "  --units, --prefetch  FSDP units and prefetch, as for `shardc compile`\n";

namespace {

/// Bad inputs are the user's mistake (exit 2), so they are checked before
/// the run rather than discovered inside it.
void checkInputs(const plan::Plan &plan, const std::vector<runtime::HostTensor> &inputs,
                 const std::string &file) {
  const plan::Function *forward = plan.function("forward");
  if (!forward)
    return;
  for (int32_t id : forward->inputs) {
    const plan::Buffer &buffer = forward->buffers[id];
    const runtime::HostTensor *match = nullptr;
    for (const runtime::HostTensor &tensor : inputs)
      if (tensor.name == buffer.name)
        match = &tensor;
    if (!match)
      throw compiler::GraphError(file + ": no tensor named '" + buffer.name +
                                 "' for the forward input of that name");
    auto shapeText = [](const std::vector<int64_t> &shape) {
      std::ostringstream out;
      out << "[";
      for (size_t i = 0; i < shape.size(); ++i)
        out << (i ? ", " : "") << shape[i];
      return out.str() + "]";
    };
    if (match->dtype != buffer.dtype || match->shape != buffer.shape)
      throw compiler::GraphError(
          file + ": tensor '" + buffer.name + "' is " +
          plan::dtypeName(match->dtype) + " " + shapeText(match->shape) +
          ", but the model's input is " + plan::dtypeName(buffer.dtype) + " " +
          shapeText(buffer.shape));
  }
}

} // namespace

int runCommand(const std::vector<std::string> &args) {
  ParsedArgs parsed;
  int64_t worldSize = 1;
  uint64_t seed = 0;
  std::string reportFormat;
  double timeoutSeconds = 60;
  try {
    parsed = parseArgs(args, {{"--world-size", "--seed", "--inputs", "--outputs",
                               "--save-params", "--report", "--timeout", "--units"},
                              {"--help", "-h", "--prefetch"}});
    if (parsed.has("--help") || parsed.has("-h")) {
      std::cout << kRunUsage;
      return kSuccess;
    }
    if (parsed.positional.size() != 1)
      throw UsageError("expected exactly one MODEL.json");
    // Local ranks are threads: more than a few thousand is a mistake.
    worldSize = parsed.getInt("--world-size", 1, 1, 4096);
    seed = static_cast<uint64_t>(parsed.getInt(
        "--seed", 0, 0, std::numeric_limits<int64_t>::max()));
    timeoutSeconds = static_cast<double>(parsed.getInt("--timeout", 60, 1, 86400));
    reportFormat = parsed.get("--report", "text");
    if (reportFormat != "text" && reportFormat != "json")
      throw UsageError("--report must be text or json, got '" + reportFormat + "'");
  } catch (const UsageError &error) {
    std::cerr << "shardc run: error: " << error.what() << "\n\n" << kRunUsage;
    return kBadInput;
  }

  const std::string &model = parsed.positional[0];
  plan::Plan plan;
  runtime::RunOptions options;
  try {
    compiler::Graph graph = compiler::loadGraph(model);
    mlir::MLIRContext context;
    compiler::loadTcDialects(context);
    CliDiagnosticHandler diagnostics(&context);
    compiler::ShardOptions shardOptions;
    shardOptions.unitPatterns = parsed.all("--units");
    shardOptions.prefetch = parsed.has("--prefetch");
    mlir::FailureOr<plan::Plan> compiled =
        compiler::compileToPlan(graph, worldSize, context, shardOptions);
    if (mlir::failed(compiled))
      return kBadInput;
    plan = std::move(*compiled);
    if (parsed.has("--inputs")) {
      std::string file = parsed.get("--inputs", "");
      options.inputs = runtime::readSafetensors(file).tensors;
      checkInputs(plan, options.inputs, file);
    } else {
      // Token ids must index the vocabulary: the graph bounds them.
      std::map<std::string, int64_t> bounds;
      for (const compiler::GraphInput &input : graph.inputs)
        if (input.high > 0)
          bounds[input.name] = input.high;
      options.inputs = runtime::makeDeterministicInputs(plan, seed, bounds);
    }
  } catch (const compiler::GraphError &error) {
    std::cerr << "shardc: error: " << error.what() << "\n";
    return kBadInput;
  } catch (const runtime::RuntimeError &error) {
    // An unreadable or malformed --inputs file.
    std::cerr << "shardc: error: " << error.what() << "\n";
    return kBadInput;
  }

  try {
    options.gatherParams = parsed.has("--save-params");
    options.seed = seed;
    options.timeout = std::chrono::duration<double>(timeoutSeconds);
    runtime::RunResult result = runtime::runLocal(plan, options);
    if (parsed.has("--outputs"))
      runtime::writeSafetensors(parsed.get("--outputs", ""), result.outputs);
    if (parsed.has("--save-params"))
      runtime::writeSafetensors(parsed.get("--save-params", ""), result.params);
    RunSummary summary{model, seed, &plan, &result};
    std::cout << (reportFormat == "json" ? formatJsonReport(summary)
                                         : formatTextReport(summary));
    return kSuccess;
  } catch (const runtime::RuntimeError &error) {
    std::cerr << "shardc: error: " << error.what() << "\n";
    return kRuntimeFailure;
  }
}

} // namespace shardc::cli
