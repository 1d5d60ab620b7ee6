// grid_sample on the CPU (runtime/cpu/SampleKernels.cpp) against a direct
// reading in double written from torch's scalar fallback kernel
// (GridSampler.cpp: its unnormalize, fmod-based reflection and corner-
// distance weights, a formulation apart from the vectorized one the kernel
// follows), every mode, padding and alignment, grids reaching past x's
// edges; thread invariance; and the rule's errors.
#include "FamilyTestSupport.h"

#include "runtime/OpRules.h"
#include "runtime/OpTable.h"
#include "runtime/RuntimeError.h"
#include "runtime/cpu/FamilyKernels.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

using namespace shardc::runtime;
using namespace shardc::runtime::familytest;

namespace {

double unnormalize(double c, int64_t size, bool align) {
  return align ? ((c + 1) / 2) * double(size - 1) : ((c + 1) * double(size) - 1) / 2;
}

double clip(double c, int64_t size) { return std::min(double(size - 1), std::max(c, 0.0)); }

/// torch's reflect_coordinates: bounds given as twice their value.
double reflect(double in, int64_t twiceLow, int64_t twiceHigh) {
  if (twiceLow == twiceHigh) return 0;
  const double min = double(twiceLow) / 2, span = double(twiceHigh - twiceLow) / 2;
  in = std::fabs(in - min);
  const double extra = std::fmod(in, span);
  const int flips = int(std::floor(in / span));
  return flips % 2 == 0 ? extra + min : span - extra + min;
}

double source(double c, int64_t size, const SampleParams &p) {
  double at = unnormalize(c, size, p.alignCorners);
  if (p.padding == SamplePadding::Border) return clip(at, size);
  if (p.padding == SamplePadding::Reflection) {
    at = p.alignCorners ? reflect(at, 0, 2 * (size - 1)) : reflect(at, -1, 2 * size - 1);
    return clip(at, size);
  }
  return at;
}

std::vector<double> reference(const SampleParams &p, const TT &x, const TT &grid) {
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t Ho = grid.shape[1], Wo = grid.shape[2];
  std::vector<double> out(size_t(N * C * Ho * Wo), 0.0);
  auto value = [&](int64_t n, int64_t c, int64_t yy, int64_t xx) {
    if (yy < 0 || yy >= H || xx < 0 || xx >= W) return 0.0;
    return x.at(((n * C + c) * H + yy) * W + xx);
  };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ho = 0; ho < Ho; ++ho)
      for (int64_t wo = 0; wo < Wo; ++wo) {
        const int64_t g = ((n * Ho + ho) * Wo + wo) * 2;
        const double ix = source(grid.at(g), W, p), iy = source(grid.at(g + 1), H, p);
        for (int64_t c = 0; c < C; ++c) {
          double v;
          if (p.mode == SampleMode::Nearest) {
            v = value(n, c, int64_t(std::nearbyint(iy)), int64_t(std::nearbyint(ix)));
          } else {
            const int64_t x0 = int64_t(std::floor(ix)), y0 = int64_t(std::floor(iy));
            const double x1 = double(x0 + 1), y1 = double(y0 + 1);
            v = value(n, c, y0, x0) * (x1 - ix) * (y1 - iy) +
                value(n, c, y0, x0 + 1) * (ix - x0) * (y1 - iy) +
                value(n, c, y0 + 1, x0) * (x1 - ix) * (iy - y0) +
                value(n, c, y0 + 1, x0 + 1) * (ix - x0) * (iy - y0);
          }
          out[size_t(((n * C + c) * Ho + ho) * Wo + wo)] = v;
        }
      }
  return out;
}

/// A grid of random positions in [-1.4, 1.4] (past both edges), with the
/// corners, the centre and exact pixel centres among them.
TT makeGrid(DType dtype, int64_t N, int64_t Ho, int64_t Wo, uint32_t seed) {
  TT grid = random(dtype, {N, Ho, Wo, 2}, seed, -1.4, 1.4);
  const double fixed[][2] = {{-1, -1}, {1, 1}, {0, 0}, {-1, 1}, {0.5, -0.5}, {1.0 / 3, 0.25}};
  for (int64_t i = 0; i < 6 && i < Ho * Wo; ++i) {
    grid.set(2 * i, fixed[i][0]);
    grid.set(2 * i + 1, fixed[i][1]);
  }
  return grid;
}

const char *modeName(SampleMode m) { return m == SampleMode::Nearest ? "nearest" : "bilinear"; }
const char *paddingName(SamplePadding p) {
  return p == SamplePadding::Zeros ? "zeros" : p == SamplePadding::Border ? "border" : "reflection";
}

}  // namespace

