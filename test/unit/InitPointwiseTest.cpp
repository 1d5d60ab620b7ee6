// Pointwise init ops: semantics (torch's, in float for f32/f16/bf16) and
// identical bits from the AVX2 and scalar kernels and any thread count.
#include "runtime/HalfFloat.h"
#include "runtime/init/CpuDispatch.h"
#include "runtime/init/Generators.h"
#include "runtime/init/InitMath.h"
#include "runtime/init/Pointwise.h"
#include "InitTestSupport.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

using namespace shardc::runtime;
using namespace shardc::runtime::init;
using namespace shardc::runtime::init::testing;
namespace plan = shardc::plan;

namespace {

const std::vector<PointwiseKind> kAllOps = {
    PointwiseKind::Mul,  PointwiseKind::Add,   PointwiseKind::Sub,
    PointwiseKind::Div,  PointwiseKind::Clamp, PointwiseKind::Erfinv,
    PointwiseKind::Sqrt, PointwiseKind::Neg,   PointwiseKind::Exp,
    PointwiseKind::Log,  PointwiseKind::Expm1, PointwiseKind::InverseSoftplus};

/// The ops computed in double and rounded once to float: libm's double
/// result rounded may differ from ours in the last float bit (both are within
/// an ulp of the exact value), so they are compared within one float ulp.
bool roundedFromDouble(PointwiseKind kind) { return !hasVectorKernel(kind); }

/// Inputs with the awkward values: +-0, +-1, NaN, inf, outside erfinv's domain.
std::vector<float> awkwardInputs(int64_t n) {
  std::vector<float> values = generateValues<float>(specFor(GeneratorKind::Uniform, {n}), n);
  const float specials[] = {0.0f, -0.0f, 1.0f, -1.0f, 1.5f, -3.0f, std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(), 0.99999994f, -0.99999994f, 1e-30f};
  for (size_t k = 0; k < std::size(specials) && k * 3 < values.size(); ++k) values[k * 3] = specials[k];
  return values;
}

/// torch's formula for one float element, written with the standard library
/// (not the runtime's pointwiseValueF), so the kernels are compared with
/// something they do not share. erfinv has no standard-library version: its
/// accuracy is checked against an independent reference in InitMathTest.cpp,
/// and here the kernels must reproduce the one-element function exactly.
float referencePointwise(PointwiseKind kind, float a, float b, float x) {
  switch (kind) {
  case PointwiseKind::Mul: return x * a;
  case PointwiseKind::Add: return x + a;
  case PointwiseKind::Sub: return x - a;
  case PointwiseKind::Div: return x / a;
  case PointwiseKind::Clamp: return std::isnan(x) ? x : std::min(std::max(x, a), b);
  case PointwiseKind::Erfinv: return math::erfinvF(x);
  case PointwiseKind::Sqrt: return std::sqrt(x);  // IEEE: correctly rounded
  case PointwiseKind::Neg: return -x;
  case PointwiseKind::Exp: return static_cast<float>(std::exp(static_cast<double>(x)));
  case PointwiseKind::Log: return static_cast<float>(std::log(static_cast<double>(x)));
  case PointwiseKind::Expm1: return static_cast<float>(std::expm1(static_cast<double>(x)));
  case PointwiseKind::InverseSoftplus: {
    double d = x;
    return static_cast<float>(d + std::log(-std::expm1(-d)));
  }
  }
  return std::nanf("");
}

}  // namespace

TEST_CASE("pointwise ops compute torch's formulas in float", "[init][pointwise]") {
  std::vector<float> x = {-2.0f, -0.5f, 0.25f, 3.0f, NAN};
  auto apply = [&](PointwiseKind kind, double a, double b) {
    std::vector<float> y = x;
    applyPointwise(kind, a, b, plan::DType::F32, y.data(), static_cast<int64_t>(y.size()));
    return y;
  };
  CHECK(apply(PointwiseKind::Mul, 0.1, 0)[3] == 3.0f * 0.1f);
  CHECK(apply(PointwiseKind::Add, 1, 0)[1] == 0.5f);
  CHECK(apply(PointwiseKind::Sub, 1, 0)[2] == -0.75f);
  CHECK(apply(PointwiseKind::Div, 3, 0)[2] == 0.25f / 3.0f);
  std::vector<float> clamped = apply(PointwiseKind::Clamp, -1, 1);
  CHECK(clamped[0] == -1.0f);
  CHECK(clamped[1] == -0.5f);
  CHECK(clamped[3] == 1.0f);
  CHECK(std::isnan(clamped[4]));  // torch.clamp keeps NaN
  CHECK(apply(PointwiseKind::Neg, 0, 0)[0] == 2.0f);
  CHECK(apply(PointwiseKind::Sqrt, 0, 0)[3] == std::sqrt(3.0f));
  CHECK(std::isnan(apply(PointwiseKind::Sqrt, 0, 0)[0]));
  std::vector<float> e = apply(PointwiseKind::Erfinv, 0, 0);
  CHECK(e[1] == math::erfinvF(-0.5f));
  CHECK(std::abs(e[1] + 0.4769362762f) < 1e-6f);
  CHECK(std::isnan(e[0]));
  std::vector<float> ex = apply(PointwiseKind::Exp, 0, 0);
  CHECK(ex[0] == static_cast<float>(std::exp(-2.0)));
  CHECK(std::isnan(ex[4]));
  std::vector<float> lg = apply(PointwiseKind::Log, 0, 0);
  CHECK(std::isnan(lg[0]));  // log of a negative number, as torch
  CHECK(lg[3] == static_cast<float>(std::log(3.0)));
  float tiny = 1e-9f;  // expm1 keeps the digits exp(x) - 1 would cancel
  applyPointwise(PointwiseKind::Expm1, 0, 0, plan::DType::F32, &tiny, 1);
  CHECK(std::abs(tiny - 1e-9f) < 1e-15f);
  // softplus(inverse_softplus(x)) == x: Mamba's dt bias reproduces dt.
  for (float dt : {1e-4f, 0.001f, 0.1f, 0.5f, 4.0f}) {
    float bias = dt;
    applyPointwise(PointwiseKind::InverseSoftplus, 0, 0, plan::DType::F32, &bias, 1);
    double softplus = std::log1p(std::exp(static_cast<double>(bias)));
    CHECK(std::abs(softplus - dt) <= 1e-6 * dt);
  }
  float zero = 0.0f, negative = -1.0f;
  applyPointwise(PointwiseKind::InverseSoftplus, 0, 0, plan::DType::F32, &zero, 1);
  applyPointwise(PointwiseKind::InverseSoftplus, 0, 0, plan::DType::F32, &negative, 1);
  CHECK(zero == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(negative));
}

