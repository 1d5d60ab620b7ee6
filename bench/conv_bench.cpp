// Times the CPU convolution kernels on convnet layers, float32, at a given
// thread count: median and best of R runs after one warm-up, for the three
// passes training runs: the forward (convKernel), the input's gradient (the
// transposed convolution conv's gradient rule emits; groups 1) and the
// weight's (convWeightGradKernel, conv_weight_grad). bench/conv_bench.sh runs
// it next to torch's F.conv2d and aten.convolution_backward.
//
//   shardc-conv-bench [THREADS] [REPEATS]
// Prints one line per layer and pass: "<name>.<pass> <median ms> <best ms>".
#include "runtime/cpu/FamilyKernels.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

using namespace shardc::runtime;

namespace {

struct Layer {
  const char *name;
  Shape x, w;
  int64_t stride, pad, groups;
};

}  // namespace

int main(int argc, char **argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 20;
  // The layers bench/conv_bench.py times in torch (same names, same shapes).
  const Layer layers[] = {
      {"resnet18_stem_7x7s2", {1, 3, 224, 224}, {64, 3, 7, 7}, 2, 3, 1},
      {"resnet18_layer1_3x3", {1, 64, 56, 56}, {64, 64, 3, 3}, 1, 1, 1},
      {"resnet18_layer4_3x3", {1, 512, 7, 7}, {512, 512, 3, 3}, 1, 1, 1},
      {"resnet50_1x1", {1, 256, 56, 56}, {64, 256, 1, 1}, 1, 0, 1},
      {"mobilenet_dw_3x3", {1, 144, 56, 56}, {144, 1, 3, 3}, 1, 1, 144},
      {"efficientnet_dw_5x5s2", {1, 240, 28, 28}, {240, 1, 5, 5}, 2, 2, 240},
      {"wav2vec2_conv0_k10s5", {1, 1, 16000}, {512, 1, 10}, 5, 0, 1},  // 1-d
      // bench/train_batchnorm.py's resnet18 (batch 8, 64 x 64 images).
      {"resnet18_b8_layer1_3x3", {8, 64, 16, 16}, {64, 64, 3, 3}, 1, 1, 1},
      {"resnet18_b8_layer3_3x3", {8, 256, 4, 4}, {256, 256, 3, 3}, 1, 1, 1},
      {"resnet18_b8_layer4_3x3", {8, 512, 2, 2}, {512, 512, 3, 3}, 1, 1, 1},
  };
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> dist(-1, 1);
  auto filled = [&](const Shape &shape) {
    std::vector<float> v(size_t(shardc::plan::numElements(shape)));
    for (float &e : v) e = dist(rng);
    return v;
  };
  // Median and best of R runs after one warm-up.
  auto timed = [&](const char *layer, const char *pass, auto &&run) {
    std::vector<double> ms;
    for (int r = 0; r <= repeats; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      run();
      const auto t1 = std::chrono::steady_clock::now();
      if (r > 0) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%s.%s %.3f %.3f\n", layer, pass, ms[ms.size() / 2], ms.front());
  };
  const auto F32 = shardc::plan::DType::F32;
  for (const Layer &l : layers) {
    ConvParams p;
    p.spatialDims = static_cast<int>(l.x.size()) - 2;
    const size_t dims = size_t(p.spatialDims);
    p.stride.assign(dims, l.stride);
    p.padding.assign(dims, l.pad);
    p.dilation.assign(dims, 1);
    p.groups = l.groups;
    std::vector<float> x = filled(l.x), w = filled(l.w), b = filled({l.w[0]});
    const Shape yShape = convShape(p, l.x, l.w, nullptr);
    std::vector<float> y(size_t(shardc::plan::numElements(yShape))), g = filled(yShape);
    std::vector<float> dx(x.size()), dw(w.size());
    const KTensor xk{F32, l.x, x.data()}, wk{F32, l.w, w.data()}, bk{F32, {l.w[0]}, b.data()},
        yk{F32, yShape, y.data()}, gk{F32, yShape, g.data()}, dxk{F32, l.x, dx.data()},
        dwk{F32, l.w, dw.data()};
    timed(l.name, "fwd", [&] { convKernel(p, xk, wk, &bk, yk, threads); });
    // The input's gradient: the transposed convolution of g by w (what
    // conv's gradient rule emits), grown to x's size by output_padding.
    ConvParams t = p;
    t.transposed = true;
    t.outputPadding.assign(dims, 0);
    for (size_t d = 0; d < dims; ++d)
      t.outputPadding[d] = l.x[2 + d] - ((yShape[2 + d] - 1) * l.stride - 2 * l.pad + l.w[2 + d]);
    const bool fits = std::all_of(t.outputPadding.begin(), t.outputPadding.end(),
                                  [&](int64_t e) { return e >= 0 && e < l.stride; });
    if (l.groups == 1 && fits)
      timed(l.name, "dgrad", [&] { convKernel(t, gk, wk, nullptr, dxk, threads); });
    const std::vector<int64_t> kernel(l.w.begin() + 2, l.w.end());
    timed(l.name, "wgrad", [&] { convWeightGradKernel(p, xk, gk, kernel, dwk, threads); });
  }
}
