// What every forward kernel file of the CUDA backend shares: the storage
// types (float32, float64 and the 16-bit types widened to float through
// DeviceFloat.h, so stores round exactly as the CPU's), the dtype dispatch,
// the launch shape and the grid-stride loop. CUDA code only (nvcc).
#pragma once

#include "runtime/ForwardChecks.h"
#include "runtime/Plan.h"
#include "runtime/cuda/DeviceFloat.h"

#include <library_types.h>

#include <algorithm>
#include <cstdint>
#include <string>

namespace shardc::runtime::cuda::dev {

inline constexpr int kThreads = 256;
inline constexpr int kMaxRank = 8;

/// cuBLAS's data type for a float storage dtype (float32 otherwise): the
/// GEMMs of linear, matmul and the im2col convolution.
inline cudaDataType_t blasType(plan::DType dtype) {
  switch (dtype) {
  case plan::DType::BF16: return CUDA_R_16BF;
  case plan::DType::F16: return CUDA_R_16F;
  default: return CUDA_R_32F;
  }
}

inline unsigned gridFor(int64_t work) {
  return static_cast<unsigned>(std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, 65536));
}

/// S: the storage type; C: the math type (float for 16-bit storage).
struct F32 {
  using S = float;
  using C = float;
  __device__ static float load(float v) { return v; }
  __device__ static float store(float v) { return v; }
};
struct F64 {
  using S = double;
  using C = double;
  __device__ static double load(double v) { return v; }
  __device__ static double store(double v) { return v; }
};
struct BF16 {
  using S = uint16_t;
  using C = float;
  __device__ static float load(uint16_t v) { return bfloat16BitsToFloatHD(v); }
  __device__ static uint16_t store(float v) { return floatToBFloat16BitsHD(v); }
};
struct F16 {
  using S = uint16_t;
  using C = float;
  __device__ static float load(uint16_t v) { return halfBitsToFloatHD(v); }
  __device__ static uint16_t store(float v) { return floatToHalfBitsHD(v); }
};

/// int64 for add, sub and mul: math in unsigned 64 bits, so it wraps as
/// torch's int64 arithmetic does (the CPU's I64Storage).
struct I64 {
  using S = int64_t;
  using C = unsigned long long;
  __device__ static unsigned long long load(int64_t v) {
    return static_cast<unsigned long long>(v);
  }
  __device__ static int64_t store(unsigned long long v) { return static_cast<int64_t>(v); }
};

/// An output's row-major shape and its two operands' element strides under
/// numpy broadcasting (0 on a broadcast dim), for one thread per element.
struct Broadcast {
  int rank;
  int64_t shape[kMaxRank];
  int64_t aStride[kMaxRank], bStride[kMaxRank];

  /// Element i's offsets in a and b.
  __device__ void offsets(int64_t i, int64_t &ai, int64_t &bi) const {
    int64_t rest = i;
    ai = 0;
    bi = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t idx = rest % shape[d];
      rest /= shape[d];
      ai += idx * aStride[d];
      bi += idx * bStride[d];
    }
  }
};
/// out's rank must be at most kMaxRank (the caller checks, naming its op).
inline Broadcast broadcastFor(const Shape &out, const Shape &a, const Shape &b) {
  Broadcast bc{};
  bc.rank = static_cast<int>(out.size());
  int64_t aStride = 1, bStride = 1;
  for (int d = bc.rank - 1; d >= 0; --d) {
    bc.shape[d] = out[d];
    const int ad = d - (bc.rank - static_cast<int>(a.size()));
    const int bd = d - (bc.rank - static_cast<int>(b.size()));
    const int64_t aDim = ad >= 0 ? a[ad] : 1, bDim = bd >= 0 ? b[bd] : 1;
    bc.aStride[d] = aDim == 1 ? 0 : aStride;
    bc.bStride[d] = bDim == 1 ? 0 : bStride;
    aStride *= aDim;
    bStride *= bDim;
  }
  return bc;
}

/// fn(tag) for float32, bfloat16, float16 storage (and float64 when
/// allowed); any other dtype fails naming the op.
template <typename Fn> void dispatchFloat(const char *op, plan::DType dtype, bool allowF64, Fn &&fn) {
  switch (dtype) {
  case plan::DType::F32: fn(F32{}); return;
  case plan::DType::BF16: fn(BF16{}); return;
  case plan::DType::F16: fn(F16{}); return;
  case plan::DType::F64:
    if (allowF64) {
      fn(F64{});
      return;
    }
    break;
  default: break;
  }
  checks::fail(op, std::string("dtype ") + plan::dtypeName(dtype) + " is not supported");
}

/// fn(static_cast<E *>(nullptr)) with E the unsigned type of `size` bytes
/// (data movement by element size, any dtype).
template <typename Fn> void bySize(int64_t size, Fn &&fn) {
  switch (size) {
  case 1: fn(static_cast<uint8_t *>(nullptr)); break;
  case 2: fn(static_cast<uint16_t *>(nullptr)); break;
  case 4: fn(static_cast<uint32_t *>(nullptr)); break;
  default: fn(static_cast<uint64_t *>(nullptr)); break;
  }
}

/// Element i of a float tensor of any float storage, as double (per-channel
/// parameters may have their own storage beside x's, as on the CPU).
__device__ inline double loadAnyFloat(plan::DType dtype, const void *data, int64_t i) {
  switch (dtype) {
  case plan::DType::F64: return static_cast<const double *>(data)[i];
  case plan::DType::BF16: return bfloat16BitsToFloatHD(static_cast<const uint16_t *>(data)[i]);
  case plan::DType::F16: return halfBitsToFloatHD(static_cast<const uint16_t *>(data)[i]);
  default: return static_cast<const float *>(data)[i];
  }
}

/// Sum of `value` over the block (blockDim.x == kThreads; `shared` holds
/// kThreads doubles); every thread gets it. A fixed tree: deterministic.
__device__ inline double blockSum(double value, double *shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) shared[threadIdx.x] += shared[threadIdx.x + width];
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();
  return total;
}

}  // namespace shardc::runtime::cuda::dev

#define SHARDC_GRID_LOOP(k, count)                                                          \
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < (count); \
       k += static_cast<int64_t>(gridDim.x) * blockDim.x)
