//===- RunCommand.cpp - shardc run ----------------------------------------===//
#include "compiler/DataParallel.h"
#include "compiler/Pipeline.h"
#include "runtime/DataParallel.h"
#include "runtime/DeterministicInput.h"
#include "runtime/DeviceName.h"
#include "runtime/Executor.h"
#include "runtime/LocalRun.h"
#include "runtime/PlanQueries.h"
#include "runtime/RankSubset.h"
#include "runtime/RuntimeError.h"
#include "runtime/Safetensors.h"
#include "tools/shardc/CommandLine.h"
#include "tools/shardc/Commands.h"
#include "tools/shardc/CudaRanks.h"
#include "tools/shardc/Diagnostics.h"
#include "tools/shardc/TrainOptions.h"
#include "tools/shardc/ModelGraph.h"
#include "tools/shardc/MpiRunCommand.h"
#include "tools/shardc/CheckpointOptions.h"
#include "runtime/checkpoint/LoadPlan.h"
#include "runtime/checkpoint/ShardReader.h"
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
    "                  [--load CKPT [--rename OLD=NEW]...] [--save FILE.safetensors]\n"
    "                  [--io-buffer-mib N] [--init-only] [--ranks LIST]\n"
    "                  [--threads T] [--device cpu|cuda[:N]] [--repeat R] [--profile]\n"
    "                  [--grad LOSS [--optimizer sgd|adamw --lr LR ... [--steps K]]]\n"
    "\n"
    "Compiles the graph for N ranks and runs init, then forward, on N local\n"
    "ranks (threads of this process), then reports per-rank memory.\n"
    "  --world-size N     ranks (default 1)\n"
    "  --seed S           seed of every random init op and of generated\n"
    "                     inputs (default 0; docs/rng.md)\n"
    "  --inputs FILE      forward inputs by name; without it, deterministic\n"
    "                     inputs are made from the seed (docs/cli.md);\n"
    "                     repeatable with --optimizer: step k takes the k-th\n"
    "                     file's batch (cycling)\n"
    "  --outputs FILE     write the forward outputs\n"
    "  --data-parallel    the inputs are the global batch: split along dim 0\n"
    "                     over the ranks, each rank computes its own rows;\n"
    "                     --outputs holds them concatenated in rank order\n"
    "                     (a 0-d output such as a mean loss: the ranks'\n"
    "                     shares summed); with --grad and --optimizer, a\n"
    "                     data-parallel training step (docs/training.md)\n"
    "  --batch-dim NAME=D with --data-parallel: input NAME holds the batch in\n"
    "                     dim D (sequence-first [S, B, E]: D = 1; repeatable)\n"
    "  --load CKPT        initialize every parameter found in the checkpoint\n"
    "                     (a .safetensors file, an index .json or a directory)\n"
    "                     from it; each rank reads only its rows\n"
    "  --rename OLD=NEW   checkpoint tensor name prefix OLD is parameter name\n"
    "                     prefix NEW (repeatable; first match wins)\n"
    "  --save FILE        write every parameter into one safetensors file, each\n"
    "                     rank its own rows (nothing gathered; docs/checkpoints.md)\n"
    "  --io-buffer-mib N  the bounded buffer loads convert dtypes through (64)\n"
    "  --save-params FILE the same as --save (kept for compatibility)\n"
    "  --report text|json the memory report format (default text)\n"
    "  --timeout SECONDS  how long a rank waits in a collective (default 60)\n"
    "  --backend local|mpi  ranks as threads of this process (default), or\n"
    "                     one rank per MPI process: mpirun -np N shardc run\n"
    "                     MODEL.json --backend mpi (docs/mpi.md)\n"
    "  --init-only        run init only (no forward, no inputs or outputs)\n"
    "  --ranks LIST       run only these ranks of the N-rank plan: 0, 0-3,\n"
    "                     0,17,63 (needs --init-only; local backend); with\n"
    "                     --save the file holds only their rows (docs/cli.md)\n"
    "  --threads T        kernel threads per rank (default: cores / ranks run);\n"
    "                     with --device cuda, each rank's threads for the ops\n"
    "                     it runs on the host (orthogonal init)\n"
    "  --repeat R         after the measured forward, run it R more times on\n"
    "                     the same inputs (warm: the loop's steady state); the\n"
    "                     report gives each repeat's seconds; every repeat's\n"
    "                     outputs must equal the first's (local backend)\n"
    "  --profile          time every op of the forwards; the report gives each\n"
    "                     op kind's calls and seconds per forward (rank 0 in\n"
    "                     text, every rank in json; local backend)\n"
    "  --device cpu|cuda[:N]  where the ranks' memory and kernels are (default\n"
    "                     cpu); cuda: every rank a thread on GPU 0 (cuda:N on\n"
    "                     GPU N); with --backend mpi one GPU per process over\n"
    "                     NCCL (docs/gpu.md)\n"
    "  --units, --prefetch, --max-graph-mib, --grad  as for `shardc compile`\n"
    "  --optimizer sgd|adamw  end forward with an optimizer step (needs --grad):\n"
    "                     each gradient, reduced into its parameter's shard\n"
    "                     (the mean over ranks; with --data-parallel the sum\n"
    "                     of their shares), updates the rows this rank\n"
    "                     stores with torch.optim's formulas; the gradients\n"
    "                     are not outputs (docs/training.md)\n"
    "  --lr LR            learning rate (required with --optimizer)\n"
    "  --momentum M       SGD momentum (default 0)\n"
    "  --weight-decay W   default: SGD 0, AdamW 0.01 (decoupled)\n"
    "  --betas B1,B2      AdamW betas (default 0.9,0.999)\n"
    "  --eps E            AdamW eps (default 1e-8)\n"
    "  --warmup-steps W, --decay-steps D, --min-lr M  the learning-rate\n"
    "                     schedule: lr * k / W at step k <= W, then a cosine\n"
    "                     decay to M over D steps (default: lr throughout)\n"
    "  --clip-grad-norm C clip the gradients to global L2 norm C before the\n"
    "                     update (torch.nn.utils.clip_grad_norm_); the norm\n"
    "                     is exact, the same at every world size\n"
    "  --steps K          training steps (default 1), on the same inputs or\n"
    "                     the repeated --inputs' batches in turn; prints each\n"
    "                     step's 0-d outputs (the loss);\n"
    "                     --save writes the trained parameters, --outputs the\n"
    "                     last step's outputs\n"
    "  --save-optimizer FILE  after the last step, the optimizer's state\n"
    "                     (moments, momentum buffers, step count), each rank\n"
    "                     its rows (local backend)\n"
    "  --load-optimizer FILE  resume: start from that state, not zeros (with\n"
    "                     --load of the saved parameters; any world size)\n";

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

