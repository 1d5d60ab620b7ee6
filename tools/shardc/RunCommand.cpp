//===- RunCommand.cpp - shardc run ----------------------------------------===//
#include "compiler/DataParallel.h"
#include "compiler/MemoryBudget.h"
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
#include "runtime/checkpoint/LoadPlan.h"
#include "runtime/checkpoint/ShardReader.h"
#include "tools/shardc/CheckpointOptions.h"
#include "tools/shardc/CommandLine.h"
#include "tools/shardc/Commands.h"
#include "tools/shardc/CudaRanks.h"
#include "tools/shardc/Diagnostics.h"
#include "tools/shardc/MemoryBudgetOption.h"
#include "tools/shardc/ModelGraph.h"
#include "tools/shardc/MpiRunCommand.h"
#include "tools/shardc/RunReport.h"
#include "tools/shardc/RunSettings.h"
#include "tools/shardc/TrainOptions.h"

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
    "                  [--grad LOSS [--recompute-activations] [--fuse-linear-cross-entropy]\n"
    "                   [--optimizer sgd|adamw --lr LR ... [--steps K]]]\n"
    "                  [--memory-budget SIZE]\n"
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
    "  --units, --prefetch, --max-graph-mib, --grad, --recompute-activations,\n"
    "  --fuse-linear-cross-entropy,\n"
    "  --memory-budget    as for `shardc compile`; the budget is checked before\n"
    "                     any rank allocates\n"
    "  --master-dtype float32|float64  store every bfloat16 / float16\n"
    "                     parameter in that dtype (init, shards, optimizer\n"
    "                     state, --save) and read it in its own: master\n"
    "                     weights, as the graph's master_dtype\n"
    "                     (docs/graph-format.md)\n"
    "  --optimizer sgd|adamw  end forward with an optimizer step (needs --grad):\n"
    "                     each gradient, reduced into its parameter's shard\n"
    "                     (the mean over ranks; with --data-parallel the sum\n"
    "                     of their shares), updates the rows this rank\n"
    "                     stores with torch.optim's formulas; the gradients\n"
    "                     are not outputs (docs/training.md)\n"
    "  --lr LR            learning rate (required with --optimizer)\n"
    "  --momentum M       SGD momentum (default 0)\n"
    "  --nesterov         SGD: Nesterov momentum (needs --momentum)\n"
    "  --weight-decay W   default: SGD 0, AdamW 0.01 (decoupled)\n"
    "  --betas B1,B2      AdamW betas (default 0.9,0.999)\n"
    "  --eps E            AdamW eps (default 1e-8)\n"
    "  --warmup-steps W, --decay-steps D, --min-lr M  the learning-rate\n"
    "                     schedule: lr * k / W at step k <= W, then a cosine\n"
    "                     decay to M over D steps (default: lr throughout)\n"
    "  --no-weight-decay REGEX  no weight decay for the parameters whose names\n"
    "                     REGEX matches (anywhere; repeatable): biases, norms\n"
    "  --clip-grad-norm C clip the gradients to global L2 norm C before the\n"
    "                     update (torch.nn.utils.clip_grad_norm_); the norm\n"
    "                     is exact, the same at every world size\n"
    "  --accumulate K     gradient accumulation: each rank's rows of the global\n"
    "                     batch as K forward and backward micro-steps, then one\n"
    "                     update; the whole batch's loss (implies\n"
    "                     --data-parallel)\n"
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
/// tensor named like the graph's first batch input (0-d ones aside), else
/// the graph's own batch.
int64_t globalBatchRows(const compiler::Graph &graph,
                        const std::vector<runtime::HostTensor> &inputs, const std::string &file) {
  int64_t rows = compiler::graphBatchRows(graph);
  const std::string &first = compiler::firstBatchInput(graph).name;
  for (const runtime::HostTensor &tensor : inputs)
    if (tensor.name == first) {
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
/// lists those that keep their own init, unless `quiet`); without it, the
/// files the graph's own load ops name must exist.
void prepareParamInits(compiler::Graph &graph, const std::string &load,
                       const std::vector<RenameRule> &renames, bool quiet = false) {
  if (load.empty()) return requireLoadFiles(graph);
  std::vector<std::string> kept = applyCheckpointLoad(graph, load, renames);
  const size_t saved = static_cast<size_t>(
      std::count_if(graph.params.begin(), graph.params.end(),
                    [](const compiler::GraphParam &p) { return !p.isBuffer || p.persistent; }));
  if (saved > 0 && kept.size() == saved)
    throw runtime::checkpoint::CheckpointError(
        load + ": none of the model's " + std::to_string(saved) +
        " parameter(s) is in the checkpoint (check the names, or --rename)");
  if (!kept.empty() && !quiet) {
    std::cerr << "shardc: note: " << kept.size()
              << " parameter(s) not in the checkpoint keep their own init:";
    for (size_t i = 0; i < kept.size() && i < 8; ++i) std::cerr << " " << kept[i];
    std::cerr << (kept.size() > 8 ? " ...\n" : "\n");
  }
}

/// Compiles MODEL.json as `s` asks and fills `options` with what the ranks
/// are fed: kSuccess, or the exit code of a graph, checkpoint or --inputs
/// file that cannot be used (the error printed).
int prepareRun(const RunSettings &s, const std::string &model, plan::Plan &plan,
               runtime::RunOptions &options, BatchDims &outputBatchDims) {
  try {
    const bool dataParallel = s.parsed.has("--data-parallel");
    // A data-parallel training step differentiates each rank's share of the
    // loss: the forward is split first, then differentiated (per compile).
    std::optional<compiler::DataParallelTraining> training;
    compiler::Graph graph;
    if (dataParallel && s.optimizer) {
      training.emplace();
      training->graphText = compiler::readGraphText(model, s.maxGraphBytes, s.masterDtype);
      training->loss = s.parsed.get("--grad", "");
      training->fuseLinearCrossEntropy = s.parsed.has("--fuse-linear-cross-entropy");
      training->optimizer = *s.optimizer;
      graph = compiler::parseGraph(training->graphText, model);
    } else {
      graph = loadModelGraph(model, s.maxGraphBytes, s.parsed.get("--grad", ""), s.masterDtype,
                             s.parsed.has("--fuse-linear-cross-entropy"));
    }
    const std::string load = s.parsed.get("--load", "");
    // Each compilation of a data-parallel step prepares its own joint graph
    // (--memory-budget's trials too): the note once.
    bool noted = false;
    if (training)
      training->prepare = [&](compiler::Graph &step) {
        prepareParamInits(step, load, s.renames, noted);
        noted = true;
      };
    else
      prepareParamInits(graph, load, s.renames);
    mlir::MLIRContext context;
    compiler::loadTcDialects(context);
    CliDiagnosticHandler diagnostics(&context);
    compiler::ShardOptions shardOptions;
    shardOptions.unitPatterns = s.parsed.all("--units");
    shardOptions.prefetch = s.parsed.has("--prefetch");
    shardOptions.recomputeActivations = s.parsed.has("--recompute-activations");
    // Step k's batch is the k-th --inputs file (cycling); the first sizes
    // the data-parallel split.
    const std::vector<std::string> &inputFiles = s.parsed.all("--inputs");
    const std::string firstInputs = inputFiles.empty() ? "" : inputFiles[0];
    // Batches in other dims (--batch-dim inputs, outputs forward leaves
    // sequence-first) travel batch-first; the graph permutes them back.
    if (dataParallel) graph = compiler::batchFirstGraph(graph, s.inputBatchDims, outputBatchDims);
    if (!inputFiles.empty())
      options.inputs = readBatchFile(firstInputs, dataParallel ? s.inputBatchDims : BatchDims{});
    const int64_t globalRows =
        dataParallel ? globalBatchRows(graph, options.inputs, firstInputs) : 0;
    const bool fuse = s.parsed.has("--fuse-linear-cross-entropy");
    // The joint graph with the head and its loss fused the other way
    // (--memory-budget's trials, and its choice), made once when asked for.
    std::optional<compiler::Graph> otherFusion;
    auto graphFusedAs = [&](bool fused) -> const compiler::Graph & {
      if (fused == fuse || training) return graph;
      if (!otherFusion) {
        otherFusion = loadModelGraph(model, s.maxGraphBytes, s.parsed.get("--grad", ""),
                                     s.masterDtype, fused, /*quiet=*/true);
        prepareParamInits(*otherFusion, load, s.renames, /*quiet=*/true);
      }
      return *otherFusion;
    };
    const ContextCompiler compile = [&](mlir::MLIRContext &in, const compiler::PlanChoice &choice,
                                        const compiler::ShardOptions &shard) {
      // --memory-budget's trials of other numbers of micro-steps or of the
      // other fusion: the same training step, split or fused so.
      std::optional<compiler::DataParallelTraining> resplit;
      compiler::DataParallelTraining *step = training ? &*training : nullptr;
      if (training && (choice.accumulate != training->optimizer.accumulate ||
                       choice.fuse != training->fuseLinearCrossEntropy)) {
        resplit = training;
        resplit->optimizer.accumulate = choice.accumulate;
        resplit->fuseLinearCrossEntropy = choice.fuse;
        step = &*resplit;
      }
      mlir::FailureOr<plan::Plan> compiled =
          dataParallel
              ? compiler::compileDataParallel(graph, globalRows, choice.worldSize, in, shard, step)
              : compiler::compileToPlan(graphFusedAs(choice.fuse), choice.worldSize, in, shard,
                                        s.optimizer ? &*s.optimizer : nullptr);
      if (mlir::succeeded(compiled) && s.initOnly)  // no forward: nothing to feed or predict
        compiled->functions.erase(
            std::remove_if(compiled->functions.begin(), compiled->functions.end(),
                           [](const plan::Function &f) { return f.name != "init"; }),
            compiled->functions.end());
      return compiled;
    };
    const bool fused =
        applyMemoryBudget(s.memoryBudget,
                          AskedRun{s.worldSize, s.parsed.has("--grad"),
                                   training ? training->optimizer.accumulate : 0, fuse},
                          model, shardOptions, compile);
    const int64_t accumulate = training ? training->optimizer.accumulate : 1;
    mlir::FailureOr<plan::Plan> compiled = compile(context,
                                                   {.worldSize = s.worldSize,
                                                    .recompute = shardOptions.recomputeActivations,
                                                    .prefetch = shardOptions.prefetch,
                                                    .fuse = fused,
                                                    .accumulate = accumulate},
                                                   shardOptions);
    if (mlir::failed(compiled))
      return kBadInput;
    if (training) noteWithoutGradient(training->loss, training->withoutGradient);
    plan = std::move(*compiled);
    options.dataParallel = dataParallel;
    // Bad checkpoints are bad input (exit 2), found before any rank runs.
    runtime::checkpoint::setIoBufferCap(plan, s.ioBufferBytes);
    runtime::checkpoint::checkPlanLoads(plan);
    if (!inputFiles.empty()) {
      checkBatch(plan, options.inputs, firstInputs, dataParallel);
      for (size_t k = 1; k < inputFiles.size(); ++k) {
        options.moreStepInputs.push_back(
            readBatchFile(inputFiles[k], dataParallel ? s.inputBatchDims : BatchDims{}));
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
    } else if (s.initOnly) {
      // No forward: nothing to feed.
    } else if (dataParallel) {
      options.inputs = runtime::makeGlobalInputs(plan, compiler::graphBatchRows(graph), s.seed,
                                                 compiler::inputBounds(graph));
      // An input with its batch elsewhere gets the values the replicated run
      // gives it (made in its own layout), batch-first.
      for (runtime::HostTensor &tensor : options.inputs)
        if (auto dim = s.inputBatchDims.find(tensor.name);
            dim != s.inputBatchDims.end() && tensor.shape.size() > 1) {
          const int64_t rank = static_cast<int64_t>(tensor.shape.size());
          const int64_t d = dim->second < 0 ? dim->second + rank : dim->second;
          if (d == 0) continue;
          std::vector<int64_t> own(tensor.shape.begin() + 1, tensor.shape.end());
          own.insert(own.begin() + d, tensor.shape[0]);
          const auto bounds = compiler::inputBounds(graph);
          auto bound = bounds.find(tensor.name);
          tensor = runtime::moveBatchDim(
              runtime::makeDeterministicInput(tensor.name, tensor.dtype, own, s.seed,
                                              bound == bounds.end() ? std::nullopt
                                                                    : std::optional(bound->second)),
              d, true);
        }
    } else {
      // Token ids must index the vocabulary: the graph bounds them.
      options.inputs = runtime::makeDeterministicInputs(plan, s.seed, compiler::inputBounds(graph));
    }
    applySpecializedInputs(graph, options.inputs, !inputFiles.empty(), firstInputs);
  } catch (const compiler::GraphError &error) {
    std::cerr << "shardc: error: " << error.what() << "\n";
    return kBadInput;
  } catch (const compiler::MemoryBudgetError &error) {
    std::cerr << "shardc: error: " << error.what() << "\n";
    return kBadInput;
  } catch (const runtime::RuntimeError &error) {
    // An unreadable or malformed --inputs file.
    std::cerr << "shardc: error: " << error.what() << "\n";
    return kBadInput;
  }
  return kSuccess;
}

/// Runs `plan` on local ranks (threads; --device cuda: on one GPU), prints
/// the report and writes --outputs / --save.
int runLocalBackend(const RunSettings &s, const std::string &model, const plan::Plan &plan,
                    runtime::RunOptions &options, const BatchDims &outputBatchDims) {
  try {
    // The CPU by default; with --device cuda[:N] the same run on that GPU.
    runtime::SessionRankFactory rankFactory;
    if (const std::optional<int> ordinal = runtime::cudaOrdinalOf(s.device)) {
      // The ops a GPU rank runs on the host (orthogonal's QR) split the
      // cores as CPU ranks do.
      const int64_t ranksRun =
          s.ranks.empty() ? plan.worldSize : static_cast<int64_t>(s.ranks.size());
      rankFactory = cudaRunRanks(*ordinal, s.threads > 0 ? s.threads
                                                         : runtime::defaultKernelThreads(ranksRun));
      checkFitsInMemory(plan, s.ranks, cudaDeviceMemoryBytes(*ordinal),
                        "GPU " + std::to_string(*ordinal));
    } else {
      checkFitsInMemory(plan, s.ranks, physicalMemoryBytes(), "this machine");
    }
    options.savePath =
        s.parsed.has("--save") ? s.parsed.get("--save", "") : s.parsed.get("--save-params", "");
    options.ranks = s.ranks;
    options.threads = s.threads;
    options.saveOptimizerPath = s.parsed.get("--save-optimizer", "");
    options.forwardRepeats = s.optimizer ? s.steps - 1 : s.repeats;
    options.trainingSteps = s.optimizer.has_value();
    options.profileForward = s.parsed.has("--profile");
    options.measureResident = true;  // the report shows the OS's view
    if (!options.savePath.empty() && static_cast<int64_t>(s.ranks.size()) < s.worldSize)
      std::cerr << "shardc: note: " << options.savePath << " holds the rows of ranks "
                << runtime::formatRankList(s.ranks) << " of " << s.worldSize
                << " only (the others read as zeros; its metadata names the ranks)\n";
    options.seed = s.seed;
    options.timeout = std::chrono::duration<double>(s.timeoutSeconds);
    runtime::RunResult result = runtime::runLocal(plan, options, rankFactory);
    RunSummary summary{model, s.seed, &plan, &result, {}};
    if (s.optimizer) {  // each step's loss; --outputs gets the last step's outputs
      summary.trainingSteps = trainingStepScalars(result);
      if (s.reportFormat == "text") std::cout << formatTrainingSteps(summary.trainingSteps);
      if (!result.stepOutputs.empty()) result.outputs = std::move(result.stepOutputs.back());
    }
    restoreBatchDims(result.outputs, outputBatchDims);
    if (s.parsed.has("--outputs"))
      runtime::writeSafetensors(s.parsed.get("--outputs", ""), result.outputs);
    std::cout << (s.reportFormat == "json" ? formatJsonReport(summary) : formatTextReport(summary));
    return kSuccess;
  } catch (const runtime::RuntimeError &error) {
    std::cerr << "shardc: error: " << error.what() << "\n";
    return kRuntimeFailure;
  }
}

}  // namespace

int runCommand(const std::vector<std::string> &args) {
  RunSettings s;
  try {
    s = parseRunSettings(args);
  } catch (const UsageError &error) {
    std::cerr << "shardc run: error: " << error.what() << "\n\n" << kRunUsage;
    return kBadInput;
  }
  if (s.help) {
    std::cout << kRunUsage;
    return kSuccess;
  }
  const std::string &model = s.parsed.positional[0];
  plan::Plan plan;
  runtime::RunOptions options;
  BatchDims outputBatchDims;  // the outputs forward leaves batch-first
  if (const int code = prepareRun(s, model, plan, options, outputBatchDims); code != kSuccess)
    return code;
  if (s.backend == "mpi")
    return runMpiBackend(s.parsed, model, s.seed, s.timeoutSeconds, s.reportFormat, plan, options,
                         s.device, outputBatchDims);
  return runLocalBackend(s, model, plan, options, outputBatchDims);
}

} // namespace shardc::cli
