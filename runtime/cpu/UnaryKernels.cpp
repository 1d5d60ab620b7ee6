// unaryKernel (runtime/cpu/FamilyKernels.h): torch's CPU formulas, float32
// math for float32/bfloat16/float16 storage and double math for float64, one
// rounding into the storage dtype per element. Elementwise, so any split of
// the work gives the same bytes. Float sigmoid/tanh/exp/erf use the
// vectorized formulas of runtime/cpu/VectorMath.h instead of libm.
#include "runtime/cpu/FamilyKernels.h"

#include "runtime/ForwardChecks.h"
#include "runtime/cpu/KernelSupport.h"
#include "runtime/cpu/VectorMath.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>

namespace shardc::runtime {
using plan::DType;

namespace {

/// One element, as torch computes it (aten/src/ATen/native/cpu/UnaryOpsKernel.cpp,
/// Activation.cpp). C is float or double.
template <UnaryOp op, typename C> struct UnaryFn {
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
    case UnaryOp::Elu: return x > zero ? x : a * std::expm1(x * b);
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

/// The ops with a vectorized float formula (runtime/cpu/VectorMath.h);
/// double math keeps libm.
template <UnaryOp op> constexpr std::optional<cpu::VecFn> vectorFn() {
  switch (op) {
  case UnaryOp::Sigmoid: return cpu::VecFn::Sigmoid;
  case UnaryOp::Tanh: return cpu::VecFn::Tanh;
  case UnaryOp::Exp: return cpu::VecFn::Exp;
  case UnaryOp::Erf: return cpu::VecFn::Erf;
  default: return std::nullopt;
  }
}

/// The loop is instantiated per op and storage type, so the op's formula is
/// inlined into it (and vectorized where the compiler can).
template <UnaryOp op, typename S, typename C, C (*load)(S), S (*store)(C)>
void unaryTyped(C a, C b, const KTensor &x, const KTensor &y, int threads) {
  const UnaryFn<op, C> f{a, b};
  const S *in = static_cast<const S *>(x.data);
  S *out = static_cast<S *>(y.data);
  const int64_t total = x.numel();
  constexpr int64_t kChunk = 1 << 14;
  cpu::parallelTasks((total + kChunk - 1) / kChunk, threads, total * 8, [&](int64_t task) {
    const int64_t begin = task * kChunk, end = std::min(total, begin + kChunk);
    if constexpr (std::is_same_v<C, float> && vectorFn<op>().has_value()) {
      // float math: the vectorized formulas (runtime/cpu/VectorMath.h),
      // through a float block for 16-bit storage.
      constexpr cpu::VecFn fn = *vectorFn<op>();
      if constexpr (std::is_same_v<S, float>) {
        cpu::vecApply(fn, in + begin, out + begin, end - begin);
      } else {
        constexpr int64_t kBlock = 512;
        float buf[kBlock];
        for (int64_t b0 = begin; b0 < end; b0 += kBlock) {
          const int64_t n = std::min(kBlock, end - b0);
          for (int64_t i = 0; i < n; ++i) buf[i] = load(in[b0 + i]);
          cpu::vecApply(fn, buf, buf, n);
          for (int64_t i = 0; i < n; ++i) out[b0 + i] = store(buf[i]);
        }
      }
    } else {
      for (int64_t i = begin; i < end; ++i) out[i] = store(f(load(in[i])));
    }
  });
}

float idF(float v) { return v; }
double idD(double v) { return v; }

template <UnaryOp op>
void unaryDtype(double a, double b, const KTensor &x, const KTensor &y, int threads) {
  switch (x.dtype) {
  case DType::F64: return unaryTyped<op, double, double, idD, idD>(a, b, x, y, threads);
  case DType::F32:
    return unaryTyped<op, float, float, idF, idF>(float(a), float(b), x, y, threads);
  case DType::BF16:
    return unaryTyped<op, uint16_t, float, bfloat16BitsToFloat, floatToBFloat16Bits>(
        float(a), float(b), x, y, threads);
  case DType::F16:
    return unaryTyped<op, uint16_t, float, halfBitsToFloat, floatToHalfBits>(float(a), float(b),
                                                                            x, y, threads);
  default: return;
  }
}

}  // namespace

void unaryKernel(UnaryOp op, double a, double b, const KTensor &x, const KTensor &y,
                 int threads) {
  const char *name = unaryOpName(op);
  if (x.dtype != DType::F64) checks::expectFloat(name, "x", x);
  checks::expectDType(name, "output", y, x.dtype);
  checks::expectShape(name, "output", y, x.shape);
  switch (op) {
  case UnaryOp::Sigmoid: return unaryDtype<UnaryOp::Sigmoid>(a, b, x, y, threads);
  case UnaryOp::Tanh: return unaryDtype<UnaryOp::Tanh>(a, b, x, y, threads);
  case UnaryOp::Exp: return unaryDtype<UnaryOp::Exp>(a, b, x, y, threads);
  case UnaryOp::Log: return unaryDtype<UnaryOp::Log>(a, b, x, y, threads);
  case UnaryOp::Sqrt: return unaryDtype<UnaryOp::Sqrt>(a, b, x, y, threads);
  case UnaryOp::Rsqrt: return unaryDtype<UnaryOp::Rsqrt>(a, b, x, y, threads);
  case UnaryOp::Neg: return unaryDtype<UnaryOp::Neg>(a, b, x, y, threads);
  case UnaryOp::Abs: return unaryDtype<UnaryOp::Abs>(a, b, x, y, threads);
  case UnaryOp::Erf: return unaryDtype<UnaryOp::Erf>(a, b, x, y, threads);
  case UnaryOp::Sin: return unaryDtype<UnaryOp::Sin>(a, b, x, y, threads);
  case UnaryOp::Cos: return unaryDtype<UnaryOp::Cos>(a, b, x, y, threads);
  case UnaryOp::Reciprocal: return unaryDtype<UnaryOp::Reciprocal>(a, b, x, y, threads);
  case UnaryOp::Hardswish: return unaryDtype<UnaryOp::Hardswish>(a, b, x, y, threads);
  case UnaryOp::Hardsigmoid: return unaryDtype<UnaryOp::Hardsigmoid>(a, b, x, y, threads);
  case UnaryOp::Mish: return unaryDtype<UnaryOp::Mish>(a, b, x, y, threads);
  case UnaryOp::Clamp: return unaryDtype<UnaryOp::Clamp>(a, b, x, y, threads);
  case UnaryOp::LeakyRelu: return unaryDtype<UnaryOp::LeakyRelu>(a, b, x, y, threads);
  case UnaryOp::Elu: return unaryDtype<UnaryOp::Elu>(a, b, x, y, threads);
  case UnaryOp::PowScalar: return unaryDtype<UnaryOp::PowScalar>(a, b, x, y, threads);
  case UnaryOp::Softplus: return unaryDtype<UnaryOp::Softplus>(a, b, x, y, threads);
  }
}

}  // namespace shardc::runtime