/// An input the graph is specialised on (its recorded "value": forward's
/// Python control flow read it at export) runs with those values only:
/// generated inputs get them, and --inputs must hold them, else exit 2
/// naming the input and the source line that read it.
void applySpecializedInputs(const compiler::Graph &graph,
                            std::vector<runtime::HostTensor> &inputs, bool given,
                            const std::string &file) {
  for (const compiler::GraphInput &input : graph.inputs) {
    if (input.value.empty())
      continue;
    for (runtime::HostTensor &tensor : inputs) {
      if (tensor.name != input.name)
        continue;
      bool same = tensor.dtype == plan::DType::I64 &&
                  tensor.numElements() == static_cast<int64_t>(input.value.size()) &&
                  static_cast<int64_t>(tensor.data.size()) == tensor.expectedBytes();
      if (!given && same) {
        std::copy(input.value.begin(), input.value.end(), tensor.as<int64_t>());
        continue;
      }
      for (size_t k = 0; same && k < input.value.size(); ++k)
        same = tensor.as<int64_t>()[k] == input.value[k];
      if (same)
        continue;
      std::ostringstream recorded;
      for (size_t k = 0; k < input.value.size() && k < 16; ++k)
        recorded << (k ? ", " : "") << input.value[k];
      if (input.value.size() > 16)
        recorded << ", ...";
      throw compiler::GraphError(
          file + ": input '" + input.name + "' differs from the values [" + recorded.str() +
          "] the graph was specialised on (forward's Python control flow read them at " +
          (input.valueReadAt.empty() ? std::string("export") : input.valueReadAt) +
          "); re-export with these values as the example");
    }
  }
}

