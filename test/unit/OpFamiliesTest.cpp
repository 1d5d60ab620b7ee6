// The op families' shape rules (runtime/OpFamilies.h) against sizes torch
// 2.15 gives for the same parameters (printed once by F.conv2d, F.max_pool1d,
// ... in /opt/shardc-venv; the numbers are written here, not recomputed by
// the formula under test), and their errors against torch's words.
#include "runtime/OpFamilies.h"
#include "runtime/RuntimeError.h"

#include <catch2/catch.hpp>

#include <limits>

using namespace shardc::runtime;

namespace {

ConvParams conv2d(int64_t stride, int64_t pad, int64_t dil = 1, int64_t groups = 1) {
  ConvParams p;
  p.spatialDims = 2;
  p.stride = {stride, stride};
  p.padding = {pad, pad};
  p.dilation = {dil, dil};
  p.groups = groups;
  return p;
}

PoolParams pool1d(PoolKind kind, int64_t k, int64_t s, int64_t p, bool ceil) {
  PoolParams q;
  q.kind = kind;
  q.spatialDims = 1;
  q.kernel = {k};
  q.stride = {s};
  q.padding = {p};
  q.ceilMode = ceil;
  return q;
}

}  // namespace

TEST_CASE("conv shapes match torch: resnet stem, dilation, groups", "[op-families]") {
  // resnet18 stem: conv 7x7/2 pad 3 on 224 -> 112.
  CHECK(convShape(conv2d(2, 3), {1, 3, 224, 224}, {64, 3, 7, 7}, nullptr) ==
        Shape{1, 64, 112, 112});
  const Shape bias{64};
  CHECK(convShape(conv2d(1, 1), {2, 64, 56, 56}, {64, 64, 3, 3}, &bias) == Shape{2, 64, 56, 56});
  // depthwise (groups == Cin)
  CHECK(convShape(conv2d(2, 1, 1, 32), {1, 32, 15, 15}, {32, 1, 3, 3}, nullptr) ==
        Shape{1, 32, 8, 8});
  // torch: F.conv1d(zeros(2,6,20), zeros(4,3,3), stride=2, padding=1, dilation=3, groups=2) -> [2,4,8]
  ConvParams c1;
  c1.spatialDims = 1;
  c1.stride = {2};
  c1.padding = {1};
  c1.dilation = {3};
  c1.groups = 2;
  CHECK(convShape(c1, {2, 6, 20}, {4, 3, 3}, nullptr) == Shape{2, 4, 8});
}

TEST_CASE("transposed conv shapes match torch, output_padding", "[op-families]") {
  // torch: F.conv_transpose2d(zeros(1,4,5,7), zeros(4,3,3,3), stride=2, padding=1,
  //   output_padding=1, groups=2) -> [1, 6, 10, 14]
  ConvParams p = conv2d(2, 1, 1, 2);
  p.transposed = true;
  p.outputPadding = {1, 1};
  CHECK(convShape(p, {1, 4, 5, 7}, {4, 3, 3, 3}, nullptr) == Shape{1, 6, 10, 14});
  // torch: F.conv_transpose1d(zeros(1,4,5), zeros(4,3,4), stride=3, padding=2, dilation=2) -> [1,3,15]
  ConvParams q;
  q.spatialDims = 1;
  q.transposed = true;
  q.stride = {3};
  q.padding = {2};
  q.dilation = {2};
  q.outputPadding = {0};
  CHECK(convShape(q, {1, 4, 5}, {4, 3, 4}, nullptr) == Shape{1, 3, 15});
  p.outputPadding = {2, 2};
  CHECK_THROWS_WITH(convShape(p, {1, 4, 5, 7}, {4, 3, 3, 3}, nullptr),
                    Catch::Contains("output padding must be smaller than either stride or dilation"));
}

