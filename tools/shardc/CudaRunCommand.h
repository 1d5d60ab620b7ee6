//===- CudaRunCommand.h - `shardc run --device cuda` ------------*- C++ -*-===//
//
// The GPU part of `shardc run` (docs/gpu.md): every rank of the plan a
// thread on one GPU, held in a LocalSession whose ranks share that GPU
// (runtime/cuda/CudaSession.h). Compiled whether or not the CUDA runtime
// was built; without it, cudaRuntimeBuilt() is false.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/LocalRun.h"
#include "runtime/Plan.h"

#include <string>

namespace shardc::cli {

/// True when this shardc was built with the CUDA runtime (runtime/cuda).
bool cudaRuntimeBuilt();

/// Runs init (checkpoint loads included) and, when the plan has one,
/// forward of `plan` on GPU 0 with options.inputs (options.dataParallel:
/// the global batch); writes options.savePath (every rank its own rows) and
/// `outputsPath` (the outputs) when not empty, and prints each rank's
/// measured memory beside the prediction. Throws RuntimeError when no GPU
/// is visible or a rank fails.
int runOnCudaDevice(const plan::Plan &plan, const runtime::RunOptions &options,
                    const std::string &outputsPath);

} // namespace shardc::cli
