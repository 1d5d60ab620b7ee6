//===- MpiRunCommand.h - `shardc run --backend mpi` -------------*- C++ -*-===//
//
// The mpi backend's part of `shardc run` (docs/mpi.md). Compiled whether or
// not MPI was found; without it, mpiBackendAvailable() is false.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/LocalRun.h"
#include "runtime/Plan.h"
#include "tools/shardc/CommandLine.h"

#include <cstdint>
#include <map>
#include <string>

namespace shardc::cli {

bool mpiBackendAvailable();

/// Initializes MPI (every process of the job) and returns its world size.
int64_t mpiInitialize();

/// This process's MPI rank (after mpiInitialize).
int64_t mpiRank();

/// Runs the compiled plan on this process's rank, then on rank 0 writes
/// --outputs / --save-params and prints the report (with each process's
/// OS-measured peak RSS beside its accounted peak). Returns kSuccess after
/// MPI_Finalize; any failure prints "shardc: error: rank R: ..." and ends
/// the whole job with exit code 1 (MPI_Abort): it never returns then.
/// `device` "cuda": one GPU per process, collectives over NCCL
/// (runtime/cuda/MpiGpuRank.h).
int runMpiBackend(const ParsedArgs &parsed, const std::string &model, uint64_t seed,
                  double timeoutSeconds, const std::string &reportFormat,
                  const plan::Plan &plan, runtime::RunOptions &options,
                  const std::string &device,
                  const std::map<std::string, int64_t> &outputBatchDims);

} // namespace shardc::cli
