// Runs a Plan with one rank per MPI process (the `mpi` backend of
// `shardc run`; docs/mpi.md).
#pragma once

#include "runtime/Backend.h"
#include "runtime/LocalRun.h"
#include "runtime/Plan.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace shardc::runtime::mpi {

class MpiCommunicator;

/// MPI_Init_thread (once per process); installs a SIGTERM handler that says
/// which rank was killed while waiting in which collective (mpirun kills the
/// job when one rank fails). Returns MPI_COMM_WORLD's size.
int64_t initialize();
/// This process's rank in MPI_COMM_WORLD (initialize() first).
int64_t worldRank();
/// Processes of MPI_COMM_WORLD on this machine (for kernel threads).
int64_t nodeLocalSize();
/// Ends the whole job now with `code` (MPI_Abort): the way out after any
/// failure on one rank, since its peers may be inside a collective.
[[noreturn]] void abortWorld(int code);
/// MPI_Finalize, after a successful run.
void finalize();

/// The OS's view of a process's memory (getrusage ru_maxrss, in bytes).
struct ProcessMemory {
  int64_t peakRssAfterInit = 0;  // high-water mark when init returned
  int64_t peakRss = 0;           // high-water mark at the end of the run
};
int64_t peakRssBytes();

/// What this process's rank runs on: its device and backend, and the
/// communicator the plan's collectives use (null: the MPI communicator
/// itself). runMpi's default is the CPU (CpuDevice, CpuBackend, MPI);
/// runtime/cuda/MpiGpuRank.h makes one GPU per process with NCCL.
struct MpiRankRuntime {
  std::unique_ptr<Device> device;  // first: destroyed after the rest
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Communicator> collectives;
  /// False when storage pointers are device memory: outputs, --save and
  /// --save-params read it through backend->copyToHost.
  bool hostAddressable = true;
};
/// Makes this process's rank (collective over `world`: every rank calls it).
using MpiRankFactory = std::function<MpiRankRuntime(MpiCommunicator &world)>;

/// The rank of this process among the processes of MPI_COMM_WORLD on its
/// machine (which GPU a process takes).
int64_t nodeLocalRank();

struct MpiRunResult {
  /// On rank 0: every rank's report (gathered), the forward outputs and,
  /// with gatherParams, the full params. Elsewhere: this rank's report only.
  RunResult run;
  /// On rank 0: every rank's, in rank order; elsewhere this rank's only.
  std::vector<ProcessMemory> memory;
};

/// Collective over MPI_COMM_WORLD: runs "init" then "forward" (when present)
/// on this process's rank, with collectives bounded by options.timeout.
/// plan.worldSize must equal the MPI world size. First checks that every
/// rank compiled the same plan for the same seed and inputs (one 8-byte
/// all-gather of a hash); afterwards that all ranks' outputs are
/// byte-identical (a hash again). Throws RuntimeError on any failure: the
/// caller must then abortWorld(), never return normally.
///
/// Test hook (docs/mpi.md): when the environment variable
/// SHARDC_TEST_DIE_AT_RANK equals this rank, the process calls _exit(9)
/// after init, before forward's first collective.
///
/// `rankRuntime` makes the device this rank runs on (default: the CPU).
MpiRunResult runMpi(const plan::Plan &plan, const RunOptions &options,
                    const MpiRankFactory &rankRuntime = {});

}  // namespace shardc::runtime::mpi
