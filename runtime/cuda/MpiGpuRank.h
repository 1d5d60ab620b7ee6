// The `mpi` backend on GPUs (`shardc run --backend mpi --device cuda`,
// docs/gpu.md): one process per GPU, launched by mpirun. Each process takes
// the GPU of its node-local rank (modulo the GPUs it sees), rank 0 makes
// the ncclUniqueId and MPI carries it to every rank, and the plan's
// collectives run over NCCL (NcclCommunicator::createFromUniqueId: a rank
// that never joins is a timeout, not a hang). MPI itself carries only the
// run's bookkeeping (the plan hash check, reports, the data-parallel output
// gather, the cooperative save's agreement).
#pragma once

#include "runtime/mpi/MpiRun.h"

namespace shardc::runtime::cuda {

/// Collective over MPI_COMM_WORLD. Throws RuntimeError (the caller aborts
/// the job) when this process sees no GPU, or NCCL's init fails or times
/// out after `timeout`.
mpi::MpiRankFactory gpuMpiRanks(std::chrono::duration<double> timeout);

}  // namespace shardc::runtime::cuda