/// Local ranks share one memory: this machine's, or with --device cuda the
/// GPU's (`capacity` bytes, `where` naming it). A plan that cannot fit is
/// refused before anything is allocated, with what it would need: a
/// 10^12-element parameter is planned fine, and refused here only if the
/// shards do not fit.
void checkFitsInMemory(const plan::Plan &fullPlan, const std::vector<int64_t> &ranks,
                       int64_t capacity, const std::string &where) {
  // A --ranks run: only those ranks, each doing absent owners' work.
  const bool subset = static_cast<int64_t>(ranks.size()) < fullPlan.worldSize;
  const plan::Plan subsetPlan = subset ? runtime::planForRanks(fullPlan, ranks) : plan::Plan{};
  const plan::Plan &plan = subset ? subsetPlan : fullPlan;
  if (capacity <= 0)
    return;
  std::set<int64_t> special = runtime::ranksWithOwnWork(plan);
  int64_t total = 0, largest = 0;
  int64_t common = -1;
  for (int64_t rank : ranks) {
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
  if (total > capacity)
    throw runtime::RuntimeError(
        "the plan needs up to " + std::to_string(largest) +
        " bytes per rank, " + std::to_string(total) + " bytes for " +
        std::to_string(ranks.size()) + " local rank(s), but " + where + " has " +
        std::to_string(capacity) +
        " bytes of memory; shard over more ranks (processes with --backend "
        "mpi, or machines)");
}

/// This machine's physical memory in bytes (0 when the OS cannot say).
int64_t physicalMemoryBytes() {
  const int64_t pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && pageSize > 0 ? pages * pageSize : 0;
}

/// The global batch of a data-parallel run: the rows of the --inputs
/// tensor named like the graph's first input, else the graph's own batch.
int64_t globalBatchRows(const compiler::Graph &graph,
                        const std::vector<runtime::HostTensor> &inputs, const std::string &file) {
  int64_t rows = compiler::graphBatchRows(graph);
  for (const runtime::HostTensor &tensor : inputs)
    if (tensor.name == graph.inputs[0].name) {
      if (tensor.shape.empty() || tensor.shape[0] < 1)
        throw compiler::GraphError(file + ": tensor '" + tensor.name +
                                   "' has no rows in dim 0 (the global batch)");
      rows = tensor.shape[0];
    }
  return rows;
}

using BatchDims = compiler::BatchDims;

/// An --inputs file's tensors, those named in `batchDims` (--batch-dim, with
/// --data-parallel) with their batch moved to dim 0.
std::vector<runtime::HostTensor> readBatchFile(const std::string &file,
                                               const BatchDims &batchDims) {
  std::vector<runtime::HostTensor> tensors = runtime::readSafetensors(file).tensors;
  for (runtime::HostTensor &tensor : tensors)
    if (auto dim = batchDims.find(tensor.name); dim != batchDims.end()) {
      const int64_t rank = static_cast<int64_t>(tensor.shape.size());
      const int64_t d = dim->second < 0 ? dim->second + rank : dim->second;
      if (d < 0 || d >= rank)
        throw compiler::GraphError(file + ": tensor '" + tensor.name + "' " +
                                   runtime::shapeToString(tensor.shape) + " has no dim " +
                                   std::to_string(dim->second) + " (--batch-dim)");
      if (d != 0) tensor = runtime::moveBatchDim(tensor, d, true);
    }
  return tensors;
}

/// Checks an --inputs file against the plan before any rank runs: the
/// forward's inputs, or with `dataParallel` a global batch it splits.
void checkBatch(const plan::Plan &plan, const std::vector<runtime::HostTensor> &tensors,
                const std::string &file, bool dataParallel) {
  if (!dataParallel) return checkInputs(plan, tensors, file);
  try {
    runtime::rankForward(plan, runtime::matchGlobalInputs(plan, tensors), 0);
  } catch (const runtime::RuntimeError &error) {
    throw compiler::GraphError(file + ": " + error.what());
  }
}

/// --load: every parameter the checkpoint holds is read from it (a note
/// lists those that keep their own init); without it, the files the
/// graph's own load ops name must exist.
void prepareParamInits(compiler::Graph &graph, const std::string &load,
                       const std::vector<RenameRule> &renames) {
  if (load.empty()) return requireLoadFiles(graph);
  std::vector<std::string> kept = applyCheckpointLoad(graph, load, renames);
  const size_t saved = static_cast<size_t>(
      std::count_if(graph.params.begin(), graph.params.end(),
                    [](const compiler::GraphParam &p) { return !p.isBuffer || p.persistent; }));
  if (saved > 0 && kept.size() == saved)
    throw runtime::checkpoint::CheckpointError(
        load + ": none of the model's " + std::to_string(saved) +
        " parameter(s) is in the checkpoint (check the names, or --rename)");
  if (!kept.empty()) {
    std::cerr << "shardc: note: " << kept.size()
              << " parameter(s) not in the checkpoint keep their own init:";
    for (size_t i = 0; i < kept.size() && i < 8; ++i) std::cerr << " " << kept[i];
    std::cerr << (kept.size() > 8 ? " ...\n" : "\n");
  }
}

} // namespace

