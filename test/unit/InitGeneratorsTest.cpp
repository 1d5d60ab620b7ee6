// Properties of the init generators that make sharding safe (docs/design.md
// invariant 2): any range split, any gather order, any thread count and
// either kernel (AVX2 or scalar) give the same bits.
#include "runtime/HalfFloat.h"
#include "runtime/RuntimeError.h"
#include "runtime/init/CpuDispatch.h"
#include "runtime/init/Generators.h"
#include "InitTestSupport.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>

using namespace shardc::runtime;
namespace plan = shardc::plan;
using namespace shardc::runtime::init;
using namespace shardc::runtime::init::testing;

namespace {

/// n elements shaped so that eye has a 2-D shape: rows x 1 keeps n exact.
std::vector<int64_t> shapeOf(GeneratorKind kind, int64_t n) {
  if (kind == GeneratorKind::Eye) return {n, 1};
  return {n};
}

struct Avx2Off {
  Avx2Off() { setAvx2Allowed(false); }
  ~Avx2Off() { setAvx2Allowed(true); }
};

/// AVX2 allowed, AVX-512 not: the middle kernel on machines that have both.
struct Avx512Off {
  Avx512Off() { setAvx512Allowed(false); }
  ~Avx512Off() { setAvx512Allowed(true); }
};

}  // namespace

TEST_CASE("a range split anywhere equals the whole range, bit for bit", "[init][generators]") {
  for (GeneratorKind kind : allKinds()) {
    for (plan::DType dtype : allDTypes()) {
      for (int64_t n : {1, 3, 7, 1023, 4097}) {
        GeneratorSpec spec = specFor(kind, shapeOf(kind, n));
        std::vector<unsigned char> whole = generateBytes(spec, dtype, 0, n);
        const int64_t size = plan::dtypeSize(dtype);
        for (int64_t k : {int64_t{0}, int64_t{1}, n / 3, n / 2 + 1, n - 1, int64_t{5}, int64_t{33}, int64_t{1030}}) {
          if (k > n) continue;
          std::vector<unsigned char> joined = generateBytes(spec, dtype, 0, k);
          std::vector<unsigned char> rest = generateBytes(spec, dtype, k, n - k);
          joined.insert(joined.end(), rest.begin(), rest.end());
          INFO(generatorKindName(kind) << " " << plan::dtypeName(dtype) << " n=" << n << " k=" << k);
          REQUIRE(joined == whole);
        }
        // Uneven shards like FSDP's: 3 pieces of arbitrary lengths.
        if (n >= 7) {
          int64_t a = n / 7, b = n / 7 * 3 + 1;
          std::vector<unsigned char> middle = generateBytes(spec, dtype, a, b - a);
          REQUIRE(std::equal(middle.begin(), middle.end(), whole.begin() + a * size));
        }
      }
    }
  }
}

TEST_CASE("generateAt equals generateRange at the same indices", "[init][generators]") {
  const int64_t n = 1000;
  std::vector<int64_t> indices;
  for (int64_t k = 0; k < n; ++k) indices.push_back((k * 7919) % n);  // a permutation
  for (int64_t k : {999, 0, 0, 3, 998}) indices.push_back(k);
  for (GeneratorKind kind : allKinds()) {
    for (plan::DType dtype : allDTypes()) {
      GeneratorSpec spec = specFor(kind, kind == GeneratorKind::Eye ? std::vector<int64_t>{40, 25}
                                                                    : std::vector<int64_t>{n});
      std::vector<unsigned char> whole = generateBytes(spec, dtype, 0, n);
      const int64_t size = plan::dtypeSize(dtype);
      std::vector<unsigned char> gathered(indices.size() * static_cast<size_t>(size));
      generateAt(spec, dtype, indices.data(), static_cast<int64_t>(indices.size()), gathered.data());
      for (size_t k = 0; k < indices.size(); ++k) {
        INFO(generatorKindName(kind) << " " << plan::dtypeName(dtype) << " index " << indices[k]);
        REQUIRE(std::memcmp(&gathered[k * size], &whole[indices[k] * size], static_cast<size_t>(size)) == 0);
      }
    }
  }
}

