// shardc-gpu-tests runs the backend suite (test/unit/BackendSuiteTest.cpp)
// on the CUDA backend of device 0, at world size 1.
#include "BackendSuite.h"

#include "runtime/cuda/CudaExecutor.h"

namespace shardc::test::suite {

std::vector<BackendUnderTest> backendsUnderTest() {
  if (runtime::cuda::visibleDeviceCount() == 0) return {};
  return {{"cuda", [] {
             BackendInstance instance;
             auto device = std::make_unique<runtime::cuda::CudaDevice>(0);
             instance.backend = std::make_unique<runtime::cuda::CudaBackend>(*device);
             instance.comm = std::make_unique<runtime::cuda::SingleGpuCommunicator>(*device);
             instance.device = std::move(device);
             return instance;
           }}};
}

}  // namespace shardc::test::suite
