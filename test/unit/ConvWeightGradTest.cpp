// convWeightGradKernel (conv_weight_grad) against a naive double-precision
// weight gradient written here from the convolution's definition:
//   dw[co, cl, k] = sum over n and output pixels o of
//                   grad[n, co, o] * x[n, group(co) * Cin/groups + cl, o * s - pad + k * dil]
// (zero where the tap reads padding).
//
// Tolerance: the kernel sums the N * pixels products in float32 (sgemm over
// chunks of the (sample, pixel) axis, onto a float tile), so its error is at
// most about (terms + 2) * 2^-24 times the sum of |terms|; 16-bit storage
// adds one rounding of the result.
#include "ConvTestSupport.h"
#include "FamilyTestSupport.h"

#include "runtime/RuntimeError.h"
#include "runtime/cpu/FamilyKernels.h"

#include <catch2/catch.hpp>

#include <array>
#include <cmath>

using namespace shardc::runtime;
using namespace shardc::runtime::familytest;

namespace {

/// A parameter list as 3-d (missing leading dims get `fill`).
std::array<int64_t, 3> params3(const std::vector<int64_t> &v, int64_t fill) {
  std::array<int64_t, 3> out{fill, fill, fill};
  for (size_t d = 0; d < v.size(); ++d) out[3 - v.size() + d] = v[d];
  return out;
}

struct Expected {
  std::vector<double> want, tol;
};

Expected reference(const ConvParams &p, const TT &x, const TT &grad, const Shape &dwShape) {
  const auto in = spatial3(x.shape), out = spatial3(grad.shape), k = spatial3(dwShape);
  const auto s = params3(p.stride, 1), pad = params3(p.padding, 0), dil = params3(p.dilation, 1);
  const int64_t N = x.shape[0], Cin = x.shape[1], Cout = grad.shape[1];
  const int64_t cinG = Cin / p.groups, coutG = Cout / p.groups;
  const int64_t taps = k[0] * k[1] * k[2], outPlane = out[0] * out[1] * out[2];
  const int64_t inPlane = in[0] * in[1] * in[2];
  const size_t total = size_t(Cout * cinG * taps);
  Expected e{std::vector<double>(total, 0), std::vector<double>(total, 0)};
  for (int64_t co = 0; co < Cout; ++co)
    for (int64_t cl = 0; cl < cinG; ++cl)
      for (int64_t t = 0; t < taps; ++t) {
        const int64_t kk[3] = {t / (k[1] * k[2]), (t / k[2]) % k[1], t % k[2]};
        const int64_t ci = (co / coutG) * cinG + cl;
        double sum = 0, mag = 0;
        for (int64_t n = 0; n < N; ++n)
          for (int64_t o = 0; o < outPlane; ++o) {
            const int64_t oq[3] = {o / (out[1] * out[2]), (o / out[2]) % out[1], o % out[2]};
            int64_t q[3];
            bool inside = true;
            for (int d = 0; d < 3; ++d) {
              q[d] = oq[d] * s[d] - pad[d] + kk[d] * dil[d];
              inside = inside && q[d] >= 0 && q[d] < in[d];
            }
            if (!inside) continue;
            const double v = grad.at((n * Cout + co) * outPlane + o) *
                             x.at((n * Cin + ci) * inPlane + (q[0] * in[1] + q[1]) * in[2] + q[2]);
            sum += v;
            mag += std::abs(v);
          }
        const size_t i = size_t((co * cinG + cl) * taps + t);
        e.want[i] = sum;
        e.tol[i] = mag * double(N * outPlane + 2) * std::ldexp(1.0, -24) +
                   std::abs(sum) * storageRounding(x.dtype) + 1e-30;
      }
  return e;
}

struct Case {
  const char *name;
  ConvParams p;
  Shape x;
  std::vector<int64_t> kernel;
  int64_t cout;
};

/// The convolution's output shape for input x and a weight [cout, Cin/groups, *kernel].
Shape gradShape(const Case &c) {
  Shape w = {c.cout, c.x[1] / c.p.groups};
  w.insert(w.end(), c.kernel.begin(), c.kernel.end());
  return convShape(c.p, c.x, w, nullptr);
}

std::vector<Case> cases() {
  return {
      {"3x3 pad 1", convParams(2, {1, 1}, {1, 1}, {1, 1}, 1), {2, 5, 9, 8}, {3, 3}, 7},
      {"7x7 stride 2 pad 3 (stem)",
       convParams(2, {2, 2}, {3, 3}, {1, 1}, 1),
       {2, 3, 23, 21},
       {7, 7},
       6},
      {"1x1 pointwise", convParams(2, {1, 1}, {0, 0}, {1, 1}, 1), {3, 12, 5, 6}, {1, 1}, 9},
      {"1x1 stride 2 (downsample)", convParams(2, {2, 2}, {0, 0}, {1, 1}, 1), {2, 6, 7, 7}, {1, 1}, 4},
      {"dilation 2, rectangular", convParams(2, {1, 2}, {2, 1}, {2, 3}, 1), {2, 4, 11, 13}, {3, 2}, 3},
      {"groups 3", convParams(2, {1, 1}, {1, 0}, {1, 1}, 3), {2, 6, 6, 7}, {3, 3}, 9},
      {"depthwise 3x3 stride 2", convParams(2, {2, 2}, {1, 1}, {1, 1}, 8), {2, 8, 10, 9}, {3, 3}, 8},
      {"depthwise multiplier 2, dilation",
       convParams(2, {1, 1}, {2, 2}, {2, 2}, 4),
       {3, 4, 8, 8},
       {3, 3},
       8},
      // Two output pixels per sample: chunks span many samples.
      {"few pixels, many samples (a late stage)",
       convParams(2, {2, 2}, {1, 1}, {1, 1}, 1),
       {37, 6, 3, 4},
       {3, 3},
       5},
      // Few (sample, pixel) columns in all: tiles of up to 512 x 512.
      {"one big tile", convParams(2, {1, 1}, {1, 1}, {1, 1}, 1), {2, 40, 5, 5}, {3, 3}, 150},
      // 1200 columns: tiles of 128, several of rows and of channel x tap.
      {"row and column blocks", convParams(2, {1, 1}, {1, 1}, {1, 1}, 1), {3, 20, 20, 20}, {3, 3}, 130},
      {"conv1d stride 5 (wav2vec2 stem)", convParams(1, {5}, {0}, {1}, 1), {2, 1, 203}, {10}, 20},
      {"conv1d groups, pad, dilation", convParams(1, {2}, {3}, {2}, 2), {2, 6, 31}, {5}, 4},
      {"conv3d 3x3x3 pad 1",
       convParams(3, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1),
       {2, 3, 4, 6, 5},
       {3, 3, 3},
       5},
      {"conv3d stride 1,2,2, groups",
       convParams(3, {1, 2, 2}, {1, 0, 1}, {1, 1, 1}, 2),
       {2, 4, 3, 7, 6},
       {3, 2, 3},
       6},
  };
}

}  // namespace

