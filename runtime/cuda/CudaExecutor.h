// The CUDA backend of the executor core (runtime/Executor.h): kernels,
// copies and the stream ordering around collectives, for a rank whose
// memory is a CUDA device. Decoding, validation, buffers, frees, aliases and
// the memory ledger are the core's and Device's, shared with the CPU, so the
// device's accounted peak equals predictMemory's exactly as on the CPU.
// Collectives go through a Communicator whose pointers are device pointers:
// NcclCommunicator for several GPUs, SingleGpuCommunicator for world size 1.
//
// Ops without a CUDA kernel are listed in kCudaUnsupportedOps
// (UnsupportedOps.h, the one place; docs/gpu.md repeats it); the core
// refuses them with the op's name.
#pragma once

#include <algorithm>

#include "runtime/Backend.h"
#include "runtime/Communicator.h"
#include "runtime/Executor.h"
#include "runtime/HostTensor.h"
#include "runtime/Plan.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/UnsupportedOps.h"

#include <span>
#include <string>
#include <vector>

namespace shardc::runtime::cuda {

/// A rank's state between functions is the shared RankState.
using CudaRankState = RankState;

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

class CudaBackend final : public Backend {
public:
  /// `hostThreads`: the threads of orthogonal's QR, which runs on the host.
  /// Not Backend::hostThreads(): the core's host-side index mapping calls
  /// generateAt from that many threads at once, and its staging through
  /// CudaDevice::stageIndices (slots, events) is one thread's.
  explicit CudaBackend(CudaDevice &device, int hostThreads = 1)
      : Backend(device), device_(device), hostThreads_(std::max(1, hostThreads)) {}

  const char *name() const override { return "cuda"; }
  std::span<const plan::OpCode> unsupportedOps() const override { return kCudaUnsupportedOps; }

  void beforeCollective(Communicator &comm) override;
  void finish(const std::string &what) override;
  /// index_map generates in one launch, indices mapped on the device.
  bool generateMapped(const init::GeneratorSpec &spec, plan::DType dtype,
                      const IndexMapProgram &map, int64_t begin, int64_t count, void *out,
                      int64_t &firstUnmapped) override;
  SHARDC_BACKEND_KERNELS(, override)
  // Every optional kernel: the families in runtime/cuda/CudaFamilies.h;
  // orthogonal, norm_of and load run on the host (the CPU's kernels, bit for
  // bit, in host memory of the output's and workspace's size) and copy the
  // result over; the device workspace or io buffer the plan allocates for
  // them stays unused (and accounted).
  SHARDC_BACKEND_OPTIONAL_KERNELS(, override)

private:
  CudaDevice &device_;
  int hostThreads_;
};

/// Runs `function` on state.rank() on the CUDA backend; `inputs[i]` (host)
/// is copied into an io buffer for function.inputs[i]. Returns the outputs
/// copied to the host (the device buffers stay allocated until
/// state.releaseFunctionBuffers()). context.threads is ignored;
/// context.seed keys the generators.
std::vector<HostTensor> executeFunctionCuda(const plan::Plan &plan, const std::string &function,
                                            CudaDevice &device, Communicator &comm,
                                            RankState &state,
                                            const std::vector<HostTensor> &inputs,
                                            const ExecutionContext &context = {});

}  // namespace shardc::runtime::cuda
