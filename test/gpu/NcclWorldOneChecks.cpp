// Sections `nccl1` and `timeout` of shardc-gpu-tests (Sections.h): NCCL at
// world size 1, the only NCCL world one GPU allows (NCCL refuses two ranks
// on one device: "Duplicate GPU detected"; several ranks on one GPU use
// DeviceLocalCommunicator, section `local`).
#include "GpuCheck.h"
#include "Sections.h"
#include "TestPlans.h"

#include "runtime/RuntimeError.h"
#include "runtime/cuda/CudaExecutor.h"
#include "runtime/cuda/NcclCommunicator.h"

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

namespace shardc::gpucheck {
using namespace shardc::runtime;

void ncclWorldOneChecks(cuda::CudaDevice &device) {
  const plan::Plan plan = test::seedPlan(1, 256, 384, 1.5);
  HostTensor x{"x", plan::DType::F32, {1}, std::vector<std::byte>(4)};
  const float xv = 0.25f;
  std::memcpy(x.data.data(), &xv, 4);
  auto run = [&](Communicator &comm) {
    cuda::CudaRankState state(0);
    cuda::executeFunctionCuda(plan, "init", device, comm, state, {});
    state.releaseFunctionBuffers();
    std::vector<HostTensor> out = cuda::executeFunctionCuda(plan, "forward", device, comm, state, {x});
    state.releaseAll();
    return out;
  };
  std::vector<HostTensor> reference;
  guarded("nccl1", "seed plan via SingleGpuCommunicator", [&] {
    cuda::SingleGpuCommunicator single(device);
    reference = run(single);
    // 1.5 + 0.25 everywhere: the reference itself is right.
    bool ok = reference.size() == 1 && reference[0].data.size() == 256 * 384 * 4;
    for (size_t i = 0; ok && i < reference[0].data.size(); i += 4) {
      float v;
      std::memcpy(&v, &reference[0].data[i], 4);
      ok = v == 1.75f;
    }
    report("nccl1", "seed plan via SingleGpuCommunicator", ok, ok ? "y == 1.75 everywhere" : "wrong values");
  });
  guarded("nccl1", "seed plan via NCCL createLocal (N=1)", [&] {
    auto comms = cuda::NcclCommunicator::createLocal({device.ordinal()}, std::chrono::seconds(30));
    const std::vector<HostTensor> b = run(*comms[0]);
    comms[0]->barrier();
    const bool ok = b.size() == 1 && !reference.empty() && b[0].data == reference[0].data;
    report("nccl1", "seed plan via NCCL createLocal (N=1)", ok, ok ? "bit-identical" : "differs");
  });
  guarded("nccl1", "seed plan via createFromUniqueId (N=1)", [&] {
    // The MPI path: non-blocking ncclCommInitRankConfig, world size 1.
    auto comm = cuda::NcclCommunicator::createFromUniqueId(
        cuda::NcclCommunicator::makeUniqueId(), 0, 1, device.ordinal(), std::chrono::seconds(30));
    const std::vector<HostTensor> c = run(*comm);
    comm->barrier();
    const bool ok = c.size() == 1 && !reference.empty() && c[0].data == reference[0].data;
    report("nccl1", "seed plan via createFromUniqueId (N=1)", ok, ok ? "bit-identical" : "differs");
  });
}

void ncclInitTimeoutCheck(cuda::CudaDevice &device) {
  guarded("timeout", "init of rank 0 of 2 alone times out", [&] {
    const auto start = std::chrono::steady_clock::now();
    std::string error;
    try {
      auto comm = cuda::NcclCommunicator::createFromUniqueId(
          cuda::NcclCommunicator::makeUniqueId(), 0, 2, device.ordinal(), std::chrono::seconds(3));
    } catch (const RuntimeError &e) {
      error = e.what();
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    report("timeout", "init of rank 0 of 2 alone times out", !error.empty() && s < 30,
           (error.empty() ? std::string("no error") : error) + " after " + std::to_string(s) + " s");
  });
}

}  // namespace shardc::gpucheck