TEST_CASE("conv shape errors use torch's words", "[op-families]") {
  CHECK_THROWS_WITH(convShape(conv2d(1, 0), {1, 4, 10, 10}, {64, 3, 7, 7}, nullptr),
                    Catch::Contains("Given groups=1, weight of size [64, 3, 7, 7]") &&
                        Catch::Contains("to have 3 channels, but got 4 channels instead"));
  CHECK_THROWS_WITH(convShape(conv2d(1, 0), {1, 3, 2, 2}, {8, 3, 3, 3}, nullptr),
                    Catch::Contains("Calculated padded input size per channel: (2 x 2). "
                                    "Kernel size: (3 x 3). Kernel size can't be greater"));
  const Shape badBias{8};
  CHECK_THROWS_WITH(convShape(conv2d(1, 1), {1, 3, 5, 5}, {4, 3, 3, 3}, &badBias),
                    Catch::Contains("expected bias to be 1-dimensional with 4 elements"));
  CHECK_THROWS_WITH(convShape(conv2d(0, 1), {1, 3, 5, 5}, {4, 3, 3, 3}, nullptr),
                    Catch::StartsWith("convolution: stride") && Catch::Contains("positive"));
  CHECK_THROWS_WITH(convShape(conv2d(1, 1), {3, 5, 5}, {4, 3, 3, 3}, nullptr),
                    Catch::Contains("expected 4-d input"));
  ConvParams four = conv2d(1, 1);
  four.spatialDims = 4;
  CHECK_THROWS_WITH(convShape(four, {1, 3, 5, 5, 5, 5}, {4, 3, 3, 3, 3, 3}, nullptr),
                    Catch::Contains("only 1, 2 and 3 are supported"));
  ConvParams three;
  three.spatialDims = 3;
  three.stride = {1, 2, 2};
  three.padding = {1, 0, 1};
  three.dilation = {1, 1, 2};
  CHECK(convShape(three, {2, 3, 4, 9, 8}, {5, 3, 3, 3, 3}, nullptr) == Shape{2, 5, 4, 4, 3});
  CHECK_THROWS_WITH(convShape(three, {2, 3, 9, 8}, {5, 3, 3, 3, 3}, nullptr),
                    Catch::Contains("expected 5-d input [N, C, D, H, W]"));
  three.transposed = true;
  three.outputPadding = {0, 1, 1};
  // (in - 1) s - 2 p + d (k - 1) + output_padding + 1 per spatial dim
  CHECK(convShape(three, {2, 3, 4, 9, 8}, {3, 5, 3, 3, 3}, nullptr) == Shape{2, 5, 4, 20, 18});
  three.outputPadding = {0, 2, 0};  // 2 >= stride 2 and >= dilation 1
  CHECK_THROWS_WITH(convShape(three, {2, 3, 4, 9, 8}, {3, 5, 3, 3, 3}, nullptr),
                    Catch::Contains("output padding must be smaller than either stride or dilation"));
  CHECK_THROWS_AS(convShape(conv2d(1, 1, 1, 2), {1, 4, 5, 5}, {3, 2, 3, 3}, nullptr),
                  RuntimeError);  // 3 out channels in 2 groups
}

TEST_CASE("pool shapes match torch: floor, ceil_mode and the last-window rule", "[op-families]") {
  PoolParams mp;
  mp.kernel = {3, 3};
  mp.stride = {2, 2};
  mp.padding = {1, 1};
  CHECK(poolShape(mp, {1, 64, 112, 112}) == Shape{1, 64, 56, 56});  // resnet stem pool
  CHECK(poolShape(mp, {64, 112, 112}) == Shape{64, 56, 56});        // unbatched
  // {in, k, s, p, torch's ceil_mode size, torch's floor size} from F.max_pool1d.
  const int64_t cases[][6] = {{5, 2, 2, 0, 3, 2},  {6, 3, 3, 1, 3, 2},  {7, 3, 2, 1, 4, 4},
                              {8, 3, 2, 1, 5, 4},  {13, 3, 2, 0, 6, 6}, {14, 3, 2, 0, 7, 6},
                              // the last window would start in the right padding:
                              {5, 2, 3, 1, 2, 2},  {2, 2, 4, 1, 1, 1},  {10, 3, 4, 1, 3, 3}};
  for (const auto &c : cases) {
    INFO("in " << c[0] << " k " << c[1] << " s " << c[2] << " p " << c[3]);
    for (PoolKind kind : {PoolKind::Max, PoolKind::Avg}) {
      CHECK(poolShape(pool1d(kind, c[1], c[2], c[3], true), {1, 1, c[0]}) == Shape{1, 1, c[4]});
      CHECK(poolShape(pool1d(kind, c[1], c[2], c[3], false), {1, 1, c[0]}) == Shape{1, 1, c[5]});
    }
  }
  // torch: F.max_pool2d(zeros(1,1,10,10), 3, 1, 1, dilation=2) -> [1,1,8,8]
  PoolParams dil;
  dil.kernel = {3, 3};
  dil.stride = {1, 1};
  dil.padding = {1, 1};
  dil.dilation = {2, 2};
  CHECK(poolShape(dil, {1, 1, 10, 10}) == Shape{1, 1, 8, 8});
  // An empty stride is the kernel size, as torch's default.
  PoolParams noStride;
  noStride.kind = PoolKind::Avg;
  noStride.kernel = {2, 2};
  noStride.padding = {0, 0};
  CHECK(poolShape(noStride, {2, 3, 7, 8}) == Shape{2, 3, 3, 4});
}

