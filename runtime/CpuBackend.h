// The CPU backend: host memory (CpuDevice) and the CPU kernels
// (runtime/Kernels.h, ForwardKernels.h, init/). Supports every op in the
// table. Kernels may use `threads` worker threads (the rank's share of the
// cores); results do not depend on the count.
#pragma once

#include "runtime/Backend.h"

namespace shardc::runtime {

class CpuBackend : public Backend {
public:
  CpuBackend(CpuDevice &device, int threads) : Backend(device), threads_(threads) {}

  const char *name() const override { return "cpu"; }
  int hostThreads() const override { return threads_; }

  SHARDC_BACKEND_KERNELS(, override)
  // Its optional kernels too; the families' in runtime/cpu/FamilyKernels.h.
  SHARDC_BACKEND_OPTIONAL_KERNELS(, override)

private:
  int threads_;
};

}  // namespace shardc::runtime
