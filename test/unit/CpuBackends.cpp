// The unit tests run the backend suite (BackendSuiteTest.cpp) on the CPU:
// the CPU backend itself, and the CPU backend with an unsupported list.
// Every op has a kernel on the CPU and CUDA backends, so that second one is
// what exercises the core's refusal of an op a backend lacks: such a case
// must fail naming the op and the backend, before anything runs. It also
// maps index_map indices as a device would (DeviceMappingCpuBackend.h), so
// the suite's index_map cases run the core's one-launch path too.
#include "BackendSuite.h"
#include "DeviceMappingCpuBackend.h"

#include "runtime/CpuBackend.h"
#include "runtime/LocalCommunicator.h"

namespace shardc::test::suite {

namespace {

class PartialCpuBackend final : public DeviceMappingCpuBackend {
public:
  using DeviceMappingCpuBackend::DeviceMappingCpuBackend;
  const char *name() const override { return "cpu-partial"; }
  std::span<const plan::OpCode> unsupportedOps() const override { return kLacking; }

private:
  static constexpr plan::OpCode kLacking[] = {plan::OpCode::Orthogonal, plan::OpCode::NormOf,
                                              plan::OpCode::MoeExperts, plan::OpCode::Gather};
};

BackendUnderTest partialCpuBackendUnderTest() {
  return {"cpu-partial", [] {
            BackendInstance instance;
            auto device = std::make_unique<runtime::CpuDevice>();
            instance.backend = std::make_unique<PartialCpuBackend>(*device, 1);
            instance.device = std::move(device);
            auto group = std::make_shared<runtime::LocalGroup>(1);
            instance.comm = std::make_unique<runtime::LocalCommunicator>(*group, 0);
            instance.context = group;
            return instance;
          }};
}

}  // namespace

std::vector<BackendUnderTest> backendsUnderTest() {
  // Two kernel threads: the parallel paths too.
  return {cpuBackendUnderTest(2), partialCpuBackendUnderTest()};
}

}  // namespace shardc::test::suite
