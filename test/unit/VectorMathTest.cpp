// The vectorized float32 exp/tanh/erf and activations (runtime/cpu/VectorMath.h)
// against double-precision libm rounded to float, over about a million floats
// spread evenly over the bit patterns of each function's interesting range,
// plus the special values; and the same bits from every instruction set the
// CPU has and from every position in the array.
#include "runtime/cpu/VectorMath.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

using namespace shardc::runtime::cpu;

namespace {

int32_t bitsOf(float f) {
  int32_t i;
  std::memcpy(&i, &f, 4);
  return i;
}

float fromBits(int32_t i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}

/// Floats as integers in value order: the difference of two is their
/// distance in ulps (across zero too).
int64_t ordered(float f) {
  const int32_t i = bitsOf(f);
  return i >= 0 ? int64_t(i) : -int64_t(i & 0x7fffffff);
}

/// Every stride-th float in [lo, hi] (bit patterns, both signs), lo < hi.
std::vector<float> sweep(float lo, float hi, int64_t stride) {
  std::vector<float> xs;
  for (int64_t o = ordered(lo); o <= ordered(hi); o += stride)
    xs.push_back(o >= 0 ? fromBits(int32_t(o)) : fromBits(int32_t(-o) | int32_t(0x80000000u)));
  xs.push_back(hi);
  return xs;
}

std::vector<float> applyFn(VecFn fn, const std::vector<float> &x) {
  std::vector<float> y(x.size());
  vecApply(fn, x.data(), y.data(), static_cast<int64_t>(x.size()));
  return y;
}

/// The largest ulp distance between fn and the double reference over xs.
int64_t maxUlps(VecFn fn, const std::function<double(double)> &ref, const std::vector<float> &xs,
                float *worstX = nullptr) {
  const std::vector<float> y = applyFn(fn, xs);
  int64_t worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const float want = static_cast<float>(ref(static_cast<double>(xs[i])));
    const int64_t d = std::llabs(ordered(y[i]) - ordered(want));
    if (d > worst) {
      worst = d;
      if (worstX) *worstX = xs[i];
    }
  }
  return worst;
}

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

}  // namespace

TEST_CASE("vectorized exp is within 1 ulp of libm", "[vecmath]") {
  float at = 0;
  CHECK(maxUlps(VecFn::Exp, [](double v) { return std::exp(v); }, sweep(-104.0f, 89.0f, 2039),
                &at) <= 1);
  INFO("worst at " << at);
  // Overflow, underflow, NaN, infinities, the denormal range.
  const std::vector<float> y = applyFn(VecFn::Exp, {88.8f, -104.0f, -200.0f, kInf, -kInf, kNaN,
                                                  0.0f, -0.0f, -100.0f, 1.0f});
  CHECK(y[0] == kInf);
  CHECK(y[1] == 0.0f);
  CHECK(y[2] == 0.0f);
  CHECK(y[3] == kInf);
  CHECK(y[4] == 0.0f);
  CHECK(std::isnan(y[5]));
  CHECK(y[6] == 1.0f);
  CHECK(y[7] == 1.0f);
  CHECK(y[8] == static_cast<float>(std::exp(-100.0)));  // a denormal, rounded once
  CHECK(y[9] == static_cast<float>(std::exp(1.0)));
}

TEST_CASE("vectorized tanh is within 2 ulp of libm", "[vecmath]") {
  float at = 0;
  CHECK(maxUlps(VecFn::Tanh, [](double v) { return std::tanh(v); }, sweep(-12.0f, 12.0f, 1031),
                &at) <= 2);
  INFO("worst at " << at);
  const std::vector<float> y = applyFn(VecFn::Tanh, {kInf, -kInf, kNaN, -0.0f, 1e-30f, 20.0f});
  CHECK(y[0] == 1.0f);
  CHECK(y[1] == -1.0f);
  CHECK(std::isnan(y[2]));
  CHECK((y[3] == 0.0f && std::signbit(y[3])));
  CHECK(y[4] == 1e-30f);
  CHECK(y[5] == 1.0f);
}

