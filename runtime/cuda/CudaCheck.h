// Turning CUDA, cuBLAS and NCCL status codes into RuntimeError with the
// call that failed and the library's own message (docs/design.md invariant 5).
#pragma once

#include "runtime/RuntimeError.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

namespace shardc::runtime::cuda {

inline void checkCuda(cudaError_t status, const std::string &what) {
  if (status != cudaSuccess)
    throw RuntimeError(what + ": CUDA error " + cudaGetErrorName(status) + " (" +
                       cudaGetErrorString(status) + ")");
}

inline const char *cublasStatusName(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
  case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
  case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
  case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  default: return "CUBLAS_STATUS_(other)";
  }
}

inline void checkCublas(cublasStatus_t status, const std::string &what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw RuntimeError(what + ": cuBLAS error " + cublasStatusName(status));
}

inline void checkNccl(ncclResult_t status, const std::string &what) {
  if (status != ncclSuccess && status != ncclInProgress)
    throw RuntimeError(what + ": NCCL error " + std::to_string(static_cast<int>(status)) + " (" +
                       ncclGetErrorString(status) + ")");
}

/// The kernel launch just made: a bad configuration shows up here.
inline void checkLaunch(const std::string &what) { checkCuda(cudaGetLastError(), what); }

}  // namespace shardc::runtime::cuda
