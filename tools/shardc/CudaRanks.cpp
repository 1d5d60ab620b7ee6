//===- CudaRanks.cpp - the GPU of `shardc run --device cuda` --------------===//
#include "tools/shardc/CudaRanks.h"

#include "runtime/RuntimeError.h"

#ifdef SHARDC_HAVE_CUDA
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaSession.h"
#endif

#include <string>

namespace shardc::cli {

namespace {
constexpr int kOrdinal = 0;
}  // namespace

#ifndef SHARDC_HAVE_CUDA
runtime::SessionRankFactory cudaRunRanks() {
  throw runtime::RuntimeError("--device cuda: this shardc was built without the CUDA runtime");
}
int64_t cudaDeviceMemoryBytes() { return (void)cudaRunRanks(), 0; }
#else
runtime::SessionRankFactory cudaRunRanks() {
  try {
    return runtime::cuda::gpuSessionRanks(kOrdinal);
  } catch (const runtime::RuntimeError &error) {
    throw runtime::RuntimeError(std::string("--device cuda: ") + error.what());
  }
}

int64_t cudaDeviceMemoryBytes() {
  (void)cudaRunRanks();  // "no CUDA device visible (...)" first
  return runtime::cuda::CudaDevice(kOrdinal).memInfo().totalBytes;
}
#endif

} // namespace shardc::cli
