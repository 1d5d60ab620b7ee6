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
  explicit CudaBackend(CudaDevice &device) : Backend(device), device_(device) {}

  const char *name() const override { return "cuda"; }
  std::span<const plan::OpCode> unsupportedOps() const override { return kCudaUnsupportedOps; }

  void beforeCollective(Communicator &comm) override;
  void finish(const std::string &what) override;
  SHARDC_BACKEND_KERNELS(, override)
  void crossEntropy(const KTensor &logits, const KTensor &targets, int64_t ignoreIndex,
                    const KTensor &loss) override;
  // The op families (runtime/cuda/CudaFamilies.h).
  void conv(const ConvParams &p, const KTensor &x, const KTensor &w, const KTensor *b,
            const KTensor &y) override;
  void pool(const PoolParams &p, const KTensor &x, const KTensor &y) override;
  void adaptivePool(PoolKind kind, const KTensor &x, const KTensor &y) override;
  void batchNorm(const KTensor &x, const KTensor &mean, const KTensor &var, const KTensor *w,
                 const KTensor *b, double eps, const KTensor &y) override;
  void groupNorm(const KTensor &x, int64_t groups, const KTensor *w, const KTensor *b, double eps,
                 const KTensor &y) override;
  void reduce(ReduceKind kind, const KTensor &x, const std::vector<int64_t> &dims,
              int64_t correction, const KTensor &y) override;
  void unary(UnaryOp op, double a, double b, const KTensor &x, const KTensor &y) override;
  void moeExperts(const MoeParams &p, const KTensor &x, const KTensor &index,
                  const KTensor &weights, const KTensor &gateUp, const KTensor &down,
                  const KTensor &y, std::byte *workspace) override;
  void index(IndexKind kind, const IndexParams &p, const KTensor &x, const KTensor *index,
             const KTensor &y) override;
  /// Host kernels (the CPU's, bit for bit), then copied to the GPU: the
  /// QR of orthogonal and norm_of's replay of its source's init run on the
  /// host in host memory of the output's and workspace's size; the device
  /// workspace the plan allocates stays unused (and accounted).
  void orthogonal(const init::GeneratorSpec &normal, double gain, plan::DType dtype, int64_t rows,
                  int64_t cols, void *out, void *work) override;
  void normOf(const init::NormOfSource &source, const std::vector<int64_t> &dims, int64_t begin,
              int64_t count, plan::DType dtype, void *out, void *work) override;
  /// A rank's rows of a checkpoint tensor: read on the host, copied over.
  void load(const checkpoint::TensorLocation &where, const Region &target, std::byte *io,
            int64_t ioBytes) override;

private:
  CudaDevice &device_;
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