TEST_CASE("conv_weight_grad matches a naive weight gradient (float32, bfloat16, float16)",
          "[family-kernels]") {
  for (const Case &c : cases())
    for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
      INFO(c.name << " " << shardc::plan::dtypeName(dtype));
      const Shape gShape = gradShape(c);
      TT x = random(dtype, c.x, 1), grad = random(dtype, gShape, 2);
      const Shape dwShape = convWeightGradShape(c.p, c.x, gShape, c.kernel);
      REQUIRE(dwShape[0] == c.cout);
      TT dw = zeros(dtype, dwShape);
      convWeightGradKernel(c.p, x.k(), grad.k(), c.kernel, dw.k(), 2);
      const Expected e = reference(c.p, x, grad, dwShape);
      for (int64_t i = 0; i < dw.numel(); ++i) {
        INFO("element " << i << " got " << dw.at(i) << " want " << e.want[i]);
        REQUIRE(std::abs(dw.at(i) - e.want[i]) <= e.tol[i]);
      }
    }
}

TEST_CASE("conv_weight_grad: the bytes do not depend on the thread count", "[family-kernels]") {
  const std::vector<Case> cases = {
      // 4 row blocks x 5 column blocks of tasks, chunks spanning samples.
      {"3x3", convParams(2, {1, 1}, {1, 1}, {1, 1}, 1), {8, 64, 12, 12}, {3, 3}, 400},
      // a task per output channel
      {"depthwise", convParams(2, {2, 2}, {1, 1}, {1, 1}, 32), {4, 32, 20, 20}, {3, 3}, 64},
  };
  for (const Case &c : cases)
    for (DType dtype : {DType::F32, DType::BF16}) {
      const Shape gShape = gradShape(c);
      INFO(c.name << " " << shardc::plan::dtypeName(dtype));
      TT x = random(dtype, c.x, 3), grad = random(dtype, gShape, 4);
      const Shape dwShape = convWeightGradShape(c.p, c.x, gShape, c.kernel);
      TT one = zeros(dtype, dwShape), three = zeros(dtype, dwShape);
      convWeightGradKernel(c.p, x.k(), grad.k(), c.kernel, one.k(), 1);
      convWeightGradKernel(c.p, x.k(), grad.k(), c.kernel, three.k(), 3);
      CHECK(one.bytes == three.bytes);
    }
}

TEST_CASE("conv_weight_grad rejects bad operands with the reason", "[family-kernels]") {
  const ConvParams p = convParams(2, {1, 1}, {1, 1}, {1, 1}, 1);
  TT x = random(DType::F32, {2, 3, 5, 5}, 1), grad = random(DType::F32, {2, 4, 5, 5}, 2);
  TT dw = zeros(DType::F32, {4, 3, 3, 3});
  // A gradient that is not the convolution's output for this kernel.
  TT grad4 = random(DType::F32, {2, 4, 4, 4}, 2);
  CHECK_THROWS_WITH(convWeightGradKernel(p, x.k(), grad4.k(), {3, 3}, dw.k(), 1),
                    Catch::Equals("conv_weight_grad: gradient [2, 4, 4, 4] is not the "
                                  "convolution's output [2, 4, 5, 5] for input [2, 3, 5, 5] "
                                  "and weight [4, 3, 3, 3]"));
  TT wrong = zeros(DType::F32, {4, 3, 3, 2});
  CHECK_THROWS_WITH(convWeightGradKernel(p, x.k(), grad.k(), {3, 3}, wrong.k(), 1),
                    Catch::Contains("output has shape [4, 3, 3, 2], expected [4, 3, 3, 3]"));
  TT gradBf = random(DType::BF16, {2, 4, 5, 5}, 2);
  CHECK_THROWS_WITH(convWeightGradKernel(p, x.k(), gradBf.k(), {3, 3}, dw.k(), 1),
                    Catch::Contains("gradient is bfloat16, expected float32"));
  CHECK_THROWS_WITH(convWeightGradKernel(p, x.k(), grad.k(), {3}, dw.k(), 1),
                    Catch::Contains("kernel has 1 entries, expected 2"));
  const ConvParams groups2 = convParams(2, {1, 1}, {1, 1}, {1, 1}, 2);
  CHECK_THROWS_WITH(convWeightGradKernel(groups2, x.k(), grad.k(), {3, 3}, dw.k(), 1),
                    Catch::Contains("not both divisible by groups=2"));
}
