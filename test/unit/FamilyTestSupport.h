// Test tensors for the family kernels' tests (runtime/cpu/FamilyKernels.h):
// storage of any dtype plus the exact double value of each stored element,
// so a reference computed in double sees exactly what the kernel saw.
#pragma once

#include "runtime/ForwardKernels.h"
#include "runtime/HalfFloat.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace shardc::runtime::familytest {

using plan::DType;

struct TT {
  DType dtype = DType::F32;
  Shape shape;
  std::vector<std::byte> bytes;
  KTensor k() { return {dtype, shape, bytes.data()}; }
  const KTensor k() const { return {dtype, shape, const_cast<std::byte *>(bytes.data())}; }
  int64_t numel() const { return plan::numElements(shape); }
  double at(int64_t i) const {
    switch (dtype) {
    case DType::F32: { float v; std::memcpy(&v, bytes.data() + i * 4, 4); return v; }
    case DType::F64: { double v; std::memcpy(&v, bytes.data() + i * 8, 8); return v; }
    case DType::BF16: { uint16_t v; std::memcpy(&v, bytes.data() + i * 2, 2); return bfloat16BitsToFloat(v); }
    case DType::F16: { uint16_t v; std::memcpy(&v, bytes.data() + i * 2, 2); return halfBitsToFloat(v); }
    case DType::I64: { int64_t v; std::memcpy(&v, bytes.data() + i * 8, 8); return double(v); }
    }
    return 0;
  }
  void set(int64_t i, double value) {
    switch (dtype) {
    case DType::F32: { float v = float(value); std::memcpy(bytes.data() + i * 4, &v, 4); break; }
    case DType::F64: std::memcpy(bytes.data() + i * 8, &value, 8); break;
    case DType::BF16: { uint16_t v = floatToBFloat16Bits(float(value)); std::memcpy(bytes.data() + i * 2, &v, 2); break; }
    case DType::F16: { uint16_t v = floatToHalfBits(float(value)); std::memcpy(bytes.data() + i * 2, &v, 2); break; }
    case DType::I64: { int64_t v = int64_t(value); std::memcpy(bytes.data() + i * 8, &v, 8); break; }
    }
  }
  /// The bytes of elements [begin, begin + count): to compare one sample.
  std::vector<std::byte> slice(int64_t begin, int64_t count) const {
    const int64_t size = plan::dtypeSize(dtype);
    return {bytes.begin() + begin * size, bytes.begin() + (begin + count) * size};
  }
};

inline TT zeros(DType dtype, Shape shape) {
  TT t{dtype, std::move(shape), {}};
  t.bytes.assign(size_t(t.numel() * plan::dtypeSize(dtype)), std::byte{0});
  return t;
}

/// A tensor of `dtype` holding `values` (each rounded once into the dtype).
inline TT fromValues(DType dtype, Shape shape, const std::vector<double> &values) {
  TT t = zeros(dtype, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) t.set(int64_t(i), values[i]);
  return t;
}

inline TT random(DType dtype, Shape shape, uint32_t seed, double lo = -1, double hi = 1) {
  TT t = zeros(dtype, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, dist(rng));
  return t;
}

/// Relative error of rounding one value into `dtype` (half an ulp).
inline double storageRounding(DType dtype) {
  switch (dtype) {
  case DType::BF16: return std::ldexp(1.0, -8);
  case DType::F16: return std::ldexp(1.0, -11);
  default: return 0;  // float32 results are checked with the float32 math bound
  }
}

/// The rows [n0, n0 + n) of dim 0 of `t`, as a new tensor.
inline TT firstRows(const TT &t, int64_t n) {
  TT r = zeros(t.dtype, t.shape);
  r.shape[0] = n;
  r.bytes = t.slice(0, t.numel() / t.shape[0] * n);
  return r;
}

}  // namespace shardc::runtime::familytest
