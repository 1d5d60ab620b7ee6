// Dropout's mask (runtime/DropoutMask.h, docs/rng.md "Dropout masks") and
// its CPU kernel: the documented Philox vectors (computed independently by
// tools/torch_reference.py's numpy Philox), the keep threshold, the values
// kept and their scale per dtype, and the invariance that lets backward
// recompute the mask and data-parallel ranks continue the whole batch's:
// threads and a rank's rows change no bit.
#include "FamilyTestSupport.h"

#include "runtime/DropoutMask.h"
#include "runtime/OpFamilies.h"
#include "runtime/RuntimeError.h"
#include "runtime/cpu/FamilyKernels.h"

#include <catch2/catch.hpp>

#include <vector>

using namespace shardc::runtime;
using namespace shardc::runtime::familytest;

namespace {

TT stepCounter(float value) { return fromValues(DType::F32, {}, {value}); }

TT runDropout(const TT &x, double p, uint32_t stream, float step, uint64_t seed = 0,
              uint64_t offset = 0, int threads = 2) {
  TT y = zeros(x.dtype, x.shape);
  const TT counter = stepCounter(step);
  dropoutKernel({p, stream, 0, 0}, seed, offset, x.k(), counter.k(), y.k(), threads);
  return y;
}

}  // namespace

TEST_CASE("dropout: the docs/rng.md Philox vectors", "[dropout][rng-vectors]") {
  using W = std::vector<uint32_t>;
  auto words = [](uint64_t seed, uint32_t stream, uint32_t step, uint64_t block) {
    const philox::Counter c = dropout::maskWords(seed, stream, step, block);
    return W{c.v[0], c.v[1], c.v[2], c.v[3]};
  };
  CHECK(words(0, 0x01234567u, 3, 0) == W{0xc6abc9ffu, 0x23528625u, 0x8f0c8fd7u, 0x08b9839du});
  CHECK(words(0, 0x01234567u, 3, 1) == W{0xea908326u, 0xcb35032cu, 0x5138092bu, 0x54455f63u});
  // the seed's high word and the block's high word reach the counter
  CHECK(words(0x123456789abcdef0ull, 0xdeadbeefu, 7, (uint64_t{1} << 32) + 5) ==
        W{0xe5945458u, 0x2dbf4e7du, 0xb8602f10u, 0x26381818u});
}

TEST_CASE("dropout: the keep threshold is ceil(p 2^24)", "[dropout]") {
  CHECK(dropout::keepThreshold(0.0) == 0u);
  CHECK(dropout::keepThreshold(-0.5) == 0u);
  CHECK(dropout::keepThreshold(1.0) == 1u << 24);
  CHECK(dropout::keepThreshold(0.5) == 8388608u);
  CHECK(dropout::keepThreshold(0.1) == 1677722u);
  CHECK(dropout::keepThreshold(1e-9) == 1u);  // any p > 0 can drop
}

TEST_CASE("dropout: kept elements scaled by 1 / (1 - p), the rest zero", "[dropout]") {
  // ones at p = 0.5: the vectors' top-24-bit words against 8388608 decide
  // elements 0..7 (kept, dropped, kept, dropped, kept, kept, dropped, dropped)
  const TT ones = fromValues(DType::F32, {2, 4}, std::vector<double>(8, 1.0));
  const TT y = runDropout(ones, 0.5, 0x01234567u, 3);
  std::vector<double> got;
  for (int64_t i = 0; i < 8; ++i) got.push_back(y.at(i));
  CHECK(got == std::vector<double>{2, 0, 2, 0, 2, 2, 0, 0});

  const TT x = random(DType::F32, {64, 33}, 5, -3, 3);
  const TT kept = runDropout(x, 0.2, 77, 1);
  int64_t dropped = 0;
  const float scale = static_cast<float>(1.0 / 0.8);
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (kept.at(i) == 0.0) {
      ++dropped;
      continue;
    }
    CHECK(kept.at(i) == double(static_cast<float>(x.at(i)) * scale));  // one float rounding
  }
  CHECK(dropped > 0.17 * x.numel());  // 2112 elements at p = 0.2
  CHECK(dropped < 0.23 * x.numel());
  // another step, stream or seed: another mask
  CHECK(runDropout(x, 0.2, 77, 2).bytes != kept.bytes);
  CHECK(runDropout(x, 0.2, 78, 1).bytes != kept.bytes);
  CHECK(runDropout(x, 0.2, 77, 1, 1).bytes != kept.bytes);
  // p = 0 is the identity, p = 1 keeps nothing
  CHECK(runDropout(x, 0.0, 77, 1).bytes == x.bytes);
  CHECK(runDropout(x, 1.0, 77, 1).bytes == zeros(DType::F32, x.shape).bytes);
}

TEST_CASE("dropout: float64 in double, 16-bit floats in float rounded once", "[dropout]") {
  for (DType dt : {DType::F64, DType::BF16, DType::F16}) {
    const TT x = random(dt, {9, 13}, 11, -2, 2);
    const TT x32 = random(DType::F32, {9, 13}, 11, -2, 2);
    const TT y = runDropout(x, 0.3, 5, 4);
    const TT mask =
        runDropout(fromValues(DType::F32, {9, 13}, std::vector<double>(117, 1.0)), 0.3, 5, 4);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const bool kept = mask.at(i) != 0.0;
      double expected = 0;
      if (kept && dt == DType::F64)
        expected = x.at(i) * (1.0 / 0.7);
      else if (kept)
        expected =
            fromValues(dt, {}, {double(float(x.at(i)) * static_cast<float>(1.0 / 0.7))}).at(0);
      CHECK(y.at(i) == expected);
    }
    (void)x32;
  }
}

TEST_CASE("dropout: threads and a rank's rows change no bit", "[dropout]") {
  // 40000 elements: several chunks of the kernel's tasks
  const TT x = random(DType::F32, {16, 2500}, 3);
  const TT whole = runDropout(x, 0.4, 9, 12, 42, 0, 1);
  CHECK(runDropout(x, 0.4, 9, 12, 42, 0, 3).bytes == whole.bytes);
  // rank r of 4 holds rows [4r, 4r + 4): its mask continues the whole one
  const int64_t rowElements = 2500, rows = 4;
  for (int64_t r = 0; r < 4; ++r) {
    TT part = zeros(DType::F32, {rows, rowElements});
    part.bytes = x.slice(r * rows * rowElements, rows * rowElements);
    const TT y = runDropout(part, 0.4, 9, 12, 42, uint64_t(r * rows * rowElements));
    CHECK(y.bytes == whole.slice(r * rows * rowElements, rows * rowElements));
  }
}

TEST_CASE("dropout: a step counter that is not a whole number is refused", "[dropout]") {
  const TT x = random(DType::F32, {4}, 1);
  TT y = zeros(DType::F32, {4});
  const TT bad = stepCounter(2.5f);
  CHECK_THROWS_WITH(dropoutKernel({0.5, 1, 0, 0}, 0, 0, x.k(), bad.k(), y.k(), 1),
                    Catch::Contains("dropout: the step counter holds 2.5"));
  CHECK_THROWS_WITH(dropoutShape({4}, {1}, {0.5, 1, 0, 0}),
                    Catch::Contains("the step counter (operand 1) must be 0-d"));
  CHECK_THROWS_WITH(dropoutShape({4}, {}, {1.5, 1, 0, 0}), Catch::Contains("p must lie in [0, 1]"));
}
