// Accuracy of our own transcendental functions (InitMath.h) against libm,
// which is the reference here and never used by the kernels themselves.
#include "runtime/init/InitMath.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>

using namespace shardc::runtime::init;

namespace {

/// Distance in ulps of `got` from `want` (want in higher precision).
double ulpsF(float got, double want) {
  double ulp = std::ldexp(1.0, std::ilogb(static_cast<float>(want)) - 23);
  return std::abs(static_cast<double>(got) - want) / ulp;
}
double ulpsD(double got, long double want) {
  long double ulp = std::ldexp(1.0L, std::ilogb(static_cast<double>(want)) - 52);
  return static_cast<double>(std::fabs(static_cast<long double>(got) - want) / ulp);
}

/// erfinv in long double by Newton from libm's erfl/erfcl: the reference.
/// The starting point is Winitzki's closed-form approximation (relative error
/// about 2e-3), which shares nothing with the runtime's erfinv; Newton then
/// converges quadratically, so 8 steps reach long double precision.
long double referenceErfinv(long double t) {
  const long double a = std::fabs(t);
  if (a == 0) return t;
  const long double pi = 3.14159265358979323846264338327950288L;
  const long double k = 0.147L;
  const long double l = std::log1p(-a * a);  // ln(1 - a^2), accurate near a = 0
  const long double first = 2.0L / (pi * k) + l / 2.0L;
  long double y = std::sqrt(std::sqrt(first * first - l / k) - first);
  for (int i = 0; i < 8; ++i) {
    // erf(y) - a, written as (1 - a) - erfc(y) near 1 where erf loses digits.
    long double f = a < 0.5L ? std::erfl(y) - a : (1.0L - a) - std::erfcl(y);
    long double fprime = 2.0L / std::sqrt(pi) * std::exp(-y * y);
    y -= f / fprime;
  }
  return t < 0 ? -y : y;
}

/// d erfinv(y) / dy at y = erf(x): how much an error in y moves erfinv(y).
double erfinvSlopeAt(double x) { return std::sqrt(M_PI) / 2 * std::exp(x * x); }

}  // namespace

TEST_CASE("own float log, sincos and erfinv stay within a few ulp of libm", "[init][math]") {
  double worstLog = 0, worstSin = 0, worstCos = 0;
  for (uint32_t m = 1; m <= (1u << 24); m += 61) {
    float u = static_cast<float>(m) * 0x1p-24f;
    worstLog = std::max(worstLog, u == 1.0f ? 0.0 : ulpsF(math::logF(u), std::log(static_cast<double>(u))));
    float s, c;
    math::sinCosTurnF(m & 0xffffffu, &s, &c);
    double angle = 2 * M_PI * static_cast<double>(m & 0xffffffu) * 0x1p-24;
    // Absolute error in units of 2^-24 (sin/cos near zero make relative ulps meaningless).
    worstSin = std::max(worstSin, std::abs(s - std::sin(angle)) * 0x1p24);
    worstCos = std::max(worstCos, std::abs(c - std::cos(angle)) * 0x1p24);
  }
  std::printf("float: log max %.2f ulp, sin/cos max abs error %.2f / %.2f x 2^-24\n", worstLog, worstSin,
              worstCos);
  CHECK(worstLog <= 2.0);
  CHECK(worstSin <= 2.0);
  CHECK(worstCos <= 2.0);

  double worstErfinv = 0;
  for (int i = -99999; i <= 99999; ++i) {
    float x = static_cast<float>(i) / 100000.0f;
    double want = static_cast<double>(referenceErfinv(static_cast<long double>(x)));
    if (x != 0) worstErfinv = std::max(worstErfinv, ulpsF(math::erfinvF(x), want));
  }
  std::printf("float: erfinv max %.2f ulp on [-0.99999, 0.99999]\n", worstErfinv);
  CHECK(worstErfinv <= 3.5);  // docs/rng.md: 3.27
}

