#include "jit/JitDevice.h"

#include "shardc/jit.h"

#include "runtime/RuntimeError.h"

#ifdef SHARDC_HAVE_CUDA
#include "runtime/cuda/CudaSession.h"
#endif

#include <charconv>

namespace shardc::detail {

namespace {

/// The ordinal of "cuda" (0) or "cuda:N"; -1 for anything else.
int cudaOrdinal(const std::string &device) {
  if (device == "cuda") return 0;
  const std::string prefix = "cuda:";
  if (device.rfind(prefix, 0) != 0 || device.size() == prefix.size()) return -1;
  int ordinal = -1;
  const char *first = device.data() + prefix.size(), *last = device.data() + device.size();
  auto [end, error] = std::from_chars(first, last, ordinal);
  return error == std::errc() && end == last && ordinal >= 0 ? ordinal : -1;
}

}  // namespace

void checkDevice(const std::string &device) { (void)sessionRanks(device); }

runtime::SessionRankFactory sessionRanks(const std::string &device) {
  if (device == "cpu") return {};
  const int ordinal = cudaOrdinal(device);
  if (ordinal < 0)
    throw Error("jit: device '" + device +
                "' is not one of cpu, cuda, cuda:N; parameters keep their original device "
                "whatever runs them");
#ifdef SHARDC_HAVE_CUDA
  try {
    return runtime::cuda::gpuSessionRanks(ordinal);
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
