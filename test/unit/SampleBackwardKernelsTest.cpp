// grid_sample's gradient on the CPU (runtime/cpu/SampleBackwardKernels.cpp),
// every mode, padding and alignment, in float64:
//  - the input's gradient against the adjoint of the forward kernel itself
//    (grid_sample is linear in x, so d<g, y>/dx[k] = <g, grid_sample(e_k)>);
//  - the grid's gradient against central differences of the forward kernel
//    (positions kept away from the kinks: pixel boundaries and the edges);
// thread invariance in float32; and the rule's errors.
#include "FamilyTestSupport.h"

#include "runtime/OpRules.h"
#include "runtime/OpTable.h"
#include "runtime/RuntimeError.h"
#include "runtime/cpu/FamilyKernels.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace shardc::runtime;
using namespace shardc::runtime::familytest;

namespace {

const Shape kX = {2, 3, 4, 5}, kGrid = {2, 3, 4, 2}, kY = {2, 3, 3, 4};

/// <g, grid_sample(x, grid)> in double.
double dot(const SampleParams &p, const TT &x, const TT &grid, const TT &g) {
  TT y = zeros(DType::F64, kY);
  gridSampleKernel(p, x.k(), grid.k(), y.k(), 1);
  double sum = 0;
  for (int64_t i = 0; i < y.numel(); ++i) sum += y.at(i) * g.at(i);
  return sum;
}

/// A grid whose source positions lie at least `margin` pixels from every
/// integer (a tap boundary, where the mix has a kink) and from the
/// reflection's mirror points, the positions spread past both edges.
TT smoothGrid(const SampleParams &p, uint32_t seed, double margin) {
  TT grid = random(DType::F64, kGrid, seed, -1.3, 1.3);
  for (int64_t i = 0; i < grid.numel(); ++i) {
    const int64_t size = i % 2 == 0 ? kX[3] : kX[2];
    const double scale = p.alignCorners ? double(size - 1) / 2 : double(size) / 2;
    const double shift = p.alignCorners ? 0.0 : 0.5;
    // Source position s = (c + 1) * scale - shift: move s off the integers
    // and half-integers (reflection mirrors at -0.5 / size - 0.5 unaligned).
    double s = (grid.at(i) + 1) * scale - shift;
    const double frac = s * 2 - std::floor(s * 2);
    if (frac < margin * 2) s += margin;
    if (frac > 1 - margin * 2) s -= margin;
    grid.set(i, (s + shift) / scale - 1);
  }
  return grid;
}

}  // namespace

TEST_CASE("grid_sample_backward: the input's gradient is the forward's adjoint, the grid's its "
          "slope",
          "[families][sample]") {
  for (SampleMode mode : {SampleMode::Bilinear, SampleMode::Nearest})
    for (SamplePadding padding :
         {SamplePadding::Zeros, SamplePadding::Border, SamplePadding::Reflection})
      for (bool align : {false, true}) {
        const SampleParams p{mode, padding, align};
        INFO((mode == SampleMode::Nearest ? "nearest" : "bilinear")
             << " padding " << int(padding) << " align_corners " << align);
        const TT x = random(DType::F64, kX, 21, -2, 2), g = random(DType::F64, kY, 22);
        const TT grid = smoothGrid(p, 23, 0.02);
        TT dx = zeros(DType::F64, kX);
        gridSampleBackwardKernel(p, SampleGrad::Input, x.k(), grid.k(), g.k(), dx.k(), 2);
        for (int64_t k = 0; k < x.numel(); ++k) {
          TT unit = zeros(DType::F64, kX);
          unit.set(k, 1.0);
          INFO("x element " << k);
          CHECK(std::fabs(dx.at(k) - dot(p, unit, grid, g)) <= 1e-12);
        }
        TT dgrid = zeros(DType::F64, kGrid);
        gridSampleBackwardKernel(p, SampleGrad::Grid, x.k(), grid.k(), g.k(), dgrid.k(), 2);
        const double h = 1e-6;
        for (int64_t k = 0; k < grid.numel(); ++k) {
          TT up = grid, down = grid;
          up.set(k, grid.at(k) + h);
          down.set(k, grid.at(k) - h);
          const double numeric = (dot(p, x, up, g) - dot(p, x, down, g)) / (2 * h);
          INFO("grid element " << k << ": " << dgrid.at(k) << " vs " << numeric);
          CHECK(std::fabs(dgrid.at(k) - numeric) <= 1e-6 * (1 + std::fabs(numeric)));
        }
      }
}

