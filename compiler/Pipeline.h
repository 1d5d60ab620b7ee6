//===- Pipeline.h - graph file to sharded IR to Plan ------------*- C++ -*-===//
#pragma once

#include "compiler/Graph.h"
#include "runtime/Plan.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

namespace shardc::compiler {

/// Registers and loads everything a tc program uses.
void loadTcDialects(mlir::MLIRContext &context);

/// How parameters are grouped and gathered (docs/cli.md: --units,
/// --prefetch).
struct ShardOptions {
  std::vector<std::string> unitPatterns; // empty: the default units
  bool prefetch = false;
  /// Data-parallel training: each rank's gradients are its share of the
  /// global batch's loss, summed over ranks by reduce_scatter (tc-fsdp's
  /// sum-gradients).
  bool sumGradients = false;
  /// Gradient accumulation: each micro-step's gradient is reduced into the
  /// shard as soon as it is complete (tc-fsdp's split-summed-gradients).
  bool splitSummedGradients = false;
  /// Activation checkpointing per unit (tc-recompute-activations): a joint
  /// graph's backward recomputes what each unit's forward computed instead
  /// of keeping it alive in between.
  bool recomputeActivations = false;
  /// tc-narrow-unit-runs at N >= 2: ops that read none of a unit's
  /// parameters run after its gathered window when that lowers the peak.
  /// Off only to measure what it saves (test/pipeline/NarrowUnitRunsTest).
  bool narrowUnitRuns = true;
};

/// A training step (docs/training.md, tc-optimizer): @forward's gradients
/// update the parameters. weightDecay < 0: the optimizer's default.
struct OptimizerOptions {
  std::string optimizer = "sgd"; // sgd or adamw
  double lr = 0;
  double momentum = 0;
  bool nesterov = false; // SGD: Nesterov momentum
  double weightDecay = -1;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  /// AdamW's learning-rate schedule (tc-optimizer's warmup-steps,
  /// decay-steps, min-lr; runtime/Optimizers.h scheduledLr).
  int64_t warmupSteps = 0, decaySteps = 0;
  double minLr = 0;
  /// Gradient clipping (tc-optimizer's max-grad-norm): > 0 clips every
  /// step's gradients to this global L2 norm.
  double maxGradNorm = 0;
  /// Regexes (tc-optimizer's no-weight-decay): the parameters whose names
  /// one matches get no weight decay.
  std::vector<std::string> noWeightDecay;
  /// Resume: the state from this safetensors file (--load-optimizer);
  /// empty: zeros.
  std::string stateFile;
  /// Gradient accumulation (--accumulate): micro-steps of forward and
  /// backward per optimizer step, each on its slice of the rank's rows of
  /// the global batch (compiler/GradientAccumulation.h). Data-parallel
  /// training only (compiler/DataParallel.h).
  int64_t accumulate = 1;
};

/// Verifies `module`, then runs tc-expand-init, tc-assign-units,
/// tc-fold-param-casts, tc-recompute-activations (if asked), tc-optimizer (with
/// `optimizer`), tc-narrow-unit-runs (N >= 2) and tc-fsdp for `worldSize`
/// ranks. Errors are reported through
/// the context's diagnostic handler.
mlir::LogicalResult shardModule(mlir::ModuleOp module, int64_t worldSize,
                                const ShardOptions &options = {},
                                const OptimizerOptions *optimizer = nullptr);

/// The whole pipeline: graph -> tc -> sharded tc -> Plan.
mlir::FailureOr<plan::Plan>
compileToPlan(const Graph &graph, int64_t worldSize, mlir::MLIRContext &context,
              const ShardOptions &options = {},
              const OptimizerOptions *optimizer = nullptr);

} // namespace shardc::compiler
