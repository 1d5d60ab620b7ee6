// convKernel against a naive double-precision convolution written here from
// torch's definition (out[n, co, o] = b[co] + sum over the group's input
// channels and the taps of w * x at o * stride - padding + k * dilation).
//
// Tolerance: the kernel sums the K = Cin/groups * taps products in float32
// (sgemm or a tap loop), so its error is at most about K * 2^-24 times the
// sum of |terms| (plus the bias); 16-bit storage adds one rounding of the
// result (half an ulp relative). The reference reads the stored (already
// rounded) inputs, so nothing else differs.
#include "ConvTorchFixture.h"
#include "ConvTestSupport.h"
#include "FamilyTestSupport.h"

#include "runtime/RuntimeError.h"
#include "runtime/cpu/FamilyKernels.h"

#include <catch2/catch.hpp>

#include <array>

using namespace shardc::runtime;
using namespace shardc::runtime::familytest;

namespace {

/// Every parameter and size as 3-d: a 2-d case has depth 1, a 1-d case
/// also height 1 (the missing leading dims have size 1, stride 1, no padding).
struct Conv3d {
  int64_t s[3], pad[3], dil[3], outPad[3];
};

Conv3d as3d(const ConvParams &p) {
  const int lead = 3 - p.spatialDims;
  Conv3d c{};
  for (int d = 0; d < 3; ++d) {
    const bool real = d >= lead;
    c.s[d] = real ? p.stride[d - lead] : 1;
    c.pad[d] = real ? p.padding[d - lead] : 0;
    c.dil[d] = real ? p.dilation[d - lead] : 1;
    c.outPad[d] = real && p.transposed ? p.outputPadding[d - lead] : 0;
  }
  return c;
}

/// want[i] and the bound on |got - want| for each output element.
struct Expected {
  std::vector<double> want, tol;
};

Expected reference(const ConvParams &p, const TT &x, const TT &w, const TT *b, const Shape &yShape) {
  const Conv3d c = as3d(p);
  const int64_t N = x.shape[0], Cin = x.shape[1], Cout = yShape[1];
  const auto in = spatial3(x.shape), k = spatial3(w.shape), out = spatial3(yShape);
  const int64_t inPlane = in[0] * in[1] * in[2], outPlane = out[0] * out[1] * out[2];
  const int64_t taps = k[0] * k[1] * k[2];
  const int64_t G = p.groups, cinG = Cin / G, coutG = Cout / G;
  const size_t total = size_t(N * Cout * outPlane);
  std::vector<double> sum(total, 0), mag(total, 0);
  const int64_t terms = cinG * taps;
  // Flat index of a 3-d position in a plane of sizes e; -1 outside.
  auto at = [](const std::array<int64_t, 3> &e, const int64_t (&q)[3]) -> int64_t {
    for (int d = 0; d < 3; ++d)
      if (q[d] < 0 || q[d] >= e[d]) return -1;
    return (q[0] * e[1] + q[1]) * e[2] + q[2];
  };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t t = 0; t < taps; ++t) {
      const int64_t kk[3] = {t / (k[1] * k[2]), (t / k[2]) % k[1], t % k[2]};
      // Non-transposed: every output pixel o reads input o*s - pad + k*dil.
      // Transposed: every input pixel i lands on output i*s - pad + k*dil.
      const auto &from = p.transposed ? in : out;
      const auto &to = p.transposed ? out : in;
      const int64_t fromPlane = from[0] * from[1] * from[2];
      for (int64_t f = 0; f < fromPlane; ++f) {
        const int64_t fq[3] = {f / (from[1] * from[2]), (f / from[2]) % from[1], f % from[2]};
        int64_t q[3];
        for (int d = 0; d < 3; ++d) q[d] = fq[d] * c.s[d] - c.pad[d] + kk[d] * c.dil[d];
        const int64_t other = at(to, q);
        if (other < 0) continue;
        const int64_t xi = p.transposed ? f : other, yi = p.transposed ? other : f;
        if (!p.transposed) {
          for (int64_t co = 0; co < Cout; ++co)
            for (int64_t cl = 0; cl < cinG; ++cl) {
              const double v = w.at((co * cinG + cl) * taps + t) *
                               x.at((n * Cin + (co / coutG) * cinG + cl) * inPlane + xi);
              const size_t o = size_t((n * Cout + co) * outPlane + yi);
              sum[o] += v;
              mag[o] += std::abs(v);
            }
        } else {
          for (int64_t ci = 0; ci < Cin; ++ci)
            for (int64_t cl = 0; cl < coutG; ++cl) {
              const int64_t co = (ci / cinG) * coutG + cl;
              const double v = w.at((ci * coutG + cl) * taps + t) * x.at((n * Cin + ci) * inPlane + xi);
              const size_t o = size_t((n * Cout + co) * outPlane + yi);
              sum[o] += v;
              mag[o] += std::abs(v);
            }
        }
      }
    }
  Expected e{std::vector<double>(total), std::vector<double>(total)};
  for (size_t i = 0; i < total; ++i) {
    const int64_t co = int64_t(i / size_t(outPlane)) % Cout;
    const double bias = b ? b->at(co) : 0;
    e.want[i] = sum[i] + bias;
    e.tol[i] = (mag[i] + std::abs(bias)) * double(terms + 2) * std::ldexp(1.0, -24) +
               std::abs(e.want[i]) * storageRounding(x.dtype) + 1e-30;
  }
  return e;
}

