#include "runtime/DeterministicInput.h"
#include "runtime/Philox.h"

#include <catch2/catch.hpp>

using namespace shardc::runtime;

namespace {
constexpr bool equals(philox::Counter c, uint32_t a, uint32_t b, uint32_t d, uint32_t e) {
  return c.v[0] == a && c.v[1] == b && c.v[2] == d && c.v[3] == e;
}
}  // namespace

// Known answers from Random123's kat_vectors (philox4x32_10).
static_assert(equals(philox::philox4x32_10({{0, 0, 0, 0}}, {{0, 0}}), 0x6627e8d5, 0xe169c58d,
                     0xbc57ac4c, 0x9b00dbd8),
              "Philox must be usable in constant expressions");

TEST_CASE("Philox4x32-10 matches the Random123 known-answer vectors", "[philox]") {
  CHECK(equals(philox::philox4x32_10({{0, 0, 0, 0}}, {{0, 0}}), 0x6627e8d5, 0xe169c58d,
               0xbc57ac4c, 0x9b00dbd8));
  CHECK(equals(philox::philox4x32_10({{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
                                     {{0xffffffff, 0xffffffff}}),
               0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd));
  CHECK(equals(philox::philox4x32_10({{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
                                     {{0xa4093822, 0x299f31d0}}),
               0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1));
}

TEST_CASE("FNV-1a-32 of known strings", "[philox]") {
  CHECK(philox::fnv1a32("", 0) == 0x811c9dc5u);
  CHECK(philox::fnv1a32("a", 1) == 0xe40c292cu);
}

TEST_CASE("deterministic inputs are uniform in [-1, 1) and reproducible", "[philox]") {
  HostTensor a = makeDeterministicInput("x", shardc::plan::DType::F32, {1000}, 7);
  HostTensor b = makeDeterministicInput("x", shardc::plan::DType::F32, {10, 100}, 7);
  HostTensor other = makeDeterministicInput("y", shardc::plan::DType::F32, {1000}, 7);
  CHECK(a.data == b.data);  // depends on the element index, not the shape
  CHECK(a.data != other.data);
  double sum = 0;
  for (int i = 0; i < 1000; ++i) {
    float v = a.as<float>()[i];
    REQUIRE(v >= -1.0f);
    REQUIRE(v < 1.0f);
    sum += v;
  }
  CHECK(std::abs(sum / 1000) < 0.1);
  // Element 0 by hand: word 0 of philox(counter {0, 0, fnv("x"), 0}, key {7, 0}).
  uint32_t word = philox::philox4x32_10({{0, 0, philox::fnv1a32("x", 1), 0}}, {{7, 0}}).v[0];
  CHECK(a.as<float>()[0] == static_cast<float>(word >> 8) / 16777216.0f * 2.0f - 1.0f);
  HostTensor d = makeDeterministicInput("x", shardc::plan::DType::F64, {1000}, 7);
  for (int i = 0; i < 1000; ++i) REQUIRE(d.as<double>()[i] == a.as<float>()[i]);
}