TEST_CASE("vectorized erf is within 3 ulp of libm", "[vecmath]") {
  float at = 0;
  CHECK(maxUlps(VecFn::Erf, [](double v) { return std::erf(v); }, sweep(-6.0f, 6.0f, 1031), &at) <=
        3);
  INFO("worst at " << at);
  const std::vector<float> y = applyFn(VecFn::Erf, {kInf, -kInf, kNaN, -0.0f, 1e-30f, 1.0f});
  CHECK(y[0] == 1.0f);
  CHECK(y[1] == -1.0f);
  CHECK(std::isnan(y[2]));
  CHECK((y[3] == 0.0f && std::signbit(y[3])));
  CHECK(std::llabs(ordered(y[4]) - ordered(static_cast<float>(std::erf(1e-30)))) <= 1);
  CHECK(std::abs(y[5] - std::erf(1.0)) < 1.2e-7);
}

TEST_CASE("vectorized activations follow their formulas", "[vecmath]") {
  // Relative to the double formula, with 1e-7 absolute where the result is
  // tiny: 1 + erf(x) and 1 + tanh(x) cancel for x far below 0, in float32
  // as in torch's own formula.
  const std::vector<float> xs = sweep(-20.0f, 20.0f, 4099);
  struct Case {
    VecFn fn;
    std::function<double(double)> ref;
  };
  const double kPi = 3.14159265358979323846;
  const std::vector<Case> cases = {
      {VecFn::Sigmoid, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }},
      {VecFn::Silu, [](double v) { return v / (1.0 + std::exp(-v)); }},
      {VecFn::GeluErf, [](double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); }},
      {VecFn::GeluTanh,
       [&](double v) {
         return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / kPi) * (v + 0.044715 * v * v * v)));
       }},
  };
  for (const Case &c : cases) {
    const std::vector<float> y = applyFn(c.fn, xs);
    double worst = 0;
    float at = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const double want = c.ref(xs[i]);
      const double err = std::abs(y[i] - want) / (std::abs(want) + 0.05);
      if (err > worst) {
        worst = err;
        at = xs[i];
      }
    }
    INFO("function " << static_cast<int>(c.fn) << " worst at " << at << " got " << applyFn(c.fn, {at})[0] << " want " << c.ref(at));
    CHECK(worst < 2e-6);  // i.e. |error| <= 2e-6 |want| + 1e-7
  }
}

TEST_CASE("vectorized math gives the same bits on every instruction set and offset",
          "[vecmath]") {
  const std::vector<float> xs = sweep(-30.0f, 30.0f, 65537);
  for (VecFn fn : {VecFn::Exp, VecFn::Tanh, VecFn::Erf, VecFn::Sigmoid, VecFn::Silu,
                   VecFn::GeluErf, VecFn::GeluTanh}) {
    std::vector<std::vector<float>> byLevel;
    for (int level = 2; level >= 0; --level) {
      setVecMathLevel(level);
      byLevel.push_back(applyFn(fn, xs));
      // Every start offset: elements move between vector lanes and the tail.
      for (int64_t off = 1; off < 17; ++off) {
        std::vector<float> y(xs.size() - off);
        vecApply(fn, xs.data() + off, y.data(), static_cast<int64_t>(y.size()));
        REQUIRE(std::memcmp(y.data(), byLevel.back().data() + off, y.size() * 4) == 0);
      }
      // In place.
      std::vector<float> inPlace = xs;
      vecApply(fn, inPlace.data(), inPlace.data(), static_cast<int64_t>(inPlace.size()));
      REQUIRE(std::memcmp(inPlace.data(), byLevel.back().data(), xs.size() * 4) == 0);
    }
    setVecMathLevel(2);
    INFO("function " << static_cast<int>(fn) << ", this CPU's widest: " << vecMathIsa());
    CHECK(std::memcmp(byLevel[0].data(), byLevel[1].data(), xs.size() * 4) == 0);
    CHECK(std::memcmp(byLevel[0].data(), byLevel[2].data(), xs.size() * 4) == 0);
  }
  // exp(x - shift) is exp of the float difference.
  std::vector<float> shifted(xs.size()), diff(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) diff[i] = xs[i] - 3.5f;
  vecExpShifted(xs.data(), 3.5f, shifted.data(), static_cast<int64_t>(xs.size()));
  const std::vector<float> direct = applyFn(VecFn::Exp, diff);
  CHECK(std::memcmp(shifted.data(), direct.data(), xs.size() * 4) == 0);
}
