#include "jit/JitDevice.h"

#include "shardc/jit.h"

#include "runtime/DeviceName.h"
#include "runtime/RuntimeError.h"

#ifdef SHARDC_HAVE_CUDA
#include "runtime/cuda/CudaSession.h"
#endif

namespace shardc::detail {

void checkDevice(const std::string &device) { (void)sessionRanks(device); }

runtime::SessionRankFactory sessionRanks(const std::string &device) {
  if (device == "cpu") return {};
  const std::optional<int> ordinal = runtime::cudaOrdinalOf(device);
  if (!ordinal)
    throw Error("jit: device '" + device +
                "' is not one of cpu, cuda, cuda:N; parameters keep their original device "
                "whatever runs them");
#ifdef SHARDC_HAVE_CUDA
  try {
    return runtime::cuda::gpuSessionRanks(*ordinal);
  } catch (const runtime::RuntimeError &error) {
    throw Error("jit: device '" + device + "': " + error.what());
  }
#else
  throw Error("jit: device '" + device +
              "': this shardc was built without the CUDA runtime (the CUDA toolkit was not "
              "found when it was configured; docs/gpu.md)");
#endif
}

}  // namespace shardc::detail
