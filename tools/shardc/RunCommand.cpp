//===- RunCommand.cpp - shardc run ----------------------------------------===//
#include "compiler/Pipeline.h"
#include "runtime/LocalRun.h"
#include "runtime/PlanQueries.h"
#include "runtime/RuntimeError.h"
#include "runtime/Safetensors.h"
#include "tools/shardc/CommandLine.h"
#include "tools/shardc/Commands.h"
#include "tools/shardc/Diagnostics.h"
#include "tools/shardc/MpiRunCommand.h"
#include "tools/shardc/RunReport.h"

#include <algorithm>
#include <iostream>
#include <set>
#include <unistd.h>
#include <limits>
#include <sstream>

namespace shardc::cli {

const char *const kRunUsage =
    "usage: shardc run MODEL.json [--world-size N] [--seed S]\n"
    "                  [--inputs FILE.safetensors] [--outputs FILE.safetensors]\n"
    "                  [--save-params FILE.safetensors] [--report text|json]\n"
    "                  [--timeout SECONDS] [--units REGEX]... [--prefetch]\n"
    "                  [--backend local|mpi]\n"
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
    "  --backend local|mpi  ranks as threads of this process (default), or\n"
    "                     one rank per MPI process: mpirun -np N shardc run\n"
    "                     MODEL.json --backend mpi (docs/mpi.md)\n"
    "  --units, --prefetch, --max-graph-mib  as for `shardc compile`\n";

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

/// Local ranks share this machine's memory. A plan that cannot fit is
/// refused before anything is allocated, with what it would need: a
/// 10^12-element parameter is planned fine, and refused here only if the
/// shards do not fit.
void checkFitsInMemory(const plan::Plan &plan) {
  int64_t pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || pageSize <= 0)
    return;
  int64_t physical = pages * pageSize;
  std::set<int64_t> special = runtime::ranksWithOwnWork(plan);
  int64_t total = 0, largest = 0;
  int64_t common = -1;
  for (int64_t rank = 0; rank < plan.worldSize; ++rank) {
    int64_t peak;
    if (special.count(rank)) {
      peak = runtime::predictedPeakBytes(plan, rank);
    } else {
      if (common < 0)
        common = runtime::predictedPeakBytes(plan, rank);
      peak = common;
    }
    total += peak;
    largest = std::max(largest, peak);
  }
  if (total > physical)
    throw runtime::RuntimeError(
        "the plan needs up to " + std::to_string(largest) +
        " bytes per rank, " + std::to_string(total) + " bytes for " +
        std::to_string(plan.worldSize) + " local rank(s), but this machine has " +
        std::to_string(physical) +
        " bytes of memory; shard over more ranks (processes with --backend "
        "mpi, or machines)");
}

} // namespace

int runCommand(const std::vector<std::string> &args) {
  ParsedArgs parsed;
  int64_t worldSize = 1;
  int64_t maxGraphBytes = compiler::kDefaultMaxGraphBytes;
  uint64_t seed = 0;
  std::string reportFormat, backend = "local";
  double timeoutSeconds = 60;
  try {
    parsed = parseArgs(args, {{"--world-size", "--seed", "--inputs", "--outputs",
                               "--save-params", "--report", "--timeout", "--units", "--max-graph-mib",
                               "--backend"},
                              {"--help", "-h", "--prefetch"}});
    if (parsed.has("--help") || parsed.has("-h")) {
      std::cout << kRunUsage;
      return kSuccess;
    }
    if (parsed.positional.size() != 1)
      throw UsageError("expected exactly one MODEL.json");
    // Local ranks are threads: more than a few thousand is a mistake.
    maxGraphBytes = parsed.getInt("--max-graph-mib", 256, 1, 1 << 20) << 20;
    worldSize = parsed.getInt("--world-size", 1, 1, 4096);
    seed = static_cast<uint64_t>(parsed.getInt(
        "--seed", 0, 0, std::numeric_limits<int64_t>::max()));
    timeoutSeconds = static_cast<double>(parsed.getInt("--timeout", 60, 1, 86400));
    reportFormat = parsed.get("--report", "text");
    if (reportFormat != "text" && reportFormat != "json")
      throw UsageError("--report must be text or json, got '" + reportFormat + "'");
    backend = parsed.get("--backend", "local");
    if (backend != "local" && backend != "mpi")
      throw UsageError("--backend must be local or mpi, got '" + backend + "'");
    if (backend == "mpi" && !mpiBackendAvailable())
      throw UsageError("--backend mpi: this shardc was built without MPI (install "
                       "libopenmpi-dev and reconfigure)");
    if (backend == "mpi") {
      // One rank per process: the world is MPI's (docs/mpi.md).
      int64_t processes = mpiInitialize();
      if (parsed.has("--world-size") && worldSize != processes)
        throw UsageError("--world-size " + std::to_string(worldSize) + " disagrees with the " +
                         std::to_string(processes) +
                         " MPI processes (leave it out with --backend mpi)");
      worldSize = processes;
    }
  } catch (const UsageError &error) {
    std::cerr << "shardc run: error: " << error.what() << "\n\n" << kRunUsage;
    return kBadInput;
  }

  const std::string &model = parsed.positional[0];
  plan::Plan plan;
  runtime::RunOptions options;
  try {
    compiler::Graph graph = compiler::loadGraph(
        model, maxGraphBytes);
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

  if (backend == "mpi")
    return runMpiBackend(parsed, model, seed, timeoutSeconds, reportFormat, plan, options);
  try {
    checkFitsInMemory(plan);
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
