// Ranks of a LocalSession (runtime/LocalSession.h) sharing one GPU: each
// rank its own CudaDevice (stream, exact ledger) on one ordinal, the CUDA
// backend's kernels, DeviceLocalCommunicator between them (NCCL refuses two
// ranks on one device). runOnOneGpu's arrangement, kept between calls: the
// JIT API's CompiledModel with device "cuda" and `shardc run --device cuda`
// hold their shards in it.
#pragma once

#include "runtime/SessionRank.h"

namespace shardc::runtime::cuda {

/// Throws RuntimeError ("no CUDA device visible (...)", or the ordinal out
/// of range) before any rank is made.
SessionRankFactory gpuSessionRanks(int ordinal = 0);

}  // namespace shardc::runtime::cuda