TEST_CASE("own double log, exp, sincos, erf and erfinv stay within a few ulp", "[init][math]") {
  double worstLog = 0, worstExp = 0, worstSin = 0, worstErf = 0, worstErfc = 0, worstErfinv = 0;
  uint64_t state = 12345;
  auto next = [&] { state = state * 6364136223846793005ull + 1442695040888963407ull; return state; };
  for (int i = 0; i < 200000; ++i) {
    uint64_t m = next() >> 11;
    double u = static_cast<double>(m + 1) * 0x1p-53;
    if (u != 1.0) worstLog = std::max(worstLog, ulpsD(math::logD(u), std::log(static_cast<long double>(u))));
    double x = (static_cast<double>(next() >> 11) * 0x1p-53 - 0.5) * 1400;
    worstExp = std::max(worstExp, ulpsD(math::expD(x), std::exp(static_cast<long double>(x))));
    double s, c;
    math::sinCosTurnD(m, &s, &c);
    long double angle = 2 * 3.14159265358979323846264338327950288L * static_cast<long double>(m) * 0x1p-53L;
    worstSin = std::max(worstSin, static_cast<double>(std::fabs(s - std::sin(angle)) * 0x1p53L));
    worstSin = std::max(worstSin, static_cast<double>(std::fabs(c - std::cos(angle)) * 0x1p53L));
    double y = static_cast<double>(next() >> 11) * 0x1p-53 * 6;
    worstErf = std::max(worstErf, ulpsD(math::erfD(y), std::erf(static_cast<long double>(y))));
    if (y > 0.4 && y < 26) worstErfc = std::max(worstErfc, ulpsD(math::erfcD(y), std::erfc(static_cast<long double>(y))));
    double t = static_cast<double>(next() >> 11) * 0x1p-53 * 2 - 1;
    if (t != 0) worstErfinv = std::max(worstErfinv, ulpsD(math::erfinvD(t), referenceErfinv(t)));
  }
  std::printf("double: log %.2f, exp %.2f, sin/cos abs %.2f x 2^-53, erf %.2f, erfc %.2f, erfinv %.2f ulp\n",
              worstLog, worstExp, worstSin, worstErf, worstErfc, worstErfinv);
  CHECK(worstLog <= 2.5);
  CHECK(worstExp <= 2.0);
  CHECK(worstSin <= 2.0);
  // Near the figures docs/rng.md documents (erf 2.98, erfc 4.15, erfinv 3.76).
  CHECK(worstErf <= 3.0);
  CHECK(worstErfc <= 4.5);
  CHECK(worstErfinv <= 4.0);
}

TEST_CASE("erfinv special values and erfinv(erf(x)) == x", "[init][math]") {
  CHECK(std::isinf(math::erfinvF(1.0f)));
  CHECK(math::erfinvF(1.0f) > 0);
  CHECK(math::erfinvF(-1.0f) < 0);
  CHECK(std::isnan(math::erfinvF(1.5f)));
  CHECK(std::isnan(math::erfinvF(std::nanf(""))));
  CHECK(math::erfinvF(0.0f) == 0.0f);
  CHECK(std::isinf(math::erfinvD(-1.0)));
  CHECK(std::isnan(math::erfinvD(-1.0000001)));
  // The round trip can be no better than the rounding of erf(x) to the
  // working precision, magnified by erfinv's slope (which reaches 6.4e10 at
  // |x| = 5): the bound is the documented erfinv error (4 ulp of x) plus one
  // ulp of erf(x) (libm's rounding, and the half ulp of storing it) times the
  // slope.
  for (double x = -5.0; x <= 5.0; x += 0.01) {
    double y = std::erf(x);
    double ulpX = std::ldexp(1.0, std::ilogb(x) - 52), ulpY = std::ldexp(1.0, std::ilogb(y) - 52);
    INFO("x = " << x);
    CHECK(std::abs(math::erfinvD(y) - x) <= 4 * ulpX + erfinvSlopeAt(x) * ulpY);
    if (std::abs(x) < 3.5) {
      float yF = static_cast<float>(y);
      double ulpXF = std::ldexp(1.0, std::ilogb(static_cast<float>(x)) - 23);
      double ulpYF = std::ldexp(1.0, std::ilogb(yF) - 23);
      CHECK(std::abs(math::erfinvF(yF) - x) <= 4 * ulpXF + erfinvSlopeAt(x) * ulpYF);
    }
  }
}