TEST_CASE("thread count and kernel choice never change the bits", "[init][generators]") {
  const int64_t n = 40009;  // prime
  for (GeneratorKind kind : allKinds()) {
    for (plan::DType dtype : allDTypes()) {
      GeneratorSpec spec = specFor(kind, shapeOf(kind, n));
      INFO(generatorKindName(kind) << " " << plan::dtypeName(dtype));
      std::vector<unsigned char> one = generateBytes(spec, dtype, 3, n - 3, 1);
      CHECK(generateBytes(spec, dtype, 3, n - 3, 2) == one);
      CHECK(generateBytes(spec, dtype, 3, n - 3, 7) == one);
      {
        Avx512Off avx2Only;
        CHECK(!useAvx512());
        CHECK(generateBytes(spec, dtype, 3, n - 3, 1) == one);
      }
      Avx2Off scalarOnly;
      CHECK(!useAvx512());
      CHECK(!useAvx2());
      CHECK(generateBytes(spec, dtype, 3, n - 3, 1) == one);
    }
  }
  INFO("this machine " << (cpuHasAvx2Fma() ? "has" : "lacks") << " AVX2+FMA and "
                       << (cpuHasAvx512() ? "has" : "lacks") << " AVX-512F/DQ");
  CHECK(useAvx2() == cpuHasAvx2Fma());
  CHECK(useAvx512() == cpuHasAvx512());
  // Without AVX-512 its kernel was not compared: the ctest test
  // unit-cpu-features says so in the closing summary (CpuFeaturesTest.cpp).
  if (!cpuHasAvx512()) WARN("no AVX-512 on this CPU: its kernel was not compared");
}

TEST_CASE("AVX-512, AVX2 and scalar agree on extreme trunc_normal and uniform arguments", "[init][generators]") {
  std::vector<GeneratorSpec> specs;
  GeneratorSpec tail = specFor(GeneratorKind::TruncNormal, {4096});
  tail.low = -1e6;  // whole real line: erfinv sees t near +-1 and -1 itself
  tail.high = 1e6;
  specs.push_back(tail);
  GeneratorSpec far = specFor(GeneratorKind::TruncNormal, {4096});
  far.mean = 3; far.std = 0.5; far.low = 4.5; far.high = 9;  // one tail only
  specs.push_back(far);
  GeneratorSpec narrow = specFor(GeneratorKind::Uniform, {4096});
  narrow.low = 1; narrow.high = std::nextafter(1.0f, 2.0f);
  specs.push_back(narrow);
  GeneratorSpec scaled = specFor(GeneratorKind::Normal, {4096});
  scaled.mean = -7; scaled.std = 1e-3;
  specs.push_back(scaled);
  for (const GeneratorSpec &spec : specs) {
    std::vector<unsigned char> fast = generateBytes(spec, plan::DType::F32, 0, 4096);
    {
      Avx512Off avx2Only;
      CHECK(generateBytes(spec, plan::DType::F32, 0, 4096) == fast);
    }
    Avx2Off scalarOnly;
    CHECK(generateBytes(spec, plan::DType::F32, 0, 4096) == fast);
  }
}

TEST_CASE("kernels agree where the 64-bit Philox block counter carries into its high word",
          "[init][generators]") {
  // Block 2^32 starts at element 2^34 (4 float32 elements per block); the
  // vector kernels build each lane's 64-bit block number from the step's
  // first block in two 32-bit words and must carry into the high word as
  // the scalar kernel does.
  const int64_t firstElement = (int64_t{1} << 34) - 4 * 37;  // 37 blocks before the carry
  const int64_t count = 4 * 101;
  for (GeneratorKind kind : {GeneratorKind::Uniform, GeneratorKind::Normal,
                             GeneratorKind::TruncNormal}) {
    INFO(generatorKindName(kind));
    GeneratorSpec spec = specFor(kind, {int64_t{1} << 35});
    std::vector<unsigned char> fast = generateBytes(spec, plan::DType::F32, firstElement, count);
    {
      Avx512Off avx2Only;
      CHECK(generateBytes(spec, plan::DType::F32, firstElement, count) == fast);
    }
    Avx2Off scalarOnly;
    CHECK(generateBytes(spec, plan::DType::F32, firstElement, count) == fast);
  }
}

