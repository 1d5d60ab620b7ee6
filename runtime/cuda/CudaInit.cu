// Init kernels. One thread computes one Philox block (4 float32-path or 2
// float64-path elements) exactly as scalarBlocksF/scalarBlocksD do, and
// stores the elements of the block that fall in the requested range; the
// formula generators (fill, eye, arange) compute one element per thread.
// Compiled with --fmad=false (runtime/cuda/CMakeLists.txt).
#include "runtime/cuda/CudaInit.h"

#include "runtime/IndexMapProgram.h"
#include "runtime/RuntimeError.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/DeviceFloat.h"
#include "runtime/init/PreparedGenerator.h"
#include "runtime/init/Recipes.h"

#include <algorithm>
#include <climits>
#include <string>

namespace shardc::runtime::cuda {
using init::GeneratorKind;
using init::PreparedGenerator;
using plan::DType;

namespace {

constexpr int kThreads = 256;

/// Enough blocks to fill the GPU several times over; the kernels loop.
unsigned gridFor(int64_t work) {
  int64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, 65536));
}

__device__ inline void storeFloat(DType dtype, void *out, int64_t k, float value) {
  switch (dtype) {
  case DType::F32: static_cast<float *>(out)[k] = value; break;
  case DType::F16: static_cast<uint16_t *>(out)[k] = floatToHalfBitsHD(value); break;
  case DType::BF16: static_cast<uint16_t *>(out)[k] = floatToBFloat16BitsHD(value); break;
  default: break;
  }
}

__device__ inline void storeDouble(DType dtype, void *out, int64_t k, double value) {
  switch (dtype) {
  case DType::F32: static_cast<float *>(out)[k] = static_cast<float>(value); break;
  case DType::F64: static_cast<double *>(out)[k] = value; break;
  case DType::F16: static_cast<uint16_t *>(out)[k] = doubleToHalfBitsHD(value); break;
  case DType::BF16: static_cast<uint16_t *>(out)[k] = doubleToBFloat16BitsHD(value); break;
  default: break;
  }
}

/// The 4 float32-path values of Philox block `block` (scalarBlocksF).
__device__ inline void blockValuesF(const PreparedGenerator &g, uint64_t block, float v[4]) {
  philox::Counter w = init::blockWords(g.stream, block);
  switch (g.kind) {
  case GeneratorKind::Uniform:
    for (int j = 0; j < 4; ++j) v[j] = init::uniformValueF(g.uniformF, w.v[j]);
    break;
  case GeneratorKind::Normal:
    init::normalPairF(g.normalF, w.v[0], w.v[1], &v[0], &v[1]);
    init::normalPairF(g.normalF, w.v[2], w.v[3], &v[2], &v[3]);
    break;
  case GeneratorKind::TruncNormal:
    for (int j = 0; j < 4; ++j) v[j] = init::truncNormalValueF(g.truncF, w.v[j]);
    break;
  default:
    for (int j = 0; j < 4; ++j) v[j] = 0;
    break;
  }
}

/// The 2 float64-path values of block `block` (scalarBlocksD).
__device__ inline void blockValuesD(const PreparedGenerator &g, uint64_t block, double v[2]) {
  philox::Counter w = init::blockWords(g.stream, block);
  switch (g.kind) {
  case GeneratorKind::Uniform:
    v[0] = init::uniformValueD(g.uniformD, w.v[0], w.v[1]);
    v[1] = init::uniformValueD(g.uniformD, w.v[2], w.v[3]);
    break;
  case GeneratorKind::Normal: init::normalPairD(g.normalD, w, &v[0], &v[1]); break;
  case GeneratorKind::TruncNormal:
    v[0] = init::truncNormalValueD(g.truncD, w.v[0], w.v[1]);
    v[1] = init::truncNormalValueD(g.truncD, w.v[2], w.v[3]);
    break;
  default: v[0] = v[1] = 0; break;
  }
}

/// Elements [begin, begin + count) of a float32-path generator.
__global__ void randomRangeF(PreparedGenerator g, DType dtype, int64_t begin, int64_t count,
                             void *out, bool vectorized) {
  const int64_t firstBlock = begin / 4, lastBlock = (begin + count - 1) / 4;
  const int64_t blocks = lastBlock - firstBlock + 1;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < blocks;
       t += stride) {
    const int64_t block = firstBlock + t;
    float v[4];
    blockValuesF(g, static_cast<uint64_t>(block), v);
    const int64_t e0 = block * 4 - begin;  // output index of the block's first element
    if (vectorized && e0 >= 0 && e0 + 4 <= count) {
      // begin % 4 == 0 and an aligned output: one 16-byte (8-byte) store.
      if (dtype == DType::F32) {
        reinterpret_cast<float4 *>(out)[e0 / 4] = make_float4(v[0], v[1], v[2], v[3]);
      } else {
        uint16_t h[4];
        for (int j = 0; j < 4; ++j)
          h[j] = dtype == DType::F16 ? floatToHalfBitsHD(v[j]) : floatToBFloat16BitsHD(v[j]);
        reinterpret_cast<uint2 *>(out)[e0 / 4] =
            make_uint2(h[0] | (static_cast<uint32_t>(h[1]) << 16),
                       h[2] | (static_cast<uint32_t>(h[3]) << 16));
      }
      continue;
    }
    for (int j = 0; j < 4; ++j) {
      const int64_t k = e0 + j;
      if (k >= 0 && k < count) storeFloat(dtype, out, k, v[j]);
    }
  }
}