TEST_CASE("pool shape errors use torch's words", "[op-families]") {
  PoolParams p;
  p.kernel = {2, 2};
  p.stride = {2, 2};
  p.padding = {2, 2};
  CHECK_THROWS_WITH(poolShape(p, {1, 1, 5, 5}),
                    Catch::Contains("pad should be at most half of effective kernel size, but "
                                    "got pad=2, kernel_size=2"));
  p.padding = {0, 0};
  CHECK_THROWS_WITH(poolShape(p, {1, 1, 1, 1}), Catch::Contains("Output size is too small"));
  p.kind = PoolKind::Avg;
  p.dilation = {2, 2};
  CHECK_THROWS_WITH(poolShape(p, {1, 1, 8, 8}), Catch::Contains("dilation is only for max"));
  p.dilation = {};
  CHECK_THROWS_WITH(poolShape(p, {8, 8}), Catch::Contains("expected a 3-d or 4-d input"));
}

TEST_CASE("adaptive pool shapes", "[op-families]") {
  CHECK(adaptivePoolShape(PoolKind::Avg, {1, 1}, {2, 512, 7, 7}) == Shape{2, 512, 1, 1});
  CHECK(adaptivePoolShape(PoolKind::Max, {5}, {3, 4, 17}) == Shape{3, 4, 5});
  // torch: F.adaptive_avg_pool2d(zeros(3,7,7), (2,0)) -> [3, 2, 0]
  CHECK(adaptivePoolShape(PoolKind::Avg, {2, 0}, {3, 7, 7}) == Shape{3, 2, 0});
  CHECK_THROWS_WITH(adaptivePoolShape(PoolKind::Avg, {1, 1}, {2, 3, 0, 7}),
                    Catch::Contains("non-zero size for spatial dims"));
  CHECK_THROWS_WITH(adaptivePoolShape(PoolKind::Avg, {1, -1}, {2, 3, 4, 7}),
                    Catch::Contains("must be non-negative"));
}

TEST_CASE("batch and group norm shape rules", "[op-families]") {
  const Shape c3{3}, c4{4}, c6{6};
  CHECK(batchNormShape({2, 3, 4, 4}, c3, c3, &c3, &c3) == Shape{2, 3, 4, 4});
  CHECK(batchNormShape({2, 3}, c3, c3, nullptr, nullptr) == Shape{2, 3});
  CHECK_THROWS_WITH(batchNormShape({2, 3, 4}, c4, c4, nullptr, nullptr),
                    Catch::Contains("running_mean should contain 3 elements"));
  CHECK_THROWS_WITH(batchNormShape({2, 3, 4}, c3, c3, &c4, nullptr),
                    Catch::Contains("weight should contain 3 elements"));
  CHECK_THROWS_WITH(batchNormShape({3}, c3, c3, nullptr, nullptr),
                    Catch::Contains("at least 2 dims"));
  CHECK(groupNormShape({2, 6, 3}, 3, &c6, &c6) == Shape{2, 6, 3});
  CHECK_THROWS_WITH(groupNormShape({2, 6, 3}, 4, nullptr, nullptr),
                    Catch::Contains("Expected number of channels in input to be divisible by "
                                    "num_groups, but got input of shape [2, 6, 3] and num_groups=4"));
  CHECK_THROWS_WITH(groupNormShape({2, 6, 3}, 3, &c3, nullptr),
                    Catch::Contains("weight should have 6 elements"));
}

