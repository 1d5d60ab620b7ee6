#include "runtime/HalfFloat.h"
#include "runtime/Kernels.h"
#include "runtime/RuntimeError.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

using namespace shardc::runtime;
using shardc::plan::DType;

TEST_CASE("float16 and bfloat16 conversions round to nearest even", "[kernels]") {
  CHECK(floatToHalfBits(1.0f) == 0x3c00);
  CHECK(floatToHalfBits(-2.0f) == 0xc000);
  CHECK(floatToHalfBits(65504.0f) == 0x7bff);
  CHECK(floatToHalfBits(65520.0f) == 0x7c00);  // halfway to 2^16 rounds to inf
  CHECK(floatToHalfBits(0x1p-24f) == 0x0001);  // smallest subnormal
  CHECK(floatToHalfBits(0x1p-25f) == 0x0000);  // halfway, ties to even (0)
  CHECK(floatToHalfBits(0x1.8p-24f) == 0x0002);  // 1.5 ulp, ties to even (2)
  CHECK(floatToHalfBits(1.0f + 0x1p-11f) == 0x3c00);  // tie -> even mantissa
  CHECK(floatToHalfBits(1.0f + 0x1.8p-10f) == 0x3c02);  // tie -> even (up)
  CHECK((floatToHalfBits(std::numeric_limits<float>::quiet_NaN()) & 0x7fff) > 0x7c00);
  CHECK(halfBitsToFloat(0x3555) == 0.333251953125f);
  CHECK(halfBitsToFloat(0x0001) == 0x1p-24f);
  for (uint32_t h = 0; h < 0x7c00; ++h)  // every finite half survives a round trip
    REQUIRE(floatToHalfBits(halfBitsToFloat(static_cast<uint16_t>(h))) == h);

  CHECK(floatToBFloat16Bits(1.0f) == 0x3f80);
  CHECK(floatToBFloat16Bits(1.0f + 0x1p-8f) == 0x3f80);   // tie -> even
  CHECK(floatToBFloat16Bits(1.0f + 0x3p-8f) == 0x3f82);   // tie -> even (up)
  CHECK(floatToBFloat16Bits(1.0f + 0x1.01p-8f) == 0x3f81);  // above tie
  CHECK(bfloat16BitsToFloat(0x3f80) == 1.0f);
  CHECK((floatToBFloat16Bits(std::numeric_limits<float>::quiet_NaN()) & 0x7fff) > 0x7f80);
}

TEST_CASE("fill writes every dtype", "[kernels]") {
  float f[3];
  fill(DType::F32, f, 3, 0.5);
  CHECK((f[0] == 0.5f && f[2] == 0.5f));
  double d[2];
  fill(DType::F64, d, 2, 0.1);
  CHECK(d[1] == 0.1);
  uint16_t h[2];
  fill(DType::F16, h, 2, 1.0);
  CHECK(h[1] == 0x3c00);
  fill(DType::BF16, h, 2, -1.0);
  CHECK(h[0] == 0xbf80);
}

TEST_CASE("sharded fill writes valid rows and zeroes the padding", "[kernels]") {
  float local[12];
  std::memset(local, 0xff, sizeof local);
  shardedFill(DType::F32, local, 12, 2, 3, 2.0);  // 4 local rows of 3, 2 valid
  for (int i = 0; i < 6; ++i) CHECK(local[i] == 2.0f);
  for (int i = 6; i < 12; ++i) CHECK(local[i] == 0.0f);
  shardedFill(DType::F32, local, 12, 0, 3, 2.0);  // a rank with only padding
  for (float v : local) CHECK(v == 0.0f);
}

TEST_CASE("add broadcasts like numpy", "[kernels]") {
  CHECK(broadcastShapes({2, 1, 3}, {4, 1}) == Shape{2, 4, 3});
  CHECK(broadcastShapes({}, {5}) == Shape{5});
  CHECK_FALSE(broadcastShapes({2, 3}, {4}).has_value());

  float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {10, 20, 30, 40, 50, 60}, out[24];
  add(DType::F32, a, {2, 3}, b, {2, 3}, out, {2, 3});
  CHECK(out[5] == 66.0f);
  float s = 0.5f;
  add(DType::F32, a, {2, 3}, &s, {1}, out, {2, 3});
  CHECK(out[0] == 1.5f);
  add(DType::F32, &s, {}, a, {2, 3}, out, {2, 3});
  CHECK(out[5] == 6.5f);
  // [2,1,3] + [4,1] -> [2,4,3]: out[i][j][k] = a[i][0][k] + b[j][0]
  float col[4] = {100, 200, 300, 400};
  add(DType::F32, a, {2, 1, 3}, col, {4, 1}, out, {2, 4, 3});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) REQUIRE(out[i * 12 + j * 3 + k] == a[i * 3 + k] + col[j]);
  double da[2] = {1, 2}, db[3] = {10, 20, 30}, dout[6];
  add(DType::F64, da, {2, 1}, db, {3}, dout, {2, 3});
  CHECK(dout[5] == 32.0);

  CHECK_THROWS_WITH(add(DType::F32, a, {2, 3}, b, {3, 2}, out, {2, 3}),
                    Catch::Contains("do not broadcast"));
  CHECK_THROWS_WITH(add(DType::F32, a, {2, 3}, b, {2, 3}, out, {3, 2}),
                    Catch::Contains("is not the broadcast shape"));
  CHECK_THROWS_WITH(add(DType::F16, a, {1}, b, {1}, out, {1}), Catch::Contains("float16"));
}