// docs/graph-format.md and docs/rng.md: float32/float64 uniform(a, b) is in
// [a, b); float16/bfloat16 are the float32 value rounded to nearest, so b
// itself occurs (as torch's own low-precision uniform_ does): about half a
// spacing below 1 rounds up, 2^-10 of bfloat16 and 2^-13 of float16 values.
TEST_CASE("low-precision uniform(-1, 1) is the rounded float32 value and can equal b",
          "[init][generators]") {
  const int64_t n = 1000000;
  const std::vector<float> wide = generateValues<float>(specFor(GeneratorKind::Uniform, {n}), n);
  for (float v : wide) REQUIRE((v >= -1.0f && v < 1.0f));
  struct Case {
    plan::DType dtype;
    uint16_t (*round)(float);
    float (*widen)(uint16_t);
    int64_t lowest, highest;  // bounds on how many equal b (expected n * 2^-10 or 2^-13)
  };
  const Case cases[] = {
      {plan::DType::BF16, floatToBFloat16Bits, bfloat16BitsToFloat, 700, 1300},
      {plan::DType::F16, floatToHalfBits, halfBitsToFloat, 60, 200},
  };
  for (const Case &c : cases) {
    std::vector<uint16_t> bits(static_cast<size_t>(n));
    generateRange(specFor(GeneratorKind::Uniform, {n}), c.dtype, 0, n, bits.data());
    int64_t atB = 0;
    for (int64_t i = 0; i < n; ++i) {
      REQUIRE(bits[i] == c.round(wide[i]));
      const float v = c.widen(bits[i]);
      REQUIRE((v >= -1.0f && v <= 1.0f));
      atB += v == 1.0f;
    }
    INFO(plan::dtypeName(c.dtype) << ": " << atB << " of " << n << " values equal b");
    CHECK(atB >= c.lowest);
    CHECK(atB <= c.highest);
  }
}

TEST_CASE("generator statistics: 1e6 samples", "[init][generators]") {
  const int64_t n = 1000000;
  auto moments = [](const auto &values) {
    double mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
    double var = 0;
    for (auto v : values) var += (v - mean) * (v - mean);
    return std::pair{mean, var / static_cast<double>(values.size())};
  };
  SECTION("uniform(-1, 1) inside [low, high), mean 0, variance 1/3") {
    auto values = generateValues<float>(specFor(GeneratorKind::Uniform, {n}), n);
    for (float v : values) REQUIRE((v >= -1.0f && v < 1.0f));
    auto [mean, var] = moments(values);
    CHECK(std::abs(mean) < 0.005);
    CHECK(std::abs(var - 1.0 / 3) < 0.005);
  }
  SECTION("uniform(2, 5) in float64") {
    GeneratorSpec spec = specFor(GeneratorKind::Uniform, {n});
    spec.low = 2; spec.high = 5;
    auto values = generateValues<double>(spec, n);
    for (double v : values) REQUIRE((v >= 2.0 && v < 5.0));
    auto [mean, var] = moments(values);
    CHECK(std::abs(mean - 3.5) < 0.01);
    CHECK(std::abs(var - 0.75) < 0.01);
  }
  SECTION("normal(0.5, 2)") {
    GeneratorSpec spec = specFor(GeneratorKind::Normal, {n});
    spec.mean = 0.5; spec.std = 2;
    for (int f64 = 0; f64 < 2; ++f64) {
      std::vector<double> values;
      if (f64) values = generateValues<double>(spec, n);
      else for (float v : generateValues<float>(spec, n)) values.push_back(v);
      auto [mean, var] = moments(values);
      CHECK(std::abs(mean - 0.5) < 0.01);
      CHECK(std::abs(var - 4.0) < 0.03);
      double fourth = 0;
      for (double v : values) fourth += std::pow((v - 0.5) / 2, 4);
      CHECK(std::abs(fourth / n - 3.0) < 0.05);  // kurtosis of a normal
    }
  }
  SECTION("trunc_normal(0, 1, -2, 2) inside [a, b], variance of the truncated normal") {
    auto values = generateValues<float>(specFor(GeneratorKind::TruncNormal, {n}), n);
    for (float v : values) REQUIRE((v >= -2.0f && v <= 2.0f));
    auto [mean, var] = moments(values);
    // Var of N(0,1) truncated to [-2, 2]: 1 - 2*2*phi(2)/(Phi(2)-Phi(-2)) = 0.773741
    CHECK(std::abs(mean) < 0.005);
    CHECK(std::abs(var - 0.773741) < 0.005);
  }
  SECTION("trunc_normal one-sided, float64 (1e5 samples: the double erfinv is slow)") {
    GeneratorSpec spec = specFor(GeneratorKind::TruncNormal, {100000});
    spec.mean = 1; spec.std = 0.5; spec.low = 1; spec.high = 10;  // half-normal from the mean
    auto values = generateValues<double>(spec, 100000);
    for (double v : values) REQUIRE((v >= 1.0 && v <= 10.0));
    auto [mean, var] = moments(values);
    CHECK(std::abs(mean - (1 + 0.5 * std::sqrt(2 / M_PI))) < 0.005);  // half-normal mean
  }
}