TEST_CASE("exp, log, expm1 and softplus's inverse on every input", "[init][math]") {
  double worstExp = 0, worstLog = 0, worstExpm1 = 0, worstInverse = 0;
  uint64_t state = 777;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state;
  };
  for (int i = 0; i < 200000; ++i) {
    double x = (static_cast<double>(next() >> 11) * 0x1p-53 - 0.5) * 1400;
    worstExp = std::max(worstExp, ulpsD(math::expAnyD(x), std::exp(static_cast<long double>(x))));
    // log over many binades, subnormals included
    double y = std::ldexp(static_cast<double>(next() >> 11) * 0x1p-53 + 0.5,
                          static_cast<int>(next() % 2090) - 1070);  // 2^-1071 .. 2^1020
    if (y != 1.0 && y > 0)
      worstLog = std::max(worstLog, ulpsD(math::logAnyD(y), std::log(static_cast<long double>(y))));
    // expm1 near 0 (where exp(x) - 1 cancels) and away from it
    double z = std::ldexp(static_cast<double>(next() >> 11) * 0x1p-53 - 0.5,
                          static_cast<int>(next() % 40) - 30);
    if (z != 0)
      worstExpm1 =
          std::max(worstExpm1, ulpsD(math::expm1AnyD(z), std::expm1(static_cast<long double>(z))));
    // softplus's inverse on Mamba's dt range and beyond: (0, 40)
    double dt = std::ldexp(static_cast<double>(next() >> 11) * 0x1p-53 + 0.5,
                           static_cast<int>(next() % 24) - 18);
    // Torch's formula cancels where the result nears 0 (dt near log 2): the
    // error is measured in ulps of the larger of its two terms.
    long double logTerm = std::log(-std::expm1(-static_cast<long double>(dt)));
    long double want = static_cast<long double>(dt) + logTerm;
    double larger = std::max(dt, static_cast<double>(std::fabs(logTerm)));
    long double ulpDt = std::ldexp(1.0L, std::ilogb(larger) - 52);
    worstInverse = std::max(
        worstInverse, static_cast<double>(std::fabs(math::inverseSoftplusD(dt) - want) / ulpDt));
  }
  std::printf(
      "double: exp %.2f, log %.2f, expm1 %.2f ulp, inverse_softplus %.2f ulp of its larger term\n",
      worstExp, worstLog, worstExpm1, worstInverse);
  CHECK(worstExp <= 2.0);
  CHECK(worstLog <= 2.5);
  CHECK(worstExpm1 <= 3.5);
  CHECK(worstInverse <= 3.0);  // docs/rng.md gives the measured figures

  // torch's special values
  const double inf = INFINITY;
  CHECK(std::isnan(math::expAnyD(NAN)));
  CHECK(math::expAnyD(inf) == inf);
  CHECK(math::expAnyD(710.0) == inf);
  CHECK(math::expAnyD(-inf) == 0.0);
  CHECK(math::expAnyD(709.78) < inf);
  CHECK(std::isnan(math::logAnyD(-1.0)));
  CHECK(std::isnan(math::logAnyD(NAN)));
  CHECK(math::logAnyD(0.0) == -inf);
  CHECK(math::logAnyD(-0.0) == -inf);
  CHECK(math::logAnyD(inf) == inf);
  CHECK(math::logAnyD(1.0) == 0.0);
  CHECK(math::expm1AnyD(-inf) == -1.0);
  CHECK(math::expm1AnyD(inf) == inf);
  CHECK(std::signbit(math::expm1AnyD(-0.0)));
  CHECK(math::inverseSoftplusD(0.0) == -inf);
  CHECK(math::inverseSoftplusD(inf) == inf);
  CHECK(std::isnan(math::inverseSoftplusD(-0.5)));
  // float: the double result rounded once
  CHECK(math::expAnyF(1.0f) == static_cast<float>(math::expAnyD(1.0)));
  CHECK(math::logAnyF(1e-40f) == static_cast<float>(math::logAnyD(static_cast<double>(1e-40f))));
  CHECK(math::expAnyF(89.0f) == INFINITY);  // past float's range
  // One NaN bit pattern whatever the input's payload (CUDA's arithmetic
  // would give its canonical NaN where x86 keeps the payload).
  const float payloadF = math::floatOf(0xffc12345u);
  const double payloadD = math::doubleOf(0xfff0000000abcdefull);
  for (float nan : {math::expAnyF(payloadF), math::logAnyF(-1.0f), math::expm1AnyF(payloadF),
                    math::inverseSoftplusF(-0.5f), math::inverseSoftplusF(payloadF)})
    CHECK(math::bitsOf(nan) == math::bitsOf(math::kNanF));
  for (double nan : {math::expAnyD(payloadD), math::logAnyD(payloadD), math::expm1AnyD(payloadD),
                     math::inverseSoftplusD(-0.5), math::inverseSoftplusD(payloadD)})
    CHECK(math::bitsOf(nan) == math::bitsOf(math::kNanD));
}
