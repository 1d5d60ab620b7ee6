// The unit tests run the backend suite (BackendSuiteTest.cpp) on the CPU.
#include "BackendSuite.h"

#include "runtime/CpuBackend.h"
#include "runtime/LocalCommunicator.h"

namespace shardc::test::suite {

std::vector<BackendUnderTest> backendsUnderTest() {
  return {{"cpu", [] {
             BackendInstance instance;
             auto device = std::make_unique<runtime::CpuDevice>();
             instance.backend = std::make_unique<runtime::CpuBackend>(*device, 2);
             instance.device = std::move(device);
             auto group = std::make_shared<runtime::LocalGroup>(1);
             instance.comm = std::make_unique<runtime::LocalCommunicator>(*group, 0);
             instance.context = group;
             return instance;
           }}};
}

}  // namespace shardc::test::suite
