// ExactSquareSum (runtime/ExactSquareSum.h): the sum behind grad_norm is
// exact, so it does not depend on the order, the threads or the ranks, and
// it is rounded once.
#include "runtime/ExactSquareSum.h"
#include "runtime/LocalCommunicator.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <thread>
#include <vector>

using namespace shardc::runtime;
using namespace std::chrono_literals;

namespace {

std::vector<float> randomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  // Magnitudes over many binades, as a gradient's are.
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-40, 10);
  std::vector<float> values(n);
  for (float &v : values) v = std::ldexp(mantissa(rng), exponent(rng));
  return values;
}

double sumOf(const std::vector<float> &values) {
  ExactSquareSum sum;
  sum.addFloats(values.data(), static_cast<int64_t>(values.size()));
  return sum.value();
}

}  // namespace

TEST_CASE("exact square sum: rounded once, where summing in double is not", "[exact-sum]") {
  // 1 + three squares of 2^-54: summed in double each vanishes (1 + 2^-54
  // rounds to 1); exactly, 1 + 1.5 * 2^-53 rounds up to 1 + 2^-52.
  const float tiny = std::ldexp(1.0f, -27);
  std::vector<float> values{1.0f, tiny, tiny, tiny};
  CHECK(sumOf(values) == 1.0 + std::ldexp(1.0, -52));
  // Two of them are exactly half an ulp: ties go to even, 1.
  CHECK(sumOf({1.0f, tiny, tiny}) == 1.0);
  // Integers: their squares' sum is exact in double too.
  CHECK(sumOf({3.0f, -4.0f, 12.0f}) == 169.0);
  CHECK(sumOf({}) == 0.0);
  CHECK(sumOf({0.0f, -0.0f}) == 0.0);
  // A float32 subnormal's square (2^-298) is a double.
  const float smallest = std::numeric_limits<float>::denorm_min();
  CHECK(sumOf({smallest}) == std::ldexp(1.0, -298));
  // The largest float32's square is a double too.
  const float largest = std::numeric_limits<float>::max();
  CHECK(sumOf({largest}) == double(largest) * double(largest));
}

TEST_CASE("exact square sum: doubles, and what is not finite", "[exact-sum]") {
  ExactSquareSum sum;
  const double values[] = {1.0, std::ldexp(1.0, -30), 3.0};
  sum.addDoubles(values, 3);
  // 1 + 2^-60 + 9: exactly 10 + 2^-60, which rounds to 10.
  CHECK(sum.value() == 10.0);
  ExactSquareSum huge;
  const double big[] = {std::ldexp(1.0, 600), std::ldexp(1.0, 600)};
  huge.addDoubles(big, 2);
  CHECK(std::isinf(huge.value()));
  ExactSquareSum withInf, withNan;
  const float inf[] = {1.0f, std::numeric_limits<float>::infinity()};
  const float nan[] = {std::numeric_limits<float>::quiet_NaN(),
                       std::numeric_limits<float>::infinity()};
  withInf.addFloats(inf, 2);
  withNan.addFloats(nan, 2);
  CHECK(std::isinf(withInf.value()));
  CHECK(std::isnan(withNan.value()));
}

TEST_CASE("exact square sum: any order and any partition give the same bits", "[exact-sum]") {
  std::vector<float> values = randomFloats(100000, 7);
  const double whole = sumOf(values);
  // Close to the long double sum: one rounding away from the exact value.
  long double reference = 0;
  for (float v : values) reference += static_cast<long double>(v) * v;
  CHECK(std::abs(whole - static_cast<double>(reference)) <= 1e-15 * whole);

  std::shuffle(values.begin(), values.end(), std::mt19937(3));
  CHECK(std::bit_cast<uint64_t>(sumOf(values)) == std::bit_cast<uint64_t>(whole));
  for (int parts : {2, 3, 7, 64}) {
    ExactSquareSum merged;
    const size_t per = (values.size() + parts - 1) / parts;
    for (int p = 0; p < parts; ++p) {
      const size_t begin = std::min(values.size(), p * per);
      const size_t end = std::min(values.size(), begin + per);
      ExactSquareSum part;
      part.addFloats(values.data() + begin, static_cast<int64_t>(end - begin));
      merged.merge(part);
    }
    CHECK(std::bit_cast<uint64_t>(merged.value()) == std::bit_cast<uint64_t>(whole));
  }
}

TEST_CASE("globalNorm: the same bits on every rank and at every world size", "[exact-sum]") {
  const std::vector<float> values = randomFloats(30011, 11);
  const double single = std::sqrt(sumOf(values));
  for (int ranks : {1, 2, 3, 8}) {
    LocalGroup group(ranks, 10s);
    std::vector<double> norms(ranks);
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r)
      threads.emplace_back([&, r] {
        LocalCommunicator comm(group, r);
        // Rank r holds every ranks-th value: any split gives the same sum.
        std::vector<float> mine;
        for (size_t i = r; i < values.size(); i += ranks) mine.push_back(values[i]);
        ExactSquareSum local;
        local.addFloats(mine.data(), static_cast<int64_t>(mine.size()));
        norms[r] = globalNorm(comm, local);
      });
    for (auto &t : threads) t.join();
    for (double norm : norms)
      CHECK(std::bit_cast<uint64_t>(norm) == std::bit_cast<uint64_t>(single));
  }
}