struct Case {
  const char *name;
  ConvParams p;
  Shape x, w;
};

std::vector<Case> cases() {
  return {
      {"3x3 pad 1", convParams(2, {1, 1}, {1, 1}, {1, 1}, 1), {2, 5, 9, 8}, {7, 5, 3, 3}},
      {"7x7 stride 2 pad 3 (stem)", convParams(2, {2, 2}, {3, 3}, {1, 1}, 1), {1, 3, 23, 21}, {6, 3, 7, 7}},
      {"1x1 pointwise", convParams(2, {1, 1}, {0, 0}, {1, 1}, 1), {2, 12, 5, 6}, {9, 12, 1, 1}},
      {"1x1 stride 2", convParams(2, {2, 2}, {0, 0}, {1, 1}, 1), {1, 6, 7, 7}, {4, 6, 1, 1}},
      {"dilation 2, rectangular", convParams(2, {1, 2}, {2, 1}, {2, 3}, 1), {1, 4, 11, 13}, {3, 4, 3, 2}},
      {"groups 3", convParams(2, {1, 1}, {1, 0}, {1, 1}, 3), {2, 6, 6, 7}, {9, 2, 3, 3}},
      {"depthwise 3x3 stride 2", convParams(2, {2, 2}, {1, 1}, {1, 1}, 8), {2, 8, 10, 9}, {8, 1, 3, 3}},
      {"depthwise multiplier 2, dilation", convParams(2, {1, 1}, {2, 2}, {2, 2}, 4), {1, 4, 8, 8}, {8, 1, 3, 3}},
      {"single input channel, groups 1", convParams(2, {1, 1}, {0, 0}, {1, 1}, 1), {2, 1, 6, 6}, {3, 1, 2, 2}},
      // Depthwise rows of >= 32 outputs take the per-plane path (3-tap rows,
      // other widths with column phases of the stride), narrower ones the
      // 16-channel path above.
      {"depthwise wide rows 3x3", convParams(2, {1, 1}, {1, 1}, {1, 1}, 3), {1, 3, 5, 70}, {3, 1, 3, 3}},
      {"depthwise wide rows 3x5 stride 2", convParams(2, {1, 2}, {1, 2}, {1, 1}, 2), {1, 2, 4, 81}, {4, 1, 3, 5}},
      {"conv1d stride 5, one input channel, few outputs", convParams(1, {5}, {0}, {1}, 1), {2, 1, 203}, {6, 1, 10}},
      {"conv1d stride 5 (wav2vec2 stem: one input channel, 20 outputs, sgemm)", convParams(1, {5}, {0}, {1}, 1), {2, 1, 203}, {20, 1, 10}},
      {"conv1d groups, pad, dilation", convParams(1, {2}, {3}, {2}, 2), {2, 6, 31}, {4, 3, 5}},
      {"conv1d many channels (K blocks)", convParams(1, {1}, {1}, {1}, 1), {1, 200, 9}, {5, 200, 3}},
      {"transposed 2d stride 2 output_padding", convParams(2, {2, 2}, {1, 1}, {1, 1}, 1, true, {1, 1}), {2, 4, 5, 6}, {4, 3, 3, 3}},
      {"transposed 2d groups, dilation", convParams(2, {1, 2}, {0, 1}, {2, 1}, 2, true, {0, 1}), {1, 4, 4, 5}, {4, 3, 2, 3}},
      {"transposed 1d", convParams(1, {3}, {2}, {2}, 1, true), {2, 5, 7}, {5, 4, 4}},
      // One channel per group, but a plane over 4 MiB: the im2col path.
      {"single-channel plane too big for depthwise", convParams(2, {4, 4}, {1, 1}, {1, 1}, 1), {1, 1, 1030, 1030}, {2, 1, 3, 3}},
      // 3-d (video models): the im2col path, depthwise ones too.
      {"conv3d 3x3x3 pad 1 (r3d)", convParams(3, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1), {2, 3, 4, 6, 5}, {5, 3, 3, 3, 3}},
      {"conv3d 3x7x7 stride 1,2,2 (stem)", convParams(3, {1, 2, 2}, {1, 3, 3}, {1, 1, 1}, 1), {1, 3, 5, 13, 12}, {4, 3, 3, 7, 7}},
      {"conv3d 1x3x3 then 3x1x1 (r2plus1d)", convParams(3, {2, 1, 1}, {0, 1, 1}, {1, 1, 1}, 1), {1, 4, 7, 5, 5}, {6, 4, 1, 3, 3}},
      {"conv3d 3x1x1 stride 2, dilation, groups", convParams(3, {2, 1, 1}, {2, 0, 0}, {2, 1, 1}, 2), {2, 4, 9, 3, 4}, {6, 2, 3, 1, 1}},
      {"conv3d 1x1x1 pointwise", convParams(3, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 1), {2, 6, 3, 4, 5}, {7, 6, 1, 1, 1}},
      {"conv3d depthwise 3x3x3 stride 2", convParams(3, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, 4), {1, 4, 5, 6, 7}, {4, 1, 3, 3, 3}},
      {"conv3d patch embed 2x4x4 (swin3d)", convParams(3, {2, 4, 4}, {0, 0, 0}, {1, 1, 1}, 1), {1, 3, 4, 8, 8}, {5, 3, 2, 4, 4}},
      // 3-d transposed (the input gradient of a 3-d convolution; decoders).
      {"transposed 3d stride 1,2,2 output_padding", convParams(3, {1, 2, 2}, {1, 1, 1}, {1, 1, 1}, 1, true, {0, 1, 1}), {2, 3, 3, 4, 5}, {3, 4, 3, 3, 3}},
      {"transposed 3d groups, dilation, stride 2 in depth", convParams(3, {2, 1, 2}, {1, 0, 1}, {2, 2, 1}, 2, true, {1, 1, 0}), {1, 4, 3, 4, 3}, {4, 2, 2, 3, 2}},
  };
}

}  // namespace

