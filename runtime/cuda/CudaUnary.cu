// unary (CudaFamilies.h): one elementwise kernel per storage type; the op
// is a launch parameter (uniform across the grid, so the switch costs no
// divergence), which keeps nvcc to 4 instantiations instead of 80. The
// formulas are runtime/cpu/UnaryKernels.cpp's (torch's), in float32 for
// float/16-bit storage and double for float64, with CUDA's libm functions
// (expf, tanhf, erff, log1pf, expm1f, powf: within 1-2 ulp; never the
// __expf-style intrinsics) where the CPU uses its vectorized formulas or
// glibc. NaN behaviour is the CPU's: std::min/std::max are spelled out as
// the comparisons they are (the first argument wins an unordered compare),
// and clamp returns NaN when x or a bound is NaN (fminf/fmaxf would drop it).
#include "runtime/cuda/CudaFamilies.h"

#include "runtime/ForwardChecks.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/DeviceStorage.cuh"

#include <cmath>

namespace shardc::runtime::cuda {
using plan::DType;

namespace {
using namespace dev;

// libm by math type: float gets the f-suffixed functions.
__device__ inline float mExp(float v) { return expf(v); }
__device__ inline double mExp(double v) { return exp(v); }
__device__ inline float mTanh(float v) { return tanhf(v); }
__device__ inline double mTanh(double v) { return tanh(v); }
__device__ inline float mLog(float v) { return logf(v); }
__device__ inline double mLog(double v) { return log(v); }
__device__ inline float mLog1p(float v) { return log1pf(v); }
__device__ inline double mLog1p(double v) { return log1p(v); }
__device__ inline float mExpm1(float v) { return expm1f(v); }
__device__ inline double mExpm1(double v) { return expm1(v); }
__device__ inline float mSqrt(float v) { return sqrtf(v); }
__device__ inline double mSqrt(double v) { return sqrt(v); }
__device__ inline float mErf(float v) { return erff(v); }
__device__ inline double mErf(double v) { return erf(v); }
__device__ inline float mSin(float v) { return sinf(v); }
__device__ inline double mSin(double v) { return sin(v); }
__device__ inline float mCos(float v) { return cosf(v); }
__device__ inline double mCos(double v) { return cos(v); }
__device__ inline float mPow(float v, float e) { return powf(v, e); }
__device__ inline double mPow(double v, double e) { return pow(v, e); }
__device__ inline float mAbs(float v) { return fabsf(v); }
__device__ inline double mAbs(double v) { return fabs(v); }

/// std::max(a, b) and std::min(a, b): `a` unless b is strictly beyond it.
template <typename C> __device__ inline C stdMax(C a, C b) { return a < b ? b : a; }
template <typename C> __device__ inline C stdMin(C a, C b) { return b < a ? b : a; }

/// One element, as runtime/cpu/UnaryKernels.cpp's UnaryFn.
template <typename C> struct UnaryFn {
  UnaryOp op;
  C a, b;

  __device__ C operator()(C x) const {
    const C zero = 0, one = 1, three = 3, six = 6;
    switch (op) {
    case UnaryOp::Sigmoid: return one / (one + mExp(-x));
    case UnaryOp::Tanh: return mTanh(x);
    case UnaryOp::Exp: return mExp(x);
    case UnaryOp::Log: return mLog(x);
    case UnaryOp::Sqrt: return mSqrt(x);
    case UnaryOp::Rsqrt: return one / mSqrt(x);
    case UnaryOp::Neg: return -x;
    case UnaryOp::Abs: return mAbs(x);
    case UnaryOp::Erf: return mErf(x);
    case UnaryOp::Sin: return mSin(x);
    case UnaryOp::Cos: return mCos(x);
    case UnaryOp::Reciprocal: return one / x;
    case UnaryOp::Hardswish: return x * stdMin(stdMax(x + three, zero), six) / six;
    case UnaryOp::Hardsigmoid: return stdMin(stdMax(x + three, zero), six) / six;
    case UnaryOp::Mish: return x * mTanh(mLog1p(mExp(x)));
    case UnaryOp::Clamp:
      if (x != x || a != a || b != b) return static_cast<C>(NAN);  // the CPU's quiet NaN
      return stdMin(stdMax(x, a), b);
    case UnaryOp::LeakyRelu: return x > zero ? x : x * a;
    case UnaryOp::Elu: return x > zero ? x : a * mExpm1(x * b);
    case UnaryOp::PowScalar:
      // torch's pow_tensor_scalar shortcuts, as the CPU.
      if (a == C(2)) return x * x;
      if (a == C(3)) return x * x * x;
      if (a == C(0.5)) return mSqrt(x);
      if (a == C(-0.5)) return one / mSqrt(x);
      if (a == C(-1)) return one / x;
      if (a == C(-2)) return one / (x * x);
      return mPow(x, a);
    case UnaryOp::Softplus: return x * a > b ? x : mLog1p(mExp(x * a)) / a;
    }
    return x;
  }
};

template <typename T>
__global__ void unaryKernel(UnaryFn<typename T::C> f, const typename T::S *x, typename T::S *y,
                            int64_t count) {
  SHARDC_GRID_LOOP(i, count) { y[i] = T::store(f(T::load(x[i]))); }
}

}  // namespace

void unary(CudaDevice &device, UnaryOp op, double a, double b, const KTensor &x,
           const KTensor &y) {
  const char *name = unaryOpName(op);
  if (x.dtype != DType::F64) checks::expectFloat(name, "x", x);
  checks::expectDType(name, "output", y, x.dtype);
  checks::expectShape(name, "output", y, x.shape);
  const int64_t count = x.numel();
  if (count == 0) return;
  device.makeCurrent();
  dispatchFloat(name, x.dtype, true, [&](auto tag) {
    using T = decltype(tag);
    using C = typename T::C;
    const UnaryFn<C> f{op, static_cast<C>(a), static_cast<C>(b)};
    unaryKernel<T><<<gridFor(count), kThreads, 0, device.stream()>>>(
        f, static_cast<const typename T::S *>(x.data), static_cast<typename T::S *>(y.data),
        count);
  });
  checkLaunch(std::string(name) + " kernel launch");
}

}  // namespace shardc::runtime::cuda