__global__ void randomRangeD(PreparedGenerator g, int64_t begin, int64_t count, double *out,
                             bool vectorized) {
  const int64_t firstBlock = begin / 2, lastBlock = (begin + count - 1) / 2;
  const int64_t blocks = lastBlock - firstBlock + 1;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < blocks;
       t += stride) {
    const int64_t block = firstBlock + t;
    double v[2];
    blockValuesD(g, static_cast<uint64_t>(block), v);
    const int64_t e0 = block * 2 - begin;
    if (vectorized && e0 >= 0 && e0 + 2 <= count) {
      reinterpret_cast<double2 *>(out)[e0 / 2] = make_double2(v[0], v[1]);
      continue;
    }
    for (int j = 0; j < 2; ++j) {
      const int64_t k = e0 + j;
      if (k >= 0 && k < count) out[k] = v[j];
    }
  }
}

/// fill, eye, arange (Generators.cpp's formulaValue), one element per thread.
__device__ inline double formulaValue(const PreparedGenerator &g, int64_t index) {
  switch (g.kind) {
  case GeneratorKind::Fill: return g.fillValue;
  case GeneratorKind::Eye: return index / g.eyeColumns == index % g.eyeColumns ? 1.0 : 0.0;
  case GeneratorKind::Arange:
    return init::math::fmaD(static_cast<double>(index), g.step, g.start);
  default: return 0;
  }
}

__global__ void formulaRange(PreparedGenerator g, DType dtype, int64_t begin, int64_t count,
                             void *out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < count;
       k += stride)
    storeDouble(dtype, out, k, formulaValue(g, begin + k));
}

/// Source element `index` of the generator into out[k]: a formula's value,
/// or the element of the Philox block it falls in (generateAt's values).
__device__ inline void storeGenerated(const PreparedGenerator &g, DType dtype, bool random,
                                      int64_t index, void *out, int64_t k) {
  if (!random) {
    storeDouble(dtype, out, k, formulaValue(g, index));
  } else if (dtype == DType::F64) {
    double v[2];
    blockValuesD(g, static_cast<uint64_t>(index / 2), v);
    static_cast<double *>(out)[k] = v[index % 2];
  } else {
    float v[4];
    blockValuesF(g, static_cast<uint64_t>(index / 4), v);
    storeFloat(dtype, out, k, v[index % 4]);
  }
}

__device__ inline bool isRandomKind(GeneratorKind kind) {
  return kind == GeneratorKind::Uniform || kind == GeneratorKind::Normal ||
         kind == GeneratorKind::TruncNormal;
}

/// generateAt: any indices (a view's), one element per thread.
__global__ void gatherElements(PreparedGenerator g, DType dtype, const int64_t *indices,
                               int64_t count, void *out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const bool random = isRandomKind(g.kind);
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < count;
       k += stride)
    storeGenerated(g, dtype, random, indices[k], out, k);
}

/// generateMapped: each thread maps its own output elements through the
/// index_map (indexmap::mapIndex, the function the host's tests check) and
/// generates them; the first element that does not map is recorded.
__global__ void mappedElements(PreparedGenerator g, DType dtype, IndexMapProgram map,
                               int64_t begin, int64_t count, void *out,
                               unsigned long long *firstUnmapped) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const bool random = isRandomKind(g.kind);
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < count;
       k += stride) {
    int64_t index = 0;
    if (!indexmap::mapIndex(map, begin + k, &index)) {
      atomicMin(firstUnmapped, static_cast<unsigned long long>(k));
      continue;
    }
    storeGenerated(g, dtype, random, index, out, k);
  }
}
// Both travel as kernel parameters (4 KiB at most on every architecture).
static_assert(sizeof(IndexMapProgram) + sizeof(PreparedGenerator) + 64 <= 4096);

// ---- pointwise (Pointwise.cpp's pointwiseValue) ------------------------------