TEST_CASE("fill, eye and arange are exact", "[init][generators]") {
  GeneratorSpec eye = specFor(GeneratorKind::Eye, {3, 4});
  std::vector<float> e = generateValues<float>(eye, 12);
  CHECK(e == std::vector<float>{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0});
  GeneratorSpec arange = specFor(GeneratorKind::Arange, {5});
  arange.start = 1; arange.step = 0.1;
  std::vector<double> a = generateValues<double>(arange, 5);
  CHECK(a[3] == std::fma(3.0, 0.1, 1.0));
  GeneratorSpec fill = specFor(GeneratorKind::Fill, {3});
  fill.value = 0.1;
  CHECK(generateValues<float>(fill, 3) == std::vector<float>(3, 0.1f));
  // bfloat16 of 1 + 2^-8 + 2^-30 rounds up when rounded once from double;
  // rounding to float first would drop the 2^-30 and round to even (down).
  fill.value = 1.0 + 0x1p-8 + 0x1p-30;
  std::vector<unsigned char> bf = generateBytes(fill, plan::DType::BF16, 0, 1);
  uint16_t bits;
  std::memcpy(&bits, bf.data(), 2);
  CHECK(bits == 0x3f81);
}

TEST_CASE("values depend on seed, stream and position only", "[init][generators]") {
  GeneratorSpec base = specFor(GeneratorKind::Normal, {64});
  auto values = generateValues<float>(base, 64);
  GeneratorSpec bigger = specFor(GeneratorKind::Normal, {8, 1000});  // shape does not matter
  CHECK(generateValues<float>(bigger, 64) == values);
  GeneratorSpec otherName = specFor(GeneratorKind::Normal, {64}, 42, "h.1.attn.weight");
  CHECK(generateValues<float>(otherName, 64) != values);
  GeneratorSpec otherPosition = specFor(GeneratorKind::Normal, {64}, 42, "h.0.attn.weight", 1);
  CHECK(generateValues<float>(otherPosition, 64) != values);
  GeneratorSpec otherSeed = specFor(GeneratorKind::Normal, {64}, 43);
  CHECK(generateValues<float>(otherSeed, 64) != values);
  GeneratorSpec highSeed = specFor(GeneratorKind::Normal, {64}, 42 + (uint64_t{1} << 32));
  CHECK(generateValues<float>(highSeed, 64) != values);
}

TEST_CASE("invalid generator specs are rejected with the reason", "[init][generators]") {
  float out[16];
  GeneratorSpec eye = specFor(GeneratorKind::Eye, {16});
  CHECK_THROWS_WITH(generateRange(eye, plan::DType::F32, 0, 16, out), Catch::Contains("2-D"));
  GeneratorSpec trunc = specFor(GeneratorKind::TruncNormal, {16});
  trunc.low = 2; trunc.high = 2;
  CHECK_THROWS_WITH(generateRange(trunc, plan::DType::F32, 0, 16, out), Catch::Contains("a < b"));
  GeneratorSpec normal = specFor(GeneratorKind::Normal, {16});
  normal.std = -1;
  CHECK_THROWS_WITH(generateRange(normal, plan::DType::F32, 0, 16, out), Catch::Contains("std"));
  GeneratorSpec uniform = specFor(GeneratorKind::Uniform, {16});
  uniform.high = NAN;
  CHECK_THROWS_AS(generateRange(uniform, plan::DType::F32, 0, 16, out), RuntimeError);
  GeneratorSpec ok = specFor(GeneratorKind::Uniform, {16});
  CHECK_THROWS_WITH(generateRange(ok, plan::DType::F32, 10, 7, out), Catch::Contains("outside"));
  int64_t bad = 16;
  CHECK_THROWS_WITH(generateAt(ok, plan::DType::F32, &bad, 1, out), Catch::Contains("outside"));
  CHECK_NOTHROW(generateRange(ok, plan::DType::F32, 0, 0, out));
}
