// The sections of shardc-gpu-tests that live in their own files (the
// others are in GpuTests.cpp). Each reports its rows through GpuCheck.h.
#pragma once

#include "runtime/cuda/CudaDevice.h"

#include <string>
#include <vector>

namespace shardc::gpucheck {

/// index64: generator ranges past 2^31 elements and where the Philox block
/// counter's high word turns 1, against CPU windows (ShardedChecks.cpp).
void index64Checks(runtime::cuda::CudaDevice &device);
/// sharded: every generator x dtype at N = 1, 2, 3, 8 ranks (threads, one
/// CudaDevice each, all on device 0), concatenated == CPU N = 1, padding
/// zero, accounted peak == predicted (ShardedChecks.cpp).
void shardedInitChecks();
/// fixes: rope at long positions, NaN through softmax/sdpa maxima, index-map
/// generate through the executor, stream-ordered frees (FixChecks.cpp).
void fixChecks(runtime::cuda::CudaDevice &device);
/// local: the seed case and a gather/scatter round trip at N = 2..8 ranks on
/// one GPU through DeviceLocalCommunicator, per-rank device bytes (ledger,
/// cudaMemGetInfo) beside the prediction (DeviceLocalChecks.cpp).
void deviceLocalChecks();
/// nccl1: the seed plan through NCCL at world size 1, by createLocal and by
/// createFromUniqueId (non-blocking init), == SingleGpuCommunicator.
void ncclWorldOneChecks(runtime::cuda::CudaDevice &device);
/// timeout: createFromUniqueId as rank 0 of 2 with no rank 1 times out.
void ncclInitTimeoutCheck(runtime::cuda::CudaDevice &device);
/// session: LocalSession with every rank on one GPU (CudaSession.h) vs the
/// same session on the CPU: the seed plan at N = 1, 2, 3 and each plan JSON
/// of `planPaths` (int64 inputs drawn below `intBound`): init bit for bit,
/// forward within 2e-4 and repeatable, save byte for byte, peaks ==
/// predicted (SessionChecks.cpp).
void sessionChecks(const std::vector<std::string> &planPaths, int64_t intBound);
/// scale: rank 0 alone of the plan JSON at `planPath` (Llama 3 70B at
/// N = 64) initialized on the GPU: seconds beside cudaMemset of the same
/// bytes, peak == predicted, shards == the host's (ScaleChecks.cpp).
void scaleChecks(const std::string &planPath);
/// gpt2: the plan JSON at `planPath` (GPT-2 124M, world size 1) through
/// init and timed forwards on the GPU; with `exportDir`, its weights, ids
/// and logits go to exportDir/gpt2-shardc.safetensors (Gpt2Bench.cpp).
void gpt2Bench(runtime::cuda::CudaDevice &device, const std::string &planPath,
               const std::string &exportDir);

}  // namespace shardc::gpucheck