template <typename Value>
__device__ inline Value pointwiseValue(init::PointwiseKind kind, Value a, Value b, Value x) {
  using K = init::PointwiseKind;
  switch (kind) {
  case K::Mul: return x * a;
  case K::Add: return x + a;
  case K::Sub: return x - a;
  case K::Div: return x / a;
  case K::Clamp:
    x = x < a ? a : x;
    return x > b ? b : x;
  case K::Erfinv:
    if constexpr (sizeof(Value) == 4) return init::math::erfinvF(x);
    else return init::math::erfinvD(x);
  case K::Sqrt:
    if constexpr (sizeof(Value) == 4) return init::math::sqrtF(x);
    else return init::math::sqrtD(x);
  case K::Neg: return -x;
  case K::Exp:
    if constexpr (sizeof(Value) == 4) return init::math::expAnyF(x);
    else return init::math::expAnyD(x);
  case K::Log:
    if constexpr (sizeof(Value) == 4) return init::math::logAnyF(x);
    else return init::math::logAnyD(x);
  case K::Expm1:
    if constexpr (sizeof(Value) == 4) return init::math::expm1AnyF(x);
    else return init::math::expm1AnyD(x);
  case K::InverseSoftplus:
    if constexpr (sizeof(Value) == 4) return init::math::inverseSoftplusF(x);
    else return init::math::inverseSoftplusD(x);
  }
  return x;
}

__global__ void pointwiseKernel(init::PointwiseKind kind, double a, double b, float af, float bf,
                                DType dtype, void *data, int64_t count) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < count;
       k += stride) {
    switch (dtype) {
    case DType::F32: {
      float *v = static_cast<float *>(data) + k;
      *v = pointwiseValue<float>(kind, af, bf, *v);
      break;
    }
    case DType::F64: {
      double *v = static_cast<double *>(data) + k;
      *v = pointwiseValue<double>(kind, a, b, *v);
      break;
    }
    case DType::F16: {
      uint16_t *v = static_cast<uint16_t *>(data) + k;
      *v = floatToHalfBitsHD(pointwiseValue<float>(kind, af, bf, halfBitsToFloatHD(*v)));
      break;
    }
    case DType::BF16: {
      uint16_t *v = static_cast<uint16_t *>(data) + k;
      *v = floatToBFloat16BitsHD(pointwiseValue<float>(kind, af, bf, bfloat16BitsToFloatHD(*v)));
      break;
    }
    default: break;
    }
  }
}

template <typename T> __global__ void fillKernel(T *data, int64_t count, T value) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < count;
       k += stride)
    data[k] = value;
}

bool isFloatDType(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::F16 || dtype == DType::BF16;
}

void requireFloatDType(DType dtype, const char *what) {
  if (!isFloatDType(dtype))
    throw RuntimeError(std::string(what) + ": dtype " + plan::dtypeName(dtype) +
                       " is not a floating-point type (init generators produce float32/64, "
                       "float16, bfloat16)");
}

void checkIndex(const init::GeneratorSpec &spec, const PreparedGenerator &g, int64_t index,
                const char *what) {
  if (index < 0 || index >= g.elements)
    throw RuntimeError(std::string("init generator '") + init::generatorKindName(spec.kind) +
                       "': " + what + " " + std::to_string(index) +
                       " is outside the tensor's " + std::to_string(g.elements) + " elements");
}

bool aligned(const void *p, size_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

}  // namespace

void generateRange(CudaDevice &device, const init::GeneratorSpec &spec, DType dtype,
                   int64_t begin, int64_t count, void *out) {
  PreparedGenerator g = init::prepareGenerator(spec);
  requireFloatDType(dtype, "init generator");
  if (count < 0)
    throw RuntimeError("init generator: negative element count " + std::to_string(count));
  if (count == 0) return;
  checkIndex(spec, g, begin, "range start");
  checkIndex(spec, g, begin + count - 1, "range end");
  device.makeCurrent();
  cudaStream_t stream = device.stream();
  if (!init::isRandom(g.kind)) {
    formulaRange<<<gridFor(count), kThreads, 0, stream>>>(g, dtype, begin, count, out);
  } else if (dtype == DType::F64) {
    const bool vectorized = begin % 2 == 0 && aligned(out, 16);
    randomRangeD<<<gridFor((count + 3) / 2), kThreads, 0, stream>>>(
        g, begin, count, static_cast<double *>(out), vectorized);
  } else {
    const bool vectorized =
        begin % 4 == 0 && aligned(out, dtype == DType::F32 ? 16 : 8);
    randomRangeF<<<gridFor((count + 7) / 4), kThreads, 0, stream>>>(g, dtype, begin, count, out,
                                                                     vectorized);
  }
  checkLaunch(std::string("init generator '") + init::generatorKindName(spec.kind) +
              "' kernel launch");
}