TEST_CASE("reduction shapes: negative dims, keepdim, all dims, 0-d", "[op-families]") {
  const Shape x{2, 3, 4};
  CHECK(reduceShape(ReduceKind::Sum, x, {-1}, true) == Shape{2, 3, 1});
  CHECK(reduceShape(ReduceKind::Mean, x, {0, 2}, false) == Shape{3});
  CHECK(reduceShape(ReduceKind::Var, x, {2, 0}, true) == Shape{1, 3, 1});
  CHECK(reduceShape(ReduceKind::Sum, x, {}, false) == Shape{});
  CHECK(reduceShape(ReduceKind::Amax, x, {1}, false) == Shape{2, 4});
  // torch: zeros(2,3,4).argmax(dim=None, keepdim=True) -> [1, 1, 1]
  CHECK(reduceShape(ReduceKind::Argmax, x, {}, true) == Shape{1, 1, 1});
  CHECK(reduceShape(ReduceKind::Argmin, x, {-2}, false) == Shape{2, 4});
  // torch: zeros(()).sum(0) -> [], zeros(2,0).sum(1) -> [2]
  CHECK(reduceShape(ReduceKind::Sum, {}, {0}, false) == Shape{});
  CHECK(reduceShape(ReduceKind::Sum, {2, 0}, {1}, false) == Shape{2});
}

TEST_CASE("reduction errors use torch's words", "[op-families]") {
  const Shape x{2, 3};
  CHECK_THROWS_WITH(reduceShape(ReduceKind::Sum, x, {1, 1}, false),
                    Catch::Contains("dim 1 appears multiple times in the list of dims"));
  CHECK_THROWS_WITH(reduceShape(ReduceKind::Sum, x, {1, -1}, false),
                    Catch::Contains("dim 1 appears multiple times"));
  CHECK_THROWS_WITH(reduceShape(ReduceKind::Sum, x, {2}, false),
                    Catch::Contains("Dimension out of range (expected to be in range of [-2, 1], "
                                    "but got 2)"));
  CHECK_THROWS_WITH(reduceShape(ReduceKind::Amax, {2, 0}, {1}, false),
                    Catch::StartsWith("amax: ") &&
                        Catch::Contains("Expected reduction dim 1 to have non-zero size"));
  CHECK_THROWS_WITH(reduceShape(ReduceKind::Argmax, x, {0, 1}, false),
                    Catch::Contains("takes one dim or none"));
}

TEST_CASE("unary op names", "[op-families]") {
  CHECK(std::string(unaryOpName(UnaryOp::Hardswish)) == "hardswish");
  CHECK(std::string(unaryOpName(UnaryOp::LeakyRelu)) == "leaky_relu");
  CHECK(std::string(unaryOpName(UnaryOp::Softplus)) == "softplus");
}

TEST_CASE("as_strided shape rule: size, negative strides, bounds", "[op-families]") {
  // Swin's relative position bias at window 2, 2 heads: [9, 2] read as
  // [2, 2, 2, 2, 2] (hi, wi, hj, wj, head), strides in elements.
  CHECK(asStridedShape({9, 2}, {2, 2, 2, 2, 2}, {6, 2, -6, -2, 1}, 8) == Shape{2, 2, 2, 2, 2});
  CHECK(asStridedShape({3}, {0, 5}, {1, 100}, 0) == Shape{0, 5});  // empty: reads nothing
  CHECK_THROWS_WITH(asStridedShape({20}, {3, 2}, {1}, 0),
                    Catch::StartsWith("as_strided: ") &&
                        Catch::Contains("mismatch in length of strides and shape"));
  // one past the end, and one before the start (a negative stride)
  CHECK_THROWS_WITH(asStridedShape({9, 2}, {2, 2, 2, 2, 2}, {6, 2, -6, -2, 1}, 9),
                    Catch::Contains("read outside the input [9, 2] (18 elements)"));
  CHECK_THROWS_WITH(asStridedShape({9, 2}, {2, 2, 2, 2, 2}, {6, 2, -6, -2, 1}, 7),
                    Catch::Contains("read outside the input"));
  CHECK_THROWS_WITH(asStridedShape({4}, {2}, {1}, -1), Catch::Contains("negative storage offset"));
  CHECK_THROWS_WITH(asStridedShape({4}, {-2}, {1}, 0), Catch::Contains("must be non-negative"));
}
