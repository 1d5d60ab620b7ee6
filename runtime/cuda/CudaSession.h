// Ranks of a LocalSession (runtime/LocalSession.h) sharing one GPU: each
// rank its own CudaDevice (stream, exact ledger) on one ordinal, the CUDA
// backend's kernels, the local rendezvous with device-to-device copies
// between them (DeviceLocalCommunicator's; NCCL refuses two ranks on one
// device). The JIT API's CompiledModel with device "cuda" holds its shards
// in such ranks, and `shardc run --device cuda` runs runLocal on them.
#pragma once

#include "runtime/SessionRank.h"

namespace shardc::runtime::cuda {

/// Throws RuntimeError ("no CUDA device visible (...)", or the ordinal out
/// of range) before any rank is made. `hostThreads`: each rank's threads for
/// the ops a GPU rank runs on the host (orthogonal init's QR, which is
/// bit-identical for any count); 0 = this machine's cores.
SessionRankFactory gpuSessionRanks(int ordinal = 0, int hostThreads = 0);

}  // namespace shardc::runtime::cuda
