//===- CudaRunCommand.h - `shardc run --device cuda` ------------*- C++ -*-===//
//
// The GPU part of `shardc run` (docs/gpu.md): every rank of the plan a
// thread on one GPU (runtime/cuda/OneGpuRun.h). Compiled whether or not the
// CUDA runtime was built; without it, cudaDeviceAvailable() is false.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/LocalRun.h"
#include "runtime/Plan.h"

#include <string>

namespace shardc::cli {

/// True when this shardc was built with the CUDA runtime (runtime/cuda).
bool cudaRuntimeBuilt();

/// Runs init and forward of `plan` on GPU 0 with options.inputs; writes
/// `outputsPath` (rank 0's outputs) when not empty and prints each rank's
/// measured memory beside the prediction. Throws RuntimeError when no GPU
/// is visible or a rank fails.
int runOnCudaDevice(const plan::Plan &plan, const runtime::RunOptions &options,
                    const std::string &outputsPath);

} // namespace shardc::cli