TEST_CASE("conv matches a naive convolution (float32, bfloat16, float16)", "[family-kernels]") {
  for (const Case &c : cases())
    for (DType dtype : {DType::F32, DType::BF16, DType::F16})
      for (bool withBias : {true, false}) {
        INFO(c.name << " " << shardc::plan::dtypeName(dtype) << " bias " << withBias);
        TT x = random(dtype, c.x, 1), w = random(dtype, c.w, 2);
        const int64_t cout = c.p.transposed ? c.w[1] * c.p.groups : c.w[0];
        TT b = random(dtype, {cout}, 3);
        KTensor bk = b.k();
        const Shape yShape = convShape(c.p, c.x, c.w, withBias ? &b.shape : nullptr);
        TT y = zeros(dtype, yShape);
        convKernel(c.p, x.k(), w.k(), withBias ? &bk : nullptr, y.k(), 2);
        const Expected e = reference(c.p, x, w, withBias ? &b : nullptr, yShape);
        for (int64_t i = 0; i < y.numel(); ++i) {
          INFO("element " << i << " got " << y.at(i) << " want " << e.want[i]);
          REQUIRE(std::abs(y.at(i) - e.want[i]) <= e.tol[i]);
        }
      }
}

TEST_CASE("conv: a sample's bytes do not depend on the batch size or thread count",
          "[family-kernels]") {
  // Big enough for several workers and several pixel blocks per sample
  // (K = 576 rows: blocks of 448 of the 1024 output pixels).
  std::vector<Case> big = {
      {"3x3 64 channels", convParams(2, {1, 1}, {1, 1}, {1, 1}, 1), {3, 64, 32, 32}, {8, 64, 3, 3}},
      {"depthwise", convParams(2, {1, 1}, {1, 1}, {1, 1}, 16), {3, 16, 40, 40}, {16, 1, 3, 3}},
      {"depthwise narrow 5x5/2",
       convParams(2, {2, 2}, {2, 2}, {1, 1}, 40),
       {3, 40, 14, 14},
       {40, 1, 5, 5}},
      {"pointwise", convParams(2, {1, 1}, {0, 0}, {1, 1}, 1), {3, 32, 48, 48}, {16, 32, 1, 1}},
      {"transposed",
       convParams(2, {2, 2}, {1, 1}, {1, 1}, 1, true, {1, 1}),
       {3, 16, 20, 20},
       {16, 24, 3, 3}},
      {"3-d 3x3x3",
       convParams(3, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1),
       {3, 16, 6, 14, 14},
       {8, 16, 3, 3, 3}},
      {"3-d transposed",
       convParams(3, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, 1, true, {1, 1, 1}),
       {3, 16, 4, 8, 8},
       {16, 12, 3, 3, 3}},
      // At most 16 output pixels: the samples' pixels are rows of one GEMM.
      {"few pixels 2x2", convParams(2, {1, 1}, {1, 1}, {1, 1}, 1), {3, 96, 2, 2}, {80, 96, 3, 3}},
      {"few pixels 4x4 stride 2, groups",
       convParams(2, {2, 2}, {1, 1}, {1, 1}, 2),
       {3, 32, 8, 8},
       {24, 16, 3, 3}},
  };
  for (const Case &c : big)
    for (DType dtype : {DType::F32, DType::BF16}) {
      INFO(c.name << " " << shardc::plan::dtypeName(dtype));
      TT x = random(dtype, c.x, 4), w = random(dtype, c.w, 5);
      const Shape yShape = convShape(c.p, c.x, c.w, nullptr);
      TT y3 = zeros(dtype, yShape);
      convKernel(c.p, x.k(), w.k(), nullptr, y3.k(), 3);
      TT x1 = firstRows(x, 1), y1 = firstRows(y3, 1);
      std::fill(y1.bytes.begin(), y1.bytes.end(), std::byte{0});
      convKernel(c.p, x1.k(), w.k(), nullptr, y1.k(), 1);
      CHECK(y1.bytes == y3.slice(0, y1.numel()));
      TT y3again = zeros(dtype, yShape);
      convKernel(c.p, x.k(), w.k(), nullptr, y3again.k(), 1);
      CHECK(y3again.bytes == y3.bytes);
    }
}