TEST_CASE("grid_sample_backward: a clamped position has no grid gradient; bytes do not depend "
          "on threads",
          "[families][sample]") {
  // x [1, 1, 2, 2] = [[1, 2], [3, 4]], align_corners: grid x = 3 lies past
  // the right edge. With border padding it is held on the right column
  // (no x slope; along y that column still rises from 2 to 4: (4 - 2) times
  // unnormalize's 0.5), with zeros padding it reads nothing (no tap: 0).
  TT x = fromValues(DType::F32, {1, 1, 2, 2}, {1, 2, 3, 4});
  TT grid = fromValues(DType::F32, {1, 1, 2, 2}, {3, 0, 0, 0});
  TT g = fromValues(DType::F32, {1, 1, 1, 2}, {1, 1});
  TT dgrid = zeros(DType::F32, {1, 1, 2, 2});
  for (SamplePadding padding : {SamplePadding::Border, SamplePadding::Zeros}) {
    gridSampleBackwardKernel({SampleMode::Bilinear, padding, true}, SampleGrad::Grid, x.k(),
                             grid.k(), g.k(), dgrid.k(), 1);
    CHECK(dgrid.at(0) == 0.0);
    CHECK(dgrid.at(1) == (padding == SamplePadding::Border ? 1.0 : 0.0));
    // At the centre: d/dx = ((2 - 1) + (4 - 3)) / 2 * (W - 1) / 2 = 0.5,
    // d/dy = ((3 - 1) + (4 - 2)) / 2 * 0.5 = 1.
    CHECK(dgrid.at(2) == 0.5);
    CHECK(dgrid.at(3) == 1.0);
  }
  for (SampleMode mode : {SampleMode::Bilinear, SampleMode::Nearest})
    for (SampleGrad wrt : {SampleGrad::Input, SampleGrad::Grid}) {
      const SampleParams p{mode, SamplePadding::Reflection, false};
      const TT big = random(DType::F32, {2, 5, 9, 11}, 31),
               where = random(DType::F32, {2, 7, 6, 2}, 32, -1.2, 1.2);
      const TT grad = random(DType::F32, {2, 5, 7, 6}, 33);
      const Shape out = wrt == SampleGrad::Input ? big.shape : where.shape;
      TT one = zeros(DType::F32, out), four = zeros(DType::F32, out);
      gridSampleBackwardKernel(p, wrt, big.k(), where.k(), grad.k(), one.k(), 1);
      gridSampleBackwardKernel(p, wrt, big.k(), where.k(), grad.k(), four.k(), 4);
      CHECK(one.bytes == four.bytes);
    }
}

TEST_CASE("grid_sample_backward's rule names what is wrong", "[families][sample]") {
  const shardc::plan::OpInfo &info = shardc::plan::opInfo(shardc::plan::OpCode::GridSampleBackward);
  using TTy = TensorType;
  auto typeOf = [&](std::vector<TTy> operands, const char *wrt) {
    return resultType(info, operands, {{"wrt", std::string(wrt)}});
  };
  const TTy x{{1, 2, 4, 4}, DType::F32}, grid{{1, 3, 3, 2}, DType::F32},
      grad{{1, 2, 3, 3}, DType::F32};
  CHECK(typeOf({x, grid, grad}, "input") == x);
  CHECK(typeOf({x, grid, grad}, "grid") == grid);
  CHECK_THROWS_WITH(typeOf({x, grid, grad}, "theta"),
                    Catch::Contains("wrt must be \"input\" or \"grid\", got \"theta\""));
  CHECK_THROWS_WITH(
      typeOf({x, grid, TTy{{1, 2, 3, 4}, DType::F32}}, "input"),
      Catch::Contains("grad must have grid_sample's shape [1, 2, 3, 3], got [1, 2, 3, 4]"));
  CHECK_THROWS_WITH(typeOf({x, grid, TTy{{1, 2, 3, 3}, DType::F64}}, "grid"),
                    Catch::Contains("operands differ in dtype"));
}
