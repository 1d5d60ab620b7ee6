// unaryKernel (runtime/cpu/FamilyKernels.h): torch's CPU formulas, float32
// math for float32/bfloat16/float16 storage and double math for float64, one
// rounding into the storage dtype per element. Elementwise, so any split of
// the work gives the same bytes.
#include "runtime/cpu/FamilyKernels.h"

#include "runtime/ForwardChecks.h"
#include "runtime/cpu/KernelSupport.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace shardc::runtime {
using plan::DType;

namespace {

/// One element, as torch computes it (aten/src/ATen/native/cpu/UnaryOpsKernel.cpp,
/// Activation.cpp). C is float or double.
template <typename C> struct UnaryFn {
  UnaryOp op;
  C a, b;

  C operator()(C x) const {
    const C zero = 0, one = 1, three = 3, six = 6;
    switch (op) {
    case UnaryOp::Sigmoid: return one / (one + std::exp(-x));
    case UnaryOp::Tanh: return std::tanh(x);
    case UnaryOp::Exp: return std::exp(x);
    case UnaryOp::Log: return std::log(x);
    case UnaryOp::Sqrt: return std::sqrt(x);
    case UnaryOp::Rsqrt: return one / std::sqrt(x);
    case UnaryOp::Neg: return -x;
    case UnaryOp::Abs: return std::abs(x);
    case UnaryOp::Erf: return std::erf(x);
    case UnaryOp::Sin: return std::sin(x);
    case UnaryOp::Cos: return std::cos(x);
    case UnaryOp::Reciprocal: return one / x;
    // std::max(NaN + 3, 0) and std::min(NaN, 6) return their first argument:
    // NaN passes through as in torch.
    case UnaryOp::Hardswish: return x * std::min(std::max(x + three, zero), six) / six;
    case UnaryOp::Hardsigmoid: return std::min(std::max(x + three, zero), six) / six;
    case UnaryOp::Mish: return x * std::tanh(std::log1p(std::exp(x)));
    case UnaryOp::Clamp:
      // torch: min(max(x, lo), hi), NaN propagating (from x or a bound);
      // lo > hi gives hi.
      if (std::isnan(x) || std::isnan(a) || std::isnan(b))
        return std::numeric_limits<C>::quiet_NaN();
      return std::min(std::max(x, a), b);
    case UnaryOp::LeakyRelu: return x > zero ? x : x * a;
    case UnaryOp::Elu: return x > zero ? x : a * std::expm1(x);
    case UnaryOp::PowScalar:
      // torch's pow_tensor_scalar shortcuts for the common exponents.
      if (a == C(2)) return x * x;
      if (a == C(3)) return x * x * x;
      if (a == C(0.5)) return std::sqrt(x);
      if (a == C(-0.5)) return one / std::sqrt(x);
      if (a == C(-1)) return one / x;
      if (a == C(-2)) return one / (x * x);
      return std::pow(x, a);
    case UnaryOp::Softplus:
      return x * a > b ? x : std::log1p(std::exp(x * a)) / a;
    }
    return x;
  }
};

template <typename S, typename C>
void unaryTyped(UnaryFn<C> f, C (*load)(S), S (*store)(C), const KTensor &x, const KTensor &y,
                int threads) {
  const S *in = static_cast<const S *>(x.data);
  S *out = static_cast<S *>(y.data);
  const int64_t total = x.numel();
  constexpr int64_t kChunk = 1 << 14;
  cpu::parallelTasks((total + kChunk - 1) / kChunk, threads, total * 8, [&](int64_t task) {
    const int64_t begin = task * kChunk, end = std::min(total, begin + kChunk);
    for (int64_t i = begin; i < end; ++i) out[i] = store(f(load(in[i])));
  });
}

float idF(float v) { return v; }
double idD(double v) { return v; }

}  // namespace

void unaryKernel(UnaryOp op, double a, double b, const KTensor &x, const KTensor &y,
                 int threads) {
  const char *name = unaryOpName(op);
  if (x.dtype != DType::F64) checks::expectFloat(name, "x", x);
  checks::expectDType(name, "output", y, x.dtype);
  checks::expectShape(name, "output", y, x.shape);
  switch (x.dtype) {
  case DType::F64:
    return unaryTyped<double, double>({op, a, b}, idD, idD, x, y, threads);
  case DType::F32:
    return unaryTyped<float, float>({op, float(a), float(b)}, idF, idF, x, y, threads);
  case DType::BF16:
    return unaryTyped<uint16_t, float>({op, float(a), float(b)}, bfloat16BitsToFloat,
                                       floatToBFloat16Bits, x, y, threads);
  case DType::F16:
    return unaryTyped<uint16_t, float>({op, float(a), float(b)}, halfBitsToFloat,
                                       floatToHalfBits, x, y, threads);
  default: return;
  }
}

}  // namespace shardc::runtime
