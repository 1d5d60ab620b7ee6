// Executes one Function of a Plan on one rank whose memory is a CUDA device.
//
// The same instruction semantics and the same memory behaviour as the CPU
// executor (runtime/Executor.h, docs/plan.md): every alloc/free goes through
// CudaDevice with the label and category MemoryModel predicts, so the
// device's accounted peak equals predictMemory's. Collectives go through a
// Communicator whose pointers are device pointers: NcclCommunicator for
// several GPUs, SingleGpuCommunicator for world size 1.
//
// Supported: alloc, free, fill, generate (index_map included: indices are
// mapped on the host in blocks of 4096 and the values computed on the GPU),
// the pointwise init ops, all_gather (both forms), scatter, add/sub/mul/div,
// embedding, linear, matmul, gelu, silu, relu, layer_norm, rms_norm, softmax,
// sdpa, rope, strided_copy, cat. Not yet: orthogonal and cross_entropy
// (refused with the instruction's place).
#pragma once

#include "runtime/Communicator.h"
#include "runtime/Executor.h"  // ExecutionContext
#include "runtime/HostTensor.h"
#include "runtime/Plan.h"
#include "runtime/cuda/CudaDevice.h"

#include <map>
#include <string>
#include <vector>

namespace shardc::runtime::cuda {

/// What one rank keeps between functions (RankState's GPU twin): param
/// storage and the buffers the last function left allocated.
class CudaRankState {
public:
  explicit CudaRankState(int64_t rank) : rank_(rank) {}
  int64_t rank() const { return rank_; }
  const CudaBuffer *paramStorage(int32_t index) const;
  const std::map<int32_t, CudaBuffer> &params() const { return params_; }
  void releaseFunctionBuffers() { retained_.clear(); }
  void releaseAll() {
    retained_.clear();
    params_.clear();
  }

private:
  friend class CudaFunctionRun;
  int64_t rank_;
  std::map<int32_t, CudaBuffer> params_;
  std::vector<CudaBuffer> retained_;
};

/// World size 1 on one GPU: the collectives are device-to-device copies on
/// the device's stream.
class SingleGpuCommunicator final : public Communicator {
public:
  explicit SingleGpuCommunicator(CudaDevice &device) : device_(device) {}
  int64_t rank() const override { return 0; }
  int64_t worldSize() const override { return 1; }
  void allGather(const void *send, size_t bytesPerRank, void *recv) override;
  void scatter(int64_t root, const void *send, size_t bytesPerRank, void *recv) override;
  void barrier() override;
  std::chrono::duration<double> timeout() const override { return timeout_; }
  void setTimeout(std::chrono::duration<double> timeout) override { timeout_ = timeout; }

private:
  CudaDevice &device_;
  std::chrono::duration<double> timeout_ = std::chrono::seconds(300);
};

/// Runs `function` on state.rank(); `inputs[i]` (host) is copied into an io
/// buffer for function.inputs[i]. Returns the outputs copied to the host
/// (the device buffers stay allocated until state.releaseFunctionBuffers()).
/// context.threads is ignored; context.seed keys the generators.
std::vector<HostTensor> executeFunctionCuda(const plan::Plan &plan, const std::string &function,
                                            CudaDevice &device, Communicator &comm,
                                            CudaRankState &state,
                                            const std::vector<HostTensor> &inputs,
                                            const ExecutionContext &context = {});

}  // namespace shardc::runtime::cuda
