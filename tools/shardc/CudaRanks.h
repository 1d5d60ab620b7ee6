//===- CudaRanks.h - the GPU of `shardc run --device cuda` ------*- C++ -*-===//
//
// `shardc run --device cuda[:N]` runs the same runLocal as the CPU default,
// on ranks that share one GPU (runtime/cuda/CudaSession.h): each rank a thread
// with its own CudaDevice, the CUDA backend's kernels, device-to-device
// copies between ranks (docs/gpu.md). Compiled whether or not the CUDA
// runtime was built; without it, every function here refuses with the
// reason.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/SessionRank.h"

#include <cstdint>

namespace shardc::cli {

/// Ranks on GPU `ordinal`, each with `hostThreads` threads for the ops a
/// GPU rank runs on the host (orthogonal init). Throws RuntimeError
/// ("--device cuda: ...") when this shardc was built without the CUDA
/// runtime, no GPU is visible or there is no such ordinal, before anything
/// is allocated.
runtime::SessionRankFactory cudaRunRanks(int ordinal, int hostThreads = 1);

/// GPU `ordinal`'s memory in bytes (cudaMemGetInfo's total): what the
/// ranks of a --device cuda run share. Throws as cudaRunRanks does.
int64_t cudaDeviceMemoryBytes(int ordinal);

} // namespace shardc::cli
