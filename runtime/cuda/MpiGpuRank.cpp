#include "runtime/cuda/MpiGpuRank.h"

#include "runtime/RuntimeError.h"
#include "runtime/cuda/CudaExecutor.h"
#include "runtime/cuda/NcclCommunicator.h"
#include "runtime/mpi/MpiCommunicator.h"

#include <cstring>
#include <vector>

namespace shardc::runtime::cuda {

mpi::MpiRankFactory gpuMpiRanks(std::chrono::duration<double> timeout) {
  return [timeout](mpi::MpiCommunicator &world) {
    const int64_t rank = world.rank(), n = world.worldSize();
    std::string why;
    const int visible = visibleDeviceCount(&why);
    // Every rank says whether it has a GPU before any waits for NCCL: one
    // without fails the whole job at once, naming itself.
    const std::vector<uint64_t> counts = world.allGatherU64(static_cast<uint64_t>(visible));
    if (visible == 0)
      throw RuntimeError("--device cuda: no CUDA device visible (" + why + ")");
    for (int64_t r = 0; r < n; ++r)
      if (counts[r] == 0)
        throw RuntimeError("--device cuda: rank " + std::to_string(r) +
                           " sees no CUDA device; every rank needs one");
    const int ordinal = static_cast<int>(mpi::nodeLocalRank() % visible);

    mpi::MpiRankRuntime runtime;
    auto device = std::make_unique<CudaDevice>(ordinal);
    // Rank 0's ncclUniqueId to everyone (an all-gather: MpiCommunicator's
    // collectives are bounded by the timeout; a broadcast would not be).
    ncclUniqueId id{};
    if (rank == 0) id = NcclCommunicator::makeUniqueId();
    std::vector<std::byte> all(sizeof id * static_cast<size_t>(n));
    world.allGather(&id, sizeof id, all.data());
    std::memcpy(&id, all.data(), sizeof id);
    runtime.collectives = NcclCommunicator::createFromUniqueId(
        id, static_cast<int>(rank), static_cast<int>(n), ordinal, timeout);
    runtime.backend = std::make_unique<CudaBackend>(*device);
    runtime.device = std::move(device);
    runtime.hostAddressable = false;
    return runtime;
  };
}

}  // namespace shardc::runtime::cuda
