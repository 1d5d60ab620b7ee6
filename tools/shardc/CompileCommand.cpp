//===- CompileCommand.cpp - shardc compile --------------------------------===//
#include "compiler/DataParallel.h"
#include "compiler/FuseLinearCrossEntropy.h"
#include "compiler/GraphToTc.h"
#include "compiler/LowerToPlan.h"
#include "compiler/MemoryBudget.h"
#include "compiler/Pipeline.h"
#include "runtime/AtomicFile.h"
#include "runtime/DataParallel.h"
#include "runtime/PlanJson.h"
#include "runtime/RuntimeError.h"
#include "tools/shardc/CommandLine.h"
#include "tools/shardc/Commands.h"
#include "tools/shardc/Diagnostics.h"
#include "tools/shardc/MemoryBudgetOption.h"
#include "tools/shardc/ModelGraph.h"
#include "tools/shardc/RunReport.h"
#include "tools/shardc/TrainOptions.h"

#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

#include <iostream>

namespace shardc::cli {

const char *const kCompileUsage =
    "usage: shardc compile MODEL.json [--world-size N] [--emit tc|sharded|plan]\n"
    "                      [--units REGEX]... [--prefetch] [--memory-plan]\n"
    "                      [--max-graph-mib M]\n"
    "                      [--grad LOSS [--recompute-activations]\n"
    "                                   [--fuse-linear-cross-entropy]]\n"
    "                      [--memory-budget SIZE]\n"
    "                      [--master-dtype D]\n"
    "                      [--optimizer sgd|adamw --lr LR ...] [--data-parallel]\n"
    "                      [-o FILE]\n"
    "\n"
    "Compiles an exported graph (docs/graph-format.md).\n"
    "  --world-size N   ranks to shard over (default 1)\n"
    "  --emit tc        the tc program as imported, before sharding\n"
    "  --emit sharded   the tc program after tc-fsdp (default)\n"
    "  --emit plan      the runtime plan, as JSON (docs/plan.md)\n"
    "  --units REGEX    FSDP units: a parameter's unit is the text REGEX matches\n"
    "                   at the start of its name (repeatable; default: one unit\n"
    "                   per block of each layer list, a block over a quarter\n"
    "                   of the parameters split into its nested blocks, the\n"
    "                   rest in \"root\")\n"
    "  --prefetch       gather the next unit before the current one computes\n"
    "  --memory-plan    print each rank's predicted peak per function and what\n"
    "                   is live at it, instead of the IR or plan\n"
    "  --max-graph-mib M  refuse graph files larger than M MiB (default 256)\n"
    "  --grad LOSS      compile the joint forward and backward pass of LOSS\n"
    "                   (docs/training.md)\n"
    "  --recompute-activations  with --grad: each unit's backward recomputes\n"
    "                   what its forward computed, from the unit's input,\n"
    "                   instead of keeping it (activation checkpointing per\n"
    "                   unit; the same gradients, bit for bit)\n"
    "  --fuse-linear-cross-entropy  with --grad: a loss cross_entropy(linear(h, W),\n"
    "                   targets) becomes one op that makes the logits 256 rows\n"
    "                   at a time, in forward and again in backward: no\n"
    "                   [tokens, vocabulary] tensor is held (the same loss and\n"
    "                   gradients, bit for bit; the head's GEMM runs 5 times\n"
    "                   instead of 3)\n"
    "  --memory-budget SIZE  bytes each rank may hold at its peak (80GiB,\n"
    "                   1.5e9, 800MB): with --grad, the head and its loss\n"
    "                   are fused and / or activations recomputed when only\n"
    "                   that fits; a plan that cannot fit is an error\n"
    "                   naming a world size that fits\n"
    "  --master-dtype float32|float64  every bfloat16 / float16 parameter\n"
    "                   stored in that dtype and read in its own (master\n"
    "                   weights, docs/graph-format.md)\n"
    "  --optimizer sgd|adamw, --lr, --momentum, --weight-decay, --betas, --eps\n"
    "                   end forward with that optimizer's step, as for\n"
    "                   `shardc run` (docs/training.md)\n"
    "  --data-parallel  rank 0's program of a data-parallel run of the graph's\n"
    "                   batch (its rows, a loss its share; with --grad, a\n"
    "                   training step, which needs --optimizer)\n"
    "  --accumulate K   with --optimizer: the step's K micro-steps (gradient\n"
    "                   accumulation; implies --data-parallel)\n"
    "  -o FILE          write there instead of stdout; the file appears only\n"
    "                   when compilation succeeded\n";

namespace {

std::string printModule(mlir::ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream out(text);
  module.print(out);
  out << "\n";
  return text;
}

/// Rank 0's graph of a data-parallel run of MODEL.json's batch over
/// `worldSize` ranks (compiler/DataParallel.h): its rows, a loss its share;
/// with `optimizer`, the joint graph of its share of `loss` (the parameters
/// it does not depend on are added to `withoutGradient`).
compiler::Graph dataParallelRankGraph(const std::string &model, int64_t maxGraphBytes,
                                      const std::string &masterDtype, int64_t worldSize,
                                      const std::string &loss, bool fuseLinearCrossEntropy,
                                      const std::optional<compiler::OptimizerOptions> &optimizer,
                                      std::vector<std::string> &withoutGradient) {
  compiler::DataParallelTraining training;
  training.graphText = compiler::readGraphText(model, maxGraphBytes, masterDtype);
  const compiler::Graph graph = compiler::parseGraph(training.graphText, model);
  const int64_t batch = compiler::graphBatchRows(graph);
  const int64_t rows = runtime::batchSlice(batch, worldSize, 0).rows;
  if (!optimizer)  // a forward: its loss fused first, then split (as run does)
    return compiler::rebatchGraph(
        fuseLinearCrossEntropy
            ? compiler::parseGraph(compiler::fusedLossGraphText(training.graphText, model,
                                                                "--fuse-linear-cross-entropy"),
                                   model)
            : graph,
        rows, batch);
  compiler::checkTrainingBatchSplits(model, batch, worldSize, optimizer->accumulate);
  training.loss = loss;
  training.fuseLinearCrossEntropy = fuseLinearCrossEntropy;
  training.optimizer = *optimizer;
  compiler::Graph step = compiler::dataParallelStepGraph(graph, rows, batch, training);
  withoutGradient = training.withoutGradient;
  return step;
}

} // namespace

int compileCommand(const std::vector<std::string> &args) {
  ParsedArgs parsed;
  int64_t worldSize = 1;
  int64_t maxGraphBytes = compiler::kDefaultMaxGraphBytes;
  std::string masterDtype, emit;
  int64_t memoryBudget = 0;
  std::optional<compiler::OptimizerOptions> optimizer;
  try {
    std::set<std::string> withValue{"--world-size",   "--emit",          "-o",
                                    "--units",        "--max-graph-mib", "--grad",
                                    "--master-dtype", "--memory-budget"};
    withValue.insert(kTrainValueOptions.begin(), kTrainValueOptions.end());
    parsed =
        parseArgs(args, {withValue,
                         {"--help", "-h", "--prefetch", "--memory-plan", "--data-parallel",
                          "--nesterov", "--recompute-activations", "--fuse-linear-cross-entropy"}});
    if (parsed.has("--help") || parsed.has("-h")) {
      std::cout << kCompileUsage;
      return kSuccess;
    }
    if (parsed.positional.size() != 1)
      throw UsageError("expected exactly one MODEL.json");
    maxGraphBytes = parsed.getInt("--max-graph-mib", 256, 1, 1 << 20) << 20;
    masterDtype = masterDtypeOption(parsed);
    worldSize = parsed.getInt("--world-size", 1, 1, 1 << 20);
    memoryBudget = parsed.getByteSize("--memory-budget");
    emit = parsed.get("--emit", "sharded");
    if (emit != "tc" && emit != "sharded" && emit != "plan")
      throw UsageError("--emit must be tc, sharded or plan, got '" + emit + "'");
    optimizer = parseOptimizerOptions(parsed);
    requireGradForBackwardOptions(parsed);
    implyDataParallel(parsed);
    if (parsed.has("--grad") && parsed.has("--data-parallel") && !optimizer)
      throw UsageError("--grad with --data-parallel is a data-parallel training step: give "
                       "--optimizer");
  } catch (const UsageError &error) {
    std::cerr << "shardc compile: error: " << error.what() << "\n\n"
              << kCompileUsage;
    return kBadInput;
  }

  compiler::ShardOptions shardOptions;
  shardOptions.unitPatterns = parsed.all("--units");
  shardOptions.prefetch = parsed.has("--prefetch");
  shardOptions.recomputeActivations = parsed.has("--recompute-activations");
  try {
    const std::string &model = parsed.positional[0];
    const std::string loss = parsed.get("--grad", "");
    const bool dataParallel = parsed.has("--data-parallel");
    const bool fuse = parsed.has("--fuse-linear-cross-entropy");
    std::vector<std::string> withoutGradient;
    compiler::Graph graph =
        dataParallel ? dataParallelRankGraph(model, maxGraphBytes, masterDtype, worldSize, loss,
                                             fuse, optimizer, withoutGradient)
                     : loadModelGraph(model, maxGraphBytes, loss, masterDtype, fuse);
    if (dataParallel && optimizer) noteWithoutGradient(loss, withoutGradient);
    shardOptions.sumGradients = dataParallel && optimizer.has_value();
    shardOptions.splitSummedGradients = optimizer && optimizer->accumulate > 1;
    const bool training = dataParallel && optimizer.has_value();
    // The graph of another choice (--memory-budget's trials): a
    // data-parallel batch split over other world sizes or micro-steps, or
    // the head and its loss fused the other way.
    auto graphFor = [&](const compiler::PlanChoice &choice) {
      std::optional<compiler::OptimizerOptions> trialOptimizer = optimizer;
      if (training) trialOptimizer->accumulate = choice.accumulate;
      std::vector<std::string> unused;
      return dataParallel
                 ? dataParallelRankGraph(model, maxGraphBytes, masterDtype, choice.worldSize, loss,
                                         choice.fuse, trialOptimizer, unused)
                 : loadModelGraph(model, maxGraphBytes, loss, masterDtype, choice.fuse,
                                  /*quiet=*/true);
    };
    auto isAsked = [&](const compiler::PlanChoice &choice) {
      return choice.fuse == fuse &&
             (!dataParallel || (choice.worldSize == worldSize &&
                                (!training || choice.accumulate == optimizer->accumulate)));
    };
    const bool fused = applyMemoryBudget(
        memoryBudget,
        AskedRun{worldSize, !loss.empty(), training ? optimizer->accumulate : 0, fuse}, model,
        shardOptions,
        [&](mlir::MLIRContext &context, const compiler::PlanChoice &choice,
            const compiler::ShardOptions &options) -> mlir::FailureOr<plan::Plan> {
          std::optional<compiler::OptimizerOptions> trialOptimizer = optimizer;
          compiler::ShardOptions trialOptions = options;
          if (training) {
            trialOptimizer->accumulate = choice.accumulate;
            trialOptions.splitSummedGradients = choice.accumulate > 1;
          }
          const compiler::Graph trial = isAsked(choice) ? graph : graphFor(choice);
          mlir::OwningOpRef<mlir::ModuleOp> module = compiler::buildTcModule(trial, context);
          if (mlir::failed(compiler::shardModule(*module, choice.worldSize, trialOptions,
                                                 trialOptimizer ? &*trialOptimizer : nullptr)))
            return mlir::failure();
          return compiler::lowerToPlan(*module);
        });
    if (fused != fuse)  // the budget chose to fuse the head and its loss
      graph = graphFor({.worldSize = worldSize,
                        .fuse = fused,
                        .accumulate = training ? optimizer->accumulate : 1});
    mlir::MLIRContext context;
    compiler::loadTcDialects(context);
    CliDiagnosticHandler diagnostics(&context);
    mlir::OwningOpRef<mlir::ModuleOp> module =
        compiler::buildTcModule(graph, context);
    std::string output;
    if (emit == "tc" && !parsed.has("--memory-plan")) {
      if (mlir::failed(mlir::verify(*module)))
        return kBadInput;
      output = printModule(*module);
    } else {
      if (mlir::failed(compiler::shardModule(*module, worldSize, shardOptions,
                                             optimizer ? &*optimizer : nullptr)))
        return kBadInput;
      mlir::FailureOr<plan::Plan> plan = compiler::lowerToPlan(*module);
      if (mlir::failed(plan))
        return kBadInput;
      // People sizing a run need to know which ranks hold a full tensor.
      std::cerr << formatNonShardable(*plan);
      if (parsed.has("--memory-plan"))
        output = formatMemoryPlan(*plan);
      else
        output = emit == "sharded" ? printModule(*module)
                                   : runtime::planToJson(*plan) + "\n";
    }
    // "-o -" is standard output, as in the compilers people know.
    if (parsed.has("-o") && parsed.get("-o", "") != "-")
      runtime::writeFileAtomically(parsed.get("-o", ""), output);
    else
      std::cout << output;
    return kSuccess;
  } catch (const compiler::GraphError &error) {
    std::cerr << "shardc: error: " << error.what() << "\n";
    return kBadInput;
  } catch (const compiler::MemoryBudgetError &error) {
    std::cerr << "shardc: error: " << error.what() << "\n";
    return kBadInput;
  } catch (const runtime::RuntimeError &error) {
    std::cerr << "shardc: error: " << error.what() << "\n";
    return kRuntimeFailure;
  }
}

} // namespace shardc::cli
