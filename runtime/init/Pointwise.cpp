#include "runtime/init/Pointwise.h"

#include "runtime/HalfFloat.h"
#include "runtime/RuntimeError.h"
#include "runtime/init/CpuDispatch.h"
#include "runtime/init/InitMath.h"
#include "runtime/init/ParallelFor.h"
#include "runtime/init/PointwiseKernels.h"

#include <algorithm>
#include <string>

namespace shardc::runtime::init {
namespace {

constexpr int64_t kStageElements = 1024;

template <typename Value> Value pointwiseValue(PointwiseKind kind, Value a, Value b, Value x) {
  switch (kind) {
  case PointwiseKind::Mul: return x * a;
  case PointwiseKind::Add: return x + a;
  case PointwiseKind::Sub: return x - a;
  case PointwiseKind::Div: return x / a;
  case PointwiseKind::Clamp:  // NaN passes through both comparisons, as torch.clamp keeps NaN
    x = x < a ? a : x;
    return x > b ? b : x;
  case PointwiseKind::Erfinv:
    if constexpr (sizeof(Value) == 4) return math::erfinvF(x);
    else return math::erfinvD(x);
  case PointwiseKind::Sqrt:
    if constexpr (sizeof(Value) == 4) return math::sqrtF(x);
    else return math::sqrtD(x);
  case PointwiseKind::Neg: return -x;
  case PointwiseKind::Exp:
    if constexpr (sizeof(Value) == 4) return math::expAnyF(x);
    else return math::expAnyD(x);
  case PointwiseKind::Log:
    if constexpr (sizeof(Value) == 4) return math::logAnyF(x);
    else return math::logAnyD(x);
  case PointwiseKind::Expm1:
    if constexpr (sizeof(Value) == 4) return math::expm1AnyF(x);
    else return math::expm1AnyD(x);
  case PointwiseKind::InverseSoftplus:
    if constexpr (sizeof(Value) == 4) return math::inverseSoftplusF(x);
    else return math::inverseSoftplusD(x);
  }
  return x;
}

void floatKernel(PointwiseKind kind, float a, float b, float *data, int64_t count) {
  if (!hasVectorKernel(kind)) scalarPointwiseF(kind, a, b, data, count);
  else if (useAvx512()) avx512PointwiseF(kind, a, b, data, count);
  else if (useAvx2()) avx2PointwiseF(kind, a, b, data, count);
  else scalarPointwiseF(kind, a, b, data, count);
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void halfKernel(PointwiseKind kind, float a, float b, uint16_t *data, int64_t count) {
  alignas(32) float stage[kStageElements];
  for (int64_t i = 0; i < count; i += kStageElements) {
    int64_t n = std::min(kStageElements, count - i);
    for (int64_t k = 0; k < n; ++k) stage[k] = ToFloat(data[i + k]);
    floatKernel(kind, a, b, stage, n);
    for (int64_t k = 0; k < n; ++k) data[i + k] = FromFloat(stage[k]);
  }
}

}  // namespace

float pointwiseValueF(PointwiseKind kind, float a, float b, float x) {
  return pointwiseValue<float>(kind, a, b, x);
}
double pointwiseValueD(PointwiseKind kind, double a, double b, double x) {
  return pointwiseValue<double>(kind, a, b, x);
}

void scalarPointwiseF(PointwiseKind kind, float a, float b, float *data, int64_t count) {
  for (int64_t k = 0; k < count; ++k) data[k] = pointwiseValue<float>(kind, a, b, data[k]);
}

const char *pointwiseKindName(PointwiseKind kind) {
  switch (kind) {
  case PointwiseKind::Mul: return "mul";
  case PointwiseKind::Add: return "add";
  case PointwiseKind::Sub: return "sub";
  case PointwiseKind::Div: return "div";
  case PointwiseKind::Clamp: return "clamp";
  case PointwiseKind::Erfinv: return "erfinv";
  case PointwiseKind::Sqrt: return "sqrt";
  case PointwiseKind::Neg: return "neg";
  case PointwiseKind::Exp: return "exp";
  case PointwiseKind::Log: return "log";
  case PointwiseKind::Expm1: return "expm1";
  case PointwiseKind::InverseSoftplus: return "inverse_softplus";
  }
  return "unknown";
}

void applyPointwise(PointwiseKind kind, double a, double b, plan::DType dtype, void *data,
                    int64_t count, int threads) {
  if (static_cast<int>(kind) < 0 || static_cast<int>(kind) > static_cast<int>(kLastPointwiseKind))
    throw RuntimeError("init pointwise: unknown op " + std::to_string(static_cast<int>(kind)));
  if (count < 0) throw RuntimeError(std::string("init pointwise '") + pointwiseKindName(kind) +
                                    "': negative element count " + std::to_string(count));
  if (dtype != plan::DType::F32 && dtype != plan::DType::F64 && dtype != plan::DType::F16 &&
      dtype != plan::DType::BF16)
    throw RuntimeError(std::string("init pointwise '") + pointwiseKindName(kind) + "': dtype " +
                       plan::dtypeName(dtype) + " is not a floating-point type");
  const float af = static_cast<float>(a), bf = static_cast<float>(b);
  const int64_t size = plan::dtypeSize(dtype);
  parallelFor(count, threads, [&](int64_t partBegin, int64_t partCount) {
    char *part = static_cast<char *>(data) + partBegin * size;
    switch (dtype) {
    case plan::DType::F32: floatKernel(kind, af, bf, reinterpret_cast<float *>(part), partCount); break;
    case plan::DType::F64: {
      double *values = reinterpret_cast<double *>(part);
      for (int64_t k = 0; k < partCount; ++k) values[k] = pointwiseValue<double>(kind, a, b, values[k]);
      break;
    }
    case plan::DType::F16:
      halfKernel<halfBitsToFloat, floatToHalfBits>(kind, af, bf, reinterpret_cast<uint16_t *>(part), partCount);
      break;
    case plan::DType::BF16:
      halfKernel<bfloat16BitsToFloat, floatToBFloat16Bits>(kind, af, bf, reinterpret_cast<uint16_t *>(part),
                                                          partCount);
      break;
    default: break;  // non-float dtypes are rejected on entry
    }
  });
}

}  // namespace shardc::runtime::init