TEST_CASE("conv rejects bad operands with the reason", "[family-kernels]") {
  const ConvParams p = convParams(2, {1, 1}, {1, 1}, {1, 1}, 1);
  TT x = random(DType::F32, {1, 3, 5, 5}, 1), w = random(DType::F32, {4, 3, 3, 3}, 2);
  TT y = zeros(DType::F32, {1, 4, 4, 4});
  CHECK_THROWS_WITH(convKernel(p, x.k(), w.k(), nullptr, y.k(), 1),
                    Catch::Equals("convolution: output has shape [1, 4, 4, 4], expected [1, 4, 5, 5]"));
  TT wb = random(DType::BF16, {4, 3, 3, 3}, 2), y5 = zeros(DType::F32, {1, 4, 5, 5});
  CHECK_THROWS_WITH(convKernel(p, x.k(), wb.k(), nullptr, y5.k(), 1),
                    Catch::Contains("weight is bfloat16, expected float32"));
  TT xi = zeros(DType::I64, {1, 3, 5, 5});
  CHECK_THROWS_WITH(convKernel(p, xi.k(), w.k(), nullptr, y5.k(), 1),
                    Catch::Contains("x is int64"));
  TT w2 = random(DType::F32, {4, 2, 3, 3}, 2);
  CHECK_THROWS_WITH(convKernel(p, x.k(), w2.k(), nullptr, y5.k(), 1),
                    Catch::Contains("to have 2 channels, but got 3 channels instead"));
}

TEST_CASE("conv matches torch's F.conv*/F.conv_transpose* outputs (fixture)", "[family-kernels]") {
  // Inputs ((i * 7 + seed) % 13 - 6) / 8 are exact in float32 and the sums
  // are of few dyadic terms, so torch's float32 results are exact: 1e-6
  // covers any summation order.
  for (const ConvTorchCase &c : convTorchCases()) {
    INFO(c.name);
    auto ramp = [](const Shape &shape, int seed) {
      TT t = zeros(DType::F32, shape);
      for (int64_t i = 0; i < t.numel(); ++i) t.set(i, double((i * 7 + seed) % 13 - 6) / 8);
      return t;
    };
    const ConvParams p = convParams(c.dims, c.stride, c.padding, c.dilation, c.groups, c.transposed,
                                c.outputPadding);
    TT x = ramp(c.x, 1), w = ramp(c.w, 2), b = ramp({c.y[1]}, 3), y = zeros(DType::F32, c.y);
    KTensor bk = b.k();
    convKernel(p, x.k(), w.k(), &bk, y.k(), 2);
    REQUIRE(y.numel() == int64_t(c.out.size()));
    for (int64_t i = 0; i < y.numel(); ++i) {
      INFO("element " << i);
      REQUIRE(std::abs(y.at(i) - c.out[size_t(i)]) <= 1e-6);
    }
  }
}
