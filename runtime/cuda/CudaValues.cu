// The integer-value families on a CUDA device: comparisons, dtype casts and
// cumsum (runtime/OpFamilies.h), with the CPU kernels' conversions
// (runtime/cpu/ValueKernels.cpp) written as device code, so results are
// bit-identical to the CPU's: they only compare, convert once, and (cumsum)
// add in the CPU's order, one thread per line.
#include "runtime/cuda/CudaFamilies.h"

#include "runtime/DropoutMask.h"
#include "runtime/ForwardChecks.h"
#include "runtime/ValueRules.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/DeviceStorage.cuh"

#include <string>
#include <type_traits>

namespace shardc::runtime::cuda {
using plan::DType;

namespace {

using namespace dev;

/// Element i of any dtype as double (exact for every float dtype).
__device__ double loadValue(DType dtype, const void *data, int64_t i) {
  if (dtype == DType::I64) return static_cast<double>(static_cast<const int64_t *>(data)[i]);
  return loadAnyFloat(dtype, data, i);
}

/// v into element i of a float dtype: to float first for 32- and 16-bit
/// storage (c10's conversions; runtime/InitOps.cpp's storeFromDouble).
__device__ void storeFloatValue(DType dtype, void *data, int64_t i, double v) {
  switch (dtype) {
  case DType::F64: static_cast<double *>(data)[i] = v; return;
  case DType::BF16:
    static_cast<uint16_t *>(data)[i] = floatToBFloat16BitsHD(static_cast<float>(v));
    return;
  case DType::F16:
    static_cast<uint16_t *>(data)[i] = floatToHalfBitsHD(static_cast<float>(v));
    return;
  default: static_cast<float *>(data)[i] = static_cast<float>(v); return;
  }
}

/// v rounded to `dtype` (a float dtype), as double.
__device__ double roundedTo(DType dtype, double v) {
  switch (dtype) {
  case DType::F64: return v;
  case DType::BF16: return bfloat16BitsToFloatHD(floatToBFloat16BitsHD(static_cast<float>(v)));
  case DType::F16: return halfBitsToFloatHD(floatToHalfBitsHD(static_cast<float>(v)));
  default: return static_cast<float>(v);
  }
}

/// The scalar form: `intValue` set when a is int64 and value an integer.
__global__ void compareScalarKernel(CompareOp op, DType dtype, const void *a, bool intValue,
                                    int64_t valueInt, double value, int64_t *y, int64_t count) {
  const DType common = dtype == DType::I64 ? DType::F32 : dtype;
  const double v = roundedTo(common, value);
  SHARDC_GRID_LOOP(i, count) {
    y[i] = intValue ? values::compare(op, static_cast<const int64_t *>(a)[i], valueInt)
                    : values::compare(op, roundedTo(common, loadValue(dtype, a, i)), v);
  }
}

__global__ void compareKernel(CompareOp op, DType dtype, Broadcast bc, const void *a,
                              const void *b, int64_t *y, int64_t count) {
  SHARDC_GRID_LOOP(i, count) {
    int64_t ai, bi;
    bc.offsets(i, ai, bi);
    y[i] = dtype == DType::I64
               ? values::compare(op, static_cast<const int64_t *>(a)[ai],
                              static_cast<const int64_t *>(b)[bi])
               : values::compare(op, loadValue(dtype, a, ai), loadValue(dtype, b, bi));
  }
}

/// cond's and a's offsets from `condA`, b's from `bOnly` (b against itself).
template <typename E>
__global__ void whereKernel(Broadcast condA, Broadcast bOnly, const int64_t *cond, const E *a,
                            const E *b, E *y, int64_t count) {
  SHARDC_GRID_LOOP(i, count) {
    int64_t ci, ai, bi, unused;
    condA.offsets(i, ci, ai);
    bOnly.offsets(i, bi, unused);
    y[i] = cond[ci] != 0 ? a[ai] : b[bi];
  }
}

__global__ void castKernel(DType from, const void *x, DType to, void *y, int64_t count) {
  SHARDC_GRID_LOOP(i, count) {
    if (from == DType::I64) {
      const int64_t v = static_cast<const int64_t *>(x)[i];
      if (to == DType::I64) static_cast<int64_t *>(y)[i] = v;
      else if (to == DType::F64) static_cast<double *>(y)[i] = static_cast<double>(v);
      else storeFloatValue(to, y, i, static_cast<float>(v));
      continue;
    }
    const double v = loadAnyFloat(from, x, i);
    if (to != DType::I64) {
      storeFloatValue(to, y, i, v);
      continue;
    }
    static_cast<int64_t *>(y)[i] = values::truncateToInt64(v);
  }
}

/// One thread per line along dim (values::ScanLines: forward or reverse).
__global__ void cumsumKernel(DType dtype, const void *x, void *y, values::ScanLines lines) {
  const int64_t n = lines.n, step = lines.step();
  SHARDC_GRID_LOOP(line, lines.count()) {
    const int64_t first = lines.start(line);
    if (dtype == DType::I64) {
      unsigned long long acc = 0;
      for (int64_t j = 0; j < n; ++j) {
        acc += static_cast<unsigned long long>(static_cast<const int64_t *>(x)[first + j * step]);
        static_cast<int64_t *>(y)[first + j * step] = static_cast<int64_t>(acc);
      }
    } else if (dtype == DType::F32 || dtype == DType::F64) {
      double acc = 0;  // torch's CPU accumulation type for float and double
      for (int64_t j = 0; j < n; ++j) {
        acc += loadAnyFloat(dtype, x, first + j * step);
        storeFloatValue(dtype, y, first + j * step, acc);
      }
    } else {
      float acc = 0;  // ... and for the 16-bit floats
      for (int64_t j = 0; j < n; ++j) {
        acc += static_cast<float>(loadAnyFloat(dtype, x, first + j * step));
        storeFloatValue(dtype, y, first + j * step, acc);
      }
    }
  }
}

}  // namespace

void compare(CudaDevice &device, CompareOp op, const KTensor &a, const KTensor *b, double value,
             const KTensor &y) {
  const char *name = compareOpName(op);
  checks::compare(op, a, b, y);
  const int64_t count = y.numel();
  if (count == 0) return;
  if (y.shape.size() > static_cast<size_t>(kMaxRank))
    checks::fail(name, "rank " + std::to_string(y.shape.size()) + " exceeds the CUDA backend's " +
                           std::to_string(kMaxRank));
  device.makeCurrent();
  int64_t *out = static_cast<int64_t *>(y.data);
  if (!b) {
    // int64 against an integral value compares exactly
    const bool intValue = a.dtype == DType::I64 && values::isInt64Value(value);
    compareScalarKernel<<<gridFor(count), kThreads, 0, device.stream()>>>(
        op, a.dtype, a.data, intValue, intValue ? static_cast<int64_t>(value) : 0, value, out,
        count);
  } else {
    compareKernel<<<gridFor(count), kThreads, 0, device.stream()>>>(
        op, a.dtype, broadcastFor(y.shape, a.shape, b->shape), a.data, b->data, out, count);
  }
  checkLaunch(std::string(name) + " kernel launch");
}

void where(CudaDevice &device, const KTensor &cond, const KTensor &a, const KTensor &b,
           const KTensor &y) {
  checks::where(cond, a, b, y);
  const int64_t count = y.numel();
  if (count == 0) return;
  if (y.shape.size() > static_cast<size_t>(kMaxRank))
    checks::fail("where", "rank " + std::to_string(y.shape.size()) +
                              " exceeds the CUDA backend's " + std::to_string(kMaxRank));
  device.makeCurrent();
  const Broadcast condA = broadcastFor(y.shape, cond.shape, a.shape);
  const Broadcast bOnly = broadcastFor(y.shape, b.shape, b.shape);
  bySize(plan::dtypeSize(y.dtype), [&](auto *tag) {
    using E = std::remove_pointer_t<decltype(tag)>;
    whereKernel<E><<<gridFor(count), kThreads, 0, device.stream()>>>(
        condA, bOnly, static_cast<const int64_t *>(cond.data), static_cast<const E *>(a.data),
        static_cast<const E *>(b.data), static_cast<E *>(y.data), count);
  });
  checkLaunch("where kernel launch");
}

void cast(CudaDevice &device, const KTensor &x, const KTensor &y) {
  checks::cast(x, y);
  const int64_t count = x.numel();
  if (count == 0) return;
  device.makeCurrent();
  castKernel<<<gridFor(count), kThreads, 0, device.stream()>>>(x.dtype, x.data, y.dtype, y.data,
                                                               count);
  checkLaunch("cast kernel launch");
}

namespace {

/// One thread per element (each recomputes its Philox block: the words of
/// neighbouring threads are independent work, so the GPU hides it). The
/// counter is read on the device; a value that is not a whole number in
/// [0, 2^32) gives NaN outputs (the CPU refuses it; plans never make one).
template <typename T>
__global__ void dropoutKernel(uint64_t seed, uint32_t stream, uint32_t threshold,
                              typename T::C scale, uint64_t offset, const float *step,
                              const typename T::S *x, typename T::S *y, int64_t count) {
  const float counter = *step;
  const bool valid = counter >= 0.0f && counter < 4294967296.0f && counter == floorf(counter);
  SHARDC_GRID_LOOP(i, count) {
    const uint64_t g = offset + static_cast<uint64_t>(i);
    using C = typename T::C;
    C v = C(0);
    if (!valid) v = static_cast<C>(NAN);
    else if (dropout::keeps(seed, stream, static_cast<uint32_t>(counter), g, threshold))
      v = T::load(x[i]) * scale;
    y[i] = T::store(v);
  }
}

}  // namespace

void dropout(CudaDevice &device, const DropoutParams &p, uint64_t seed, uint64_t offset,
             const KTensor &x, const KTensor &step, const KTensor &y) {
  checks::dropout(p, x, step, y);
  const int64_t count = x.numel();
  if (count == 0) return;
  const uint32_t threshold = dropout::keepThreshold(p.p);
  device.makeCurrent();
  dispatchFloat("dropout", x.dtype, true, [&](auto tag) {
    using T = decltype(tag);
    using C = typename T::C;
    const C scale = p.p < 1.0 ? static_cast<C>(1.0 / (1.0 - p.p)) : C(0);
    dropoutKernel<T><<<gridFor(count), kThreads, 0, device.stream()>>>(
        seed, p.stream, threshold, scale, offset, static_cast<const float *>(step.data),
        static_cast<const typename T::S *>(x.data), static_cast<typename T::S *>(y.data), count);
  });
  checkLaunch("dropout kernel launch");
}

void cumsum(CudaDevice &device, const ScanParams &p, const KTensor &x, const KTensor &y) {
  checks::cumsum(p, x, y);
  if (x.numel() == 0) return;
  const values::ScanLines lines = values::scanLines(x.shape, p.dim, p.reverse);
  device.makeCurrent();
  cumsumKernel<<<gridFor(lines.count()), kThreads, 0, device.stream()>>>(x.dtype, x.data,
                                                                         y.data, lines);
  checkLaunch("cumsum kernel launch");
}

}  // namespace shardc::runtime::cuda
