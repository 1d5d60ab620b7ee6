#include "runtime/cuda/DeviceLocalCommunicator.h"

#include "runtime/cuda/CudaCheck.h"

namespace shardc::runtime::cuda {

void StreamCopier::copy(void *dst, const void *src, size_t bytes) {
  if (bytes == 0) return;
  device_.makeCurrent();
  checkCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, device_.stream()),
            "device-local collective: cudaMemcpyAsync");
}

void StreamCopier::flush() { device_.synchronize("device-local collective"); }

}  // namespace shardc::runtime::cuda