TEST_CASE("pointwise: AVX-512, AVX2 and scalar kernels and thread counts agree bit for bit", "[init][pointwise]") {
  for (int64_t n : {1, 7, 8, 9, 1001, 4099}) {
    std::vector<float> input = awkwardInputs(n);
    for (PointwiseKind kind : kAllOps) {
      std::vector<float> fast = input, scalar = input, threaded = input, avx2 = input;
      applyPointwise(kind, -0.3, 0.7, plan::DType::F32, fast.data(), n);
      applyPointwise(kind, -0.3, 0.7, plan::DType::F32, threaded.data(), n, 3);
      setAvx512Allowed(false);
      applyPointwise(kind, -0.3, 0.7, plan::DType::F32, avx2.data(), n);
      setAvx512Allowed(true);
      CHECK(std::memcmp(fast.data(), avx2.data(), static_cast<size_t>(n) * 4) == 0);
      setAvx2Allowed(false);
      applyPointwise(kind, -0.3, 0.7, plan::DType::F32, scalar.data(), n);
      setAvx2Allowed(true);
      INFO(pointwiseKindName(kind) << " n=" << n);
      CHECK(std::memcmp(fast.data(), scalar.data(), static_cast<size_t>(n) * 4) == 0);
      CHECK(std::memcmp(fast.data(), threaded.data(), static_cast<size_t>(n) * 4) == 0);
      for (int64_t k = 0; k < n; ++k) {  // and all equal an independent one-element reference
        float want = referencePointwise(kind, -0.3f, 0.7f, input[k]);
        INFO("k=" << k << " x=" << input[k] << " got " << fast[k] << " want " << want);
        // NaN payloads and signs are not part of the semantics; everything else is bitwise.
        if (std::isnan(want)) REQUIRE(std::isnan(fast[k]));
        else if (roundedFromDouble(kind) && std::isfinite(want))
          REQUIRE(std::abs(fast[k] - want) <=
                  std::nextafter(std::abs(want), INFINITY) - std::abs(want));
        else REQUIRE(std::memcmp(&fast[k], &want, 4) == 0);
      }
    }
  }
}

TEST_CASE("pointwise on half types rounds the float result once; float64 in double", "[init][pointwise]") {
  std::vector<float> input = awkwardInputs(100);
  for (PointwiseKind kind : kAllOps) {
    std::vector<uint16_t> half(100), bf(100);
    std::vector<double> dbl(100);
    for (size_t k = 0; k < 100; ++k) {
      half[k] = floatToHalfBits(input[k]);
      bf[k] = floatToBFloat16Bits(input[k]);
      dbl[k] = input[k];
    }
    std::vector<uint16_t> halfIn = half, bfIn = bf;
    std::vector<double> dblIn = dbl;
    applyPointwise(kind, 0.5, 0.75, plan::DType::F16, half.data(), 100);
    applyPointwise(kind, 0.5, 0.75, plan::DType::BF16, bf.data(), 100, 2);
    applyPointwise(kind, 0.5, 0.75, plan::DType::F64, dbl.data(), 100);
    INFO(pointwiseKindName(kind));
    for (size_t k = 0; k < 100; ++k) {
      float h = halfBitsToFloat(halfIn[k]);
      std::vector<float> one = {h};
      applyPointwise(kind, 0.5, 0.75, plan::DType::F32, one.data(), 1);
      REQUIRE(half[k] == floatToHalfBits(one[0]));
      float b = bfloat16BitsToFloat(bfIn[k]);
      one = {b};
      applyPointwise(kind, 0.5, 0.75, plan::DType::F32, one.data(), 1);
      REQUIRE(bf[k] == floatToBFloat16Bits(one[0]));
      if (kind == PointwiseKind::Mul && !std::isnan(dblIn[k])) REQUIRE(dbl[k] == dblIn[k] * 0.5);
      if (kind == PointwiseKind::Erfinv && !std::isnan(dbl[k])) REQUIRE(dbl[k] == math::erfinvD(dblIn[k]));
    }
  }
}

TEST_CASE("trunc_normal with mean and std: inside [a, b] with the truncated mean", "[init][pointwise]") {
  GeneratorSpec trunc = specFor(GeneratorKind::TruncNormal, {100000});
  trunc.mean = 0.5; trunc.std = 2; trunc.low = -1; trunc.high = 3;
  std::vector<float> values = generateValues<float>(trunc, 100000);
  double mean = 0;
  for (float v : values) {
    REQUIRE((v >= -1.0f && v <= 3.0f));
    mean += v;
  }
  // mu + sigma (phi(alpha) - phi(beta)) / (Phi(beta) - Phi(alpha)), alpha = -0.75, beta = 1.25
  CHECK(std::abs(mean / 100000 - 0.85497) < 0.01);
}
