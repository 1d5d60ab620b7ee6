// SHARDC_HOST_DEVICE: marks the inline functions that the CPU kernels and
// the CUDA kernels share (__host__ __device__ under nvcc, nothing elsewhere).
#pragma once

#ifndef SHARDC_HOST_DEVICE
#if defined(__CUDACC__)
#define SHARDC_HOST_DEVICE __host__ __device__
#else
#define SHARDC_HOST_DEVICE
#endif
#endif