void generateAtDevice(CudaDevice &device, const init::GeneratorSpec &spec, DType dtype,
                      const int64_t *deviceIndices, int64_t count, void *out) {
  PreparedGenerator g = init::prepareGenerator(spec);
  requireFloatDType(dtype, "init generator");
  if (count <= 0) return;
  device.makeCurrent();
  gatherElements<<<gridFor(count), kThreads, 0, device.stream()>>>(g, dtype, deviceIndices,
                                                                   count, out);
  checkLaunch(std::string("init generator '") + init::generatorKindName(spec.kind) +
              "' gather kernel launch");
}

int64_t generateMapped(CudaDevice &device, const init::GeneratorSpec &spec, DType dtype,
                       const IndexMapProgram &map, int64_t begin, int64_t count, void *out) {
  PreparedGenerator g = init::prepareGenerator(spec);
  requireFloatDType(dtype, "init generator");
  if (count <= 0) return -1;
  auto *firstUnmapped = static_cast<unsigned long long *>(device.scratch(8));
  device.makeCurrent();
  checkCuda(cudaMemsetAsync(firstUnmapped, 0xff, 8, device.stream()),
            "init generator: cudaMemsetAsync");
  mappedElements<<<gridFor(count), kThreads, 0, device.stream()>>>(g, dtype, map, begin, count,
                                                                   out, firstUnmapped);
  checkLaunch(std::string("init generator '") + init::generatorKindName(spec.kind) +
              "' mapped kernel launch");
  unsigned long long first = 0;
  copyToHost(device, &first, firstUnmapped, sizeof first);  // waits for the kernel
  return first == ULLONG_MAX ? -1 : static_cast<int64_t>(first);
}

void applyPointwise(CudaDevice &device, init::PointwiseKind kind, double a, double b,
                    DType dtype, void *data, int64_t count) {
  if (static_cast<int>(kind) < 0 || static_cast<int>(kind) > static_cast<int>(init::kLastPointwiseKind))
    throw RuntimeError("init pointwise: unknown op " + std::to_string(static_cast<int>(kind)));
  if (count < 0)
    throw RuntimeError(std::string("init pointwise '") + init::pointwiseKindName(kind) +
                       "': negative element count " + std::to_string(count));
  if (!isFloatDType(dtype))
    throw RuntimeError(std::string("init pointwise '") + init::pointwiseKindName(kind) +
                       "': dtype " + plan::dtypeName(dtype) + " is not a floating-point type");
  if (count == 0) return;
  device.makeCurrent();
  pointwiseKernel<<<gridFor(count), kThreads, 0, device.stream()>>>(
      kind, a, b, static_cast<float>(a), static_cast<float>(b), dtype, data, count);
  checkLaunch(std::string("init pointwise '") + init::pointwiseKindName(kind) + "' kernel launch");
}

void fill(CudaDevice &device, DType dtype, void *data, int64_t elements, double value) {
  if (elements <= 0) return;
  device.makeCurrent();
  cudaStream_t stream = device.stream();
  const unsigned grid = gridFor(elements);
  switch (dtype) {
  case DType::F32:
    fillKernel<float><<<grid, kThreads, 0, stream>>>(static_cast<float *>(data), elements,
                                                     static_cast<float>(value));
    break;
  case DType::F64:
    fillKernel<double><<<grid, kThreads, 0, stream>>>(static_cast<double *>(data), elements, value);
    break;
  case DType::F16:
    fillKernel<uint16_t><<<grid, kThreads, 0, stream>>>(
        static_cast<uint16_t *>(data), elements, floatToHalfBitsHD(static_cast<float>(value)));
    break;
  case DType::BF16:
    fillKernel<uint16_t><<<grid, kThreads, 0, stream>>>(
        static_cast<uint16_t *>(data), elements, floatToBFloat16BitsHD(static_cast<float>(value)));
    break;
  case DType::I64:
    fillKernel<int64_t><<<grid, kThreads, 0, stream>>>(static_cast<int64_t *>(data), elements,
                                                       static_cast<int64_t>(value));
    break;
  }
  checkLaunch("fill kernel launch");
}

void shardedFill(CudaDevice &device, DType dtype, void *data, int64_t localElements,
                 int64_t validRows, int64_t rowElements, double value) {
  const int64_t valid = std::clamp<int64_t>(validRows * rowElements, 0, localElements);
  fill(device, dtype, data, valid, value);
  zeroBytes(device, static_cast<std::byte *>(data) + valid * plan::dtypeSize(dtype),
            (localElements - valid) * plan::dtypeSize(dtype));
}

void zeroBytes(CudaDevice &device, void *data, int64_t bytes) {
  if (bytes <= 0) return;
  device.makeCurrent();
  checkCuda(cudaMemsetAsync(data, 0, static_cast<size_t>(bytes), device.stream()),
            "cudaMemsetAsync");
}

}  // namespace shardc::runtime::cuda