int runCommand(const std::vector<std::string> &args) {
  ParsedArgs parsed;
  int64_t worldSize = 1;
  int64_t maxGraphBytes = compiler::kDefaultMaxGraphBytes;
  uint64_t seed = 0;
  std::string reportFormat, backend = "local";
  int64_t ioBufferBytes = runtime::checkpoint::kDefaultIoBufferBytes;
  std::vector<RenameRule> renames;
  double timeoutSeconds = 60;
  std::vector<int64_t> ranks;  // the ranks to run: every one unless --ranks
  int threads = 0;             // kernel threads per rank; 0 = the default
  bool initOnly = false;        // --init-only: no forward
  int repeats = 0;              // --repeat: warm forwards after the measured one
  std::string device = "cpu";   // --device
  compiler::BatchDims inputBatchDims, outputBatchDims;  // --batch-dim; outputs' from forward
  std::optional<compiler::OptimizerOptions> optimizer;  // --optimizer: a training step
  int steps = 1;                                        // --steps
  try {
    parsed = parseArgs(
        args, {{"--world-size",    "--seed",          "--inputs",    "--outputs",
                "--save-params",   "--report",        "--timeout",   "--units",
                "--max-graph-mib", "--backend",       "--load",      "--rename",
                "--save",          "--io-buffer-mib", "--ranks",     "--threads",
                "--device",        "--repeat",        "--batch-dim", "--grad",
                "--steps",         "--optimizer",     "--lr",        "--momentum",
                "--weight-decay",  "--betas",         "--eps",       "--load-optimizer",
                "--warmup-steps",  "--decay-steps",   "--min-lr",    "--save-optimizer",
                "--clip-grad-norm"},
               {"--help", "-h", "--prefetch", "--init-only", "--data-parallel", "--profile"}});
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
    ioBufferBytes = parsed.getInt("--io-buffer-mib", 64, 1, 1 << 20) << 20;
    threads = static_cast<int>(parsed.getInt("--threads", 0, 1, 1024));
    initOnly = parsed.has("--init-only");
    repeats = static_cast<int>(parsed.getInt("--repeat", 0, 0, 100000));
    for (const char *option : {"--repeat", "--profile"})
      if (parsed.has(option) && (initOnly || parsed.get("--backend", "local") != "local"))
        throw UsageError(std::string(option) +
                         (initOnly ? " is about forward, which --init-only does not run"
                                   : " is for the local backend"));
    for (const std::string &rule : parsed.all("--rename"))
      renames.push_back(parseRenameRule(rule));
    if (!renames.empty() && !parsed.has("--load"))
      throw UsageError("--rename needs --load");
    if (parsed.has("--save") && parsed.has("--save-params"))
      throw UsageError("--save and --save-params are the same option; give one");
    reportFormat = parsed.get("--report", "text");
    if (reportFormat != "text" && reportFormat != "json")
      throw UsageError("--report must be text or json, got '" + reportFormat + "'");
    backend = parsed.get("--backend", "local");
    if (backend != "local" && backend != "mpi")
      throw UsageError("--backend must be local or mpi, got '" + backend + "'");
    if (backend == "mpi" && (initOnly || parsed.has("--ranks") || parsed.has("--threads")))
      throw UsageError("--init-only, --ranks and --threads are for the local backend");
    if (backend == "mpi" && !mpiBackendAvailable())
      throw UsageError("--backend mpi: this shardc was built without MPI (install "
                       "libopenmpi-dev and reconfigure)");
    if (initOnly && (parsed.has("--inputs") || parsed.has("--outputs") ||
                     parsed.has("--data-parallel")))
      throw UsageError(std::string(parsed.has("--inputs")    ? "--inputs"
                                   : parsed.has("--outputs") ? "--outputs"
                                                             : "--data-parallel") +
                       " needs forward, which --init-only does not run");
    if (parsed.has("--grad") && initOnly)
      throw UsageError("--grad needs the forward; leave out --init-only");
    optimizer = parseOptimizerOptions(parsed);
    if (parsed.has("--grad") && parsed.has("--data-parallel") && !optimizer)
      throw UsageError("--grad with --data-parallel is a data-parallel training step: give "
                       "--optimizer (its gradients exist only summed into each rank's "
                       "shards; without --data-parallel, --grad returns them whole)");
    steps = static_cast<int>(parsed.getInt("--steps", 1, 1, 1000000));
    if (parsed.has("--steps") && !optimizer)
      throw UsageError("--steps counts optimizer steps; give --optimizer");
    if (optimizer && parsed.has("--repeat"))
      throw UsageError("--repeat reruns one forward unchanged; a training run takes --steps");
    if (parsed.has("--save-optimizer") && !optimizer)
      throw UsageError("--save-optimizer writes the optimizer's state; give --optimizer");
    if (parsed.has("--save-optimizer") && parsed.get("--backend", "local") != "local")
      throw UsageError("--save-optimizer is for the local backend");
    if (parsed.all("--inputs").size() > 1 && !optimizer)
      throw UsageError("several --inputs are the batches of training steps (step k takes the "
                       "k-th, cycling); give --optimizer");
    if (optimizer && static_cast<size_t>(steps) < parsed.all("--inputs").size())
      throw UsageError("--steps " + std::to_string(steps) + " would leave some of the " +
                       std::to_string(parsed.all("--inputs").size()) +
                       " --inputs batches unused; give --steps " +
                       std::to_string(parsed.all("--inputs").size()) + " or more");
    if (parsed.has("--batch-dim") && !parsed.has("--data-parallel"))
      throw UsageError("--batch-dim says where --data-parallel finds the batch; give "
                       "--data-parallel too");
    for (const std::string &spec : parsed.all("--batch-dim")) {
      const size_t eq = spec.find('=');
      int64_t dim = 0;
      size_t used = 0;
      try {
        if (eq != std::string::npos) dim = std::stoll(spec.substr(eq + 1), &used);
      } catch (const std::exception &) {
        used = 0;
      }
      if (eq == std::string::npos || eq == 0 || used == 0 || eq + 1 + used != spec.size())
        throw UsageError("--batch-dim takes NAME=DIM (an input's name and its batch dim), got '" +
                         spec + "'");
      inputBatchDims[spec.substr(0, eq)] = dim;
    }
    device = parsed.get("--device", "cpu");
    if (device != "cpu" && !runtime::cudaOrdinalOf(device))
      throw UsageError("--device must be cpu, cuda or cuda:N, got '" + device + "'");
    if (backend == "mpi" && device != "cpu" && device != "cuda")
      throw UsageError("--device " + device + " picks one GPU for local ranks; with --backend "
                       "mpi each process takes its own (give --device cuda)");
    if (parsed.has("--ranks")) {
      try {
        ranks = runtime::parseRankList(parsed.get("--ranks", ""), worldSize);
      } catch (const runtime::RuntimeError &error) {
        throw UsageError(error.what());
      }
      if (static_cast<int64_t>(ranks.size()) < worldSize && !initOnly)
        throw UsageError("--ranks " + parsed.get("--ranks", "") +
                         " runs some ranks only, which needs --init-only (forward gathers "
                         "every rank's shards)");
    } else {
      for (int64_t r = 0; r < worldSize; ++r) ranks.push_back(r);
    }
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
    const bool dataParallel = parsed.has("--data-parallel");
    // A data-parallel training step differentiates each rank's share of the
    // loss: the forward is split first, then differentiated (per compile).
    std::optional<compiler::DataParallelTraining> training;
    compiler::Graph graph;
    if (dataParallel && optimizer) {
      training.emplace();
      training->graphText = compiler::readGraphText(model, maxGraphBytes);
      training->loss = parsed.get("--grad", "");
      training->optimizer = *optimizer;
      graph = compiler::parseGraph(training->graphText, model);
    } else {
      graph = loadModelGraph(model, maxGraphBytes, parsed.get("--grad", ""));
    }
    const std::string load = parsed.get("--load", "");
    if (training)
      training->prepare = [&](compiler::Graph &step) { prepareParamInits(step, load, renames); };
    else
      prepareParamInits(graph, load, renames);
    mlir::MLIRContext context;
    compiler::loadTcDialects(context);
    CliDiagnosticHandler diagnostics(&context);
    compiler::ShardOptions shardOptions;
    shardOptions.unitPatterns = parsed.all("--units");
    shardOptions.prefetch = parsed.has("--prefetch");
    // Step k's batch is the k-th --inputs file (cycling); the first sizes
    // the data-parallel split.
    const std::vector<std::string> &inputFiles = parsed.all("--inputs");
    const std::string firstInputs = inputFiles.empty() ? "" : inputFiles[0];
    // Batches in other dims (--batch-dim inputs, outputs forward leaves
    // sequence-first) travel batch-first; the graph permutes them back.
    if (dataParallel) graph = compiler::batchFirstGraph(graph, inputBatchDims, outputBatchDims);
    if (!inputFiles.empty())
      options.inputs = readBatchFile(firstInputs, dataParallel ? inputBatchDims : BatchDims{});
    mlir::FailureOr<plan::Plan> compiled =
        dataParallel ? compiler::compileDataParallel(
                           graph, globalBatchRows(graph, options.inputs, firstInputs), worldSize,
                           context, shardOptions, training ? &*training : nullptr)
                     : compiler::compileToPlan(graph, worldSize, context, shardOptions,
                                               optimizer ? &*optimizer : nullptr);
    if (mlir::failed(compiled))
      return kBadInput;
    if (training) noteWithoutGradient(training->loss, training->withoutGradient);
    plan = std::move(*compiled);
    if (initOnly)  // no forward at all: nothing to feed, gather or predict
      plan.functions.erase(std::remove_if(plan.functions.begin(), plan.functions.end(),
                                          [](const plan::Function &f) {
                                            return f.name != "init";
                                          }),
                           plan.functions.end());
    options.dataParallel = dataParallel;
    // Bad checkpoints are bad input (exit 2), found before any rank runs.
    runtime::checkpoint::setIoBufferCap(plan, ioBufferBytes);
    runtime::checkpoint::checkPlanLoads(plan);
    if (!inputFiles.empty()) {
      checkBatch(plan, options.inputs, firstInputs, dataParallel);
      for (size_t k = 1; k < inputFiles.size(); ++k) {
        options.moreStepInputs.push_back(
            readBatchFile(inputFiles[k], dataParallel ? inputBatchDims : BatchDims{}));
        checkBatch(plan, options.moreStepInputs.back(), inputFiles[k], dataParallel);
        if (dataParallel && runtime::globalBatchRows(options.moreStepInputs.back()) !=
                                runtime::globalBatchRows(options.inputs))
          throw compiler::GraphError(
              inputFiles[k] + ": a global batch of " +
              std::to_string(runtime::globalBatchRows(options.moreStepInputs.back())) +
              " rows, where " + firstInputs + " has " +
              std::to_string(runtime::globalBatchRows(options.inputs)) +
              " (every step's batch splits the same way)");
        applySpecializedInputs(graph, options.moreStepInputs.back(), true, inputFiles[k]);
      }
    } else if (initOnly) {
      // No forward: nothing to feed.
    } else if (dataParallel) {
      options.inputs = runtime::makeGlobalInputs(plan, compiler::graphBatchRows(graph), seed,
                                                 compiler::inputBounds(graph));
      // An input with its batch elsewhere gets the values the replicated run
      // gives it (made in its own layout), batch-first.
      for (runtime::HostTensor &tensor : options.inputs)
        if (auto dim = inputBatchDims.find(tensor.name);
            dim != inputBatchDims.end() && tensor.shape.size() > 1) {
          const int64_t rank = static_cast<int64_t>(tensor.shape.size());
          const int64_t d = dim->second < 0 ? dim->second + rank : dim->second;
          if (d == 0) continue;
          std::vector<int64_t> own(tensor.shape.begin() + 1, tensor.shape.end());
          own.insert(own.begin() + d, tensor.shape[0]);
          const auto bounds = compiler::inputBounds(graph);
          auto bound = bounds.find(tensor.name);
          tensor = runtime::moveBatchDim(
              runtime::makeDeterministicInput(
                  tensor.name, tensor.dtype, own, seed,
                  bound == bounds.end() ? std::nullopt : std::optional(bound->second)),
              d, true);
        }
    } else {
      // Token ids must index the vocabulary: the graph bounds them.
      options.inputs =
          runtime::makeDeterministicInputs(plan, seed, compiler::inputBounds(graph));
    }
    applySpecializedInputs(graph, options.inputs, !inputFiles.empty(), firstInputs);
  } catch (const compiler::GraphError &error) {
    std::cerr << "shardc: error: " << error.what() << "\n";
    return kBadInput;
  } catch (const runtime::RuntimeError &error) {
    // An unreadable or malformed --inputs file.
    std::cerr << "shardc: error: " << error.what() << "\n";
    return kBadInput;
  }

  if (backend == "mpi")
    return runMpiBackend(parsed, model, seed, timeoutSeconds, reportFormat, plan, options,
                         device, outputBatchDims);
  try {
    // The CPU by default; with --device cuda[:N] the same run on that GPU.
    runtime::SessionRankFactory rankFactory;
    if (const std::optional<int> ordinal = runtime::cudaOrdinalOf(device)) {
      // The ops a GPU rank runs on the host (orthogonal's QR) split the
      // cores as CPU ranks do.
      const int64_t ranksRun =
          ranks.empty() ? plan.worldSize : static_cast<int64_t>(ranks.size());
      rankFactory = cudaRunRanks(
          *ordinal, threads > 0 ? threads : runtime::defaultKernelThreads(ranksRun));
      checkFitsInMemory(plan, ranks, cudaDeviceMemoryBytes(*ordinal),
                        "GPU " + std::to_string(*ordinal));
    } else {
      checkFitsInMemory(plan, ranks, physicalMemoryBytes(), "this machine");
    }
    options.savePath = parsed.has("--save") ? parsed.get("--save", "")
                                            : parsed.get("--save-params", "");
    options.ranks = ranks;
    options.threads = threads;
    options.saveOptimizerPath = parsed.get("--save-optimizer", "");
    options.forwardRepeats = optimizer ? steps - 1 : repeats;
    options.trainingSteps = optimizer.has_value();
    options.profileForward = parsed.has("--profile");
    options.measureResident = true;  // the report shows the OS's view
    if (!options.savePath.empty() && static_cast<int64_t>(ranks.size()) < worldSize)
      std::cerr << "shardc: note: " << options.savePath << " holds the rows of ranks "
                << runtime::formatRankList(ranks) << " of " << worldSize
                << " only (the others read as zeros; its metadata names the ranks)\n";
    options.seed = seed;
    options.timeout = std::chrono::duration<double>(timeoutSeconds);
    runtime::RunResult result = runtime::runLocal(plan, options, rankFactory);
    RunSummary summary{model, seed, &plan, &result, {}};
    if (optimizer) {  // each step's loss; --outputs gets the last step's outputs
      summary.trainingSteps = trainingStepScalars(result);
      if (reportFormat == "text") std::cout << formatTrainingSteps(summary.trainingSteps);
      if (!result.stepOutputs.empty()) result.outputs = std::move(result.stepOutputs.back());
    }
    restoreBatchDims(result.outputs, outputBatchDims);
    if (parsed.has("--outputs"))
      runtime::writeSafetensors(parsed.get("--outputs", ""), result.outputs);
    std::cout << (reportFormat == "json" ? formatJsonReport(summary)
                                         : formatTextReport(summary));
    return kSuccess;
  } catch (const runtime::RuntimeError &error) {
    std::cerr << "shardc: error: " << error.what() << "\n";
    return kRuntimeFailure;
  }
}

} // namespace shardc::cli
