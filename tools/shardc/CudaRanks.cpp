//===- CudaRanks.cpp - the GPU of `shardc run --device cuda` --------------===//
#include "tools/shardc/CudaRanks.h"

#include "runtime/RuntimeError.h"

#ifdef SHARDC_HAVE_CUDA
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaSession.h"
#endif

#include <string>

namespace shardc::cli {

#ifndef SHARDC_HAVE_CUDA
runtime::SessionRankFactory cudaRunRanks(int, int) {
  throw runtime::RuntimeError("--device cuda: this shardc was built without the CUDA runtime");
}
int64_t cudaDeviceMemoryBytes(int ordinal) { return (void)cudaRunRanks(ordinal), 0; }
#else
runtime::SessionRankFactory cudaRunRanks(int ordinal, int hostThreads) {
  try {
    return runtime::cuda::gpuSessionRanks(ordinal, hostThreads);
  } catch (const runtime::RuntimeError &error) {
    throw runtime::RuntimeError(std::string("--device cuda: ") + error.what());
  }
}

int64_t cudaDeviceMemoryBytes(int ordinal) {
  (void)cudaRunRanks(ordinal);  // "no CUDA device visible (...)" first
  return runtime::cuda::CudaDevice(ordinal).memInfo().totalBytes;
}
#endif

} // namespace shardc::cli
