// The CPU backend with a `generateMapped` kernel (runtime/Backend.h), as a
// backend that maps index_map indices on its device has (the CUDA one):
// every index is mapped by indexmap::mapIndex, the function CUDA's kernel
// runs, then generated with the CPU's generateAt. The unit tests run the
// core's one-launch path through it, and hold its values and errors to the
// host-mapping path's.
#pragma once

#include "runtime/CpuBackend.h"
#include "runtime/IndexMapProgram.h"

#include <atomic>
#include <vector>

namespace shardc::test {

class DeviceMappingCpuBackend : public runtime::CpuBackend {
public:
  using CpuBackend::CpuBackend;

  bool generateMapped(const runtime::init::GeneratorSpec &spec, plan::DType dtype,
                      const runtime::IndexMapProgram &map, int64_t begin, int64_t count,
                      void *out, int64_t &firstUnmapped) override {
    ++mappedCalls;
    std::vector<int64_t> indices(static_cast<size_t>(count));
    firstUnmapped = -1;
    for (int64_t k = 0; k < count; ++k)
      if (!runtime::indexmap::mapIndex(map, begin + k, &indices[k])) {
        firstUnmapped = k;
        return true;
      }
    generateAt(spec, dtype, indices.data(), count, out);
    return true;
  }

  /// How often the core took the one-launch path.
  std::atomic<int> mappedCalls{0};
};

}  // namespace shardc::test