TEST_CASE("grid_sample reads x as torch does, every mode, padding and alignment",
          "[families][sample]") {
  for (DType dtype : {DType::F32, DType::F64, DType::BF16, DType::F16})
    for (SampleMode mode : {SampleMode::Bilinear, SampleMode::Nearest})
      for (SamplePadding padding :
           {SamplePadding::Zeros, SamplePadding::Border, SamplePadding::Reflection})
        for (bool align : {false, true}) {
          INFO(shardc::plan::dtypeName(dtype) << " " << modeName(mode) << " "
                                              << paddingName(padding) << " align_corners "
                                              << align);
          const SampleParams p{mode, padding, align};
          TT x = random(dtype, {2, 3, 5, 7}, 11, -2, 2);
          TT grid = makeGrid(dtype, 2, 4, 6, 12);
          TT y = zeros(dtype, {2, 3, 4, 6});
          gridSampleKernel(p, x.k(), grid.k(), y.k(), 1);
          const std::vector<double> want = reference(p, x, grid);
          // float math on exact inputs, then one rounding into the dtype
          const double mathTol = dtype == DType::F64 ? 1e-12 : 2e-6;
          for (int64_t i = 0; i < y.numel(); ++i) {
            INFO("element " << i);
            CHECK(std::fabs(y.at(i) - want[size_t(i)]) <=
                  mathTol * 8 + storageRounding(dtype) * std::fabs(want[size_t(i)]) * 1.01);
          }
          TT y3 = zeros(dtype, {2, 3, 4, 6});
          gridSampleKernel(p, x.k(), grid.k(), y3.k(), 3);
          CHECK(y3.bytes == y.bytes);
        }
}

TEST_CASE("grid_sample: positions past the edges read 0 with zeros padding, the edge with border",
          "[families][sample]") {
  // x [1, 1, 2, 2] = [[1, 2], [3, 4]]; align_corners: -1 and 1 are the
  // pixel centres, so 1.5 lies half a pixel past the right edge.
  TT x = fromValues(DType::F32, {1, 1, 2, 2}, {1, 2, 3, 4});
  TT grid = fromValues(DType::F32, {1, 1, 3, 2}, {0, 0, 3, -1, -1, 5});
  TT y = zeros(DType::F32, {1, 1, 1, 3});
  gridSampleKernel({SampleMode::Bilinear, SamplePadding::Zeros, true}, x.k(), grid.k(), y.k(), 1);
  CHECK(y.at(0) == 2.5);  // the mean of the four
  CHECK(y.at(1) == 0.0);  // x = 3: two pixels past the right edge
  CHECK(y.at(2) == 0.0);
  gridSampleKernel({SampleMode::Bilinear, SamplePadding::Border, true}, x.k(), grid.k(), y.k(), 1);
  CHECK(y.at(1) == 2.0);  // clamped to the top-right pixel
  CHECK(y.at(2) == 3.0);  // clamped to the bottom-left pixel
}

TEST_CASE("grid_sample's rule names what is wrong", "[families][sample]") {
  const shardc::plan::OpInfo &info = shardc::plan::opInfo(shardc::plan::OpCode::GridSample);
  using TTy = TensorType;
  auto typeOf = [&](std::vector<TTy> operands, AttrMap attrs = {}) {
    return resultType(info, operands, attrs);
  };
  const TTy x{{2, 3, 5, 7}, DType::F32}, grid{{2, 4, 6, 2}, DType::F32};
  CHECK(typeOf({x, grid}) == TTy{{2, 3, 4, 6}, DType::F32});
  CHECK_THROWS_WITH(typeOf({TTy{{3, 5, 7}, DType::F32}, grid}),
                    Catch::Contains("x must be 4-d [N, C, H, W], got [3, 5, 7]"));
  CHECK_THROWS_WITH(
      typeOf({x, TTy{{2, 4, 6, 3}, DType::F32}}),
      Catch::Contains("grid must be [N, Ho, Wo, 2] with x's N = 2, got [2, 4, 6, 3]"));
  CHECK_THROWS_WITH(typeOf({x, TTy{{1, 4, 6, 2}, DType::F32}}), Catch::Contains("grid must be"));
  CHECK_THROWS_WITH(typeOf({x, TTy{{2, 4, 6, 2}, DType::BF16}}),
                    Catch::Contains("operands differ in dtype"));
  CHECK_THROWS_WITH(typeOf({x, grid}, {{"mode", std::string("bicubic")}}),
                    Catch::Contains("mode must be \"bilinear\" or \"nearest\", got \"bicubic\""));
  CHECK_THROWS_WITH(typeOf({x, grid}, {{"padding_mode", std::string("wrap")}}),
                    Catch::Contains("padding_mode must be"));
  CHECK_THROWS_WITH(typeOf({x, grid}, {{"align_corners", int64_t{2}}}),
                    Catch::Contains("align_corners must be 0 or 1"));
}
