// The CPU backend: host memory (CpuDevice) and the CPU kernels
// (runtime/Kernels.h, ForwardKernels.h, init/). Supports every op in the
// table. Kernels may use `threads` worker threads (the rank's share of the
// cores); results do not depend on the count.
#pragma once

#include "runtime/Backend.h"

namespace shardc::runtime {

class CpuBackend final : public Backend {
public:
  CpuBackend(CpuDevice &device, int threads) : Backend(device), threads_(threads) {}

  const char *name() const override { return "cpu"; }
  int hostThreads() const override { return threads_; }

  SHARDC_BACKEND_KERNELS(, override)
  void orthogonal(const init::GeneratorSpec &normal, double gain, plan::DType dtype, int64_t rows,
                  int64_t cols, void *out, void *work) override;
  void load(const checkpoint::TensorLocation &where, const Region &target, std::byte *io,
            int64_t ioBytes) override;

  void crossEntropy(const KTensor &logits, const KTensor &targets, int64_t ignoreIndex,
                    const KTensor &loss) override;

private:
  int threads_;
};

}  // namespace shardc::runtime
