// Times the CPU convolution kernel (runtime/cpu/ConvKernels.cpp) on
// convnet layers, float32, at a given thread count: median of R runs after
// one warm-up. bench/conv_bench.sh runs it next to torch's F.conv2d.
//
//   shardc-conv-bench [THREADS] [REPEATS]
// Prints one line per layer: "<name> <median ms>".
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
  };
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (const Layer &l : layers) {
    ConvParams p;
    p.spatialDims = static_cast<int>(l.x.size()) - 2;
    p.stride.assign(size_t(p.spatialDims), l.stride);
    p.padding.assign(size_t(p.spatialDims), l.pad);
    p.dilation.assign(size_t(p.spatialDims), 1);
    p.groups = l.groups;
    std::vector<float> x(size_t(shardc::plan::numElements(l.x))),
        w(size_t(shardc::plan::numElements(l.w))), b(size_t(l.w[0]));
    for (float &v : x) v = dist(rng);
    for (float &v : w) v = dist(rng);
    for (float &v : b) v = dist(rng);
    const Shape yShape = convShape(p, l.x, l.w, nullptr);
    std::vector<float> y(size_t(shardc::plan::numElements(yShape)));
    const KTensor xk{shardc::plan::DType::F32, l.x, x.data()},
        wk{shardc::plan::DType::F32, l.w, w.data()},
        bk{shardc::plan::DType::F32, {l.w[0]}, b.data()},
        yk{shardc::plan::DType::F32, yShape, y.data()};
    std::vector<double> ms;
    for (int r = 0; r <= repeats; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      convKernel(p, xk, wk, &bk, yk, threads);
      const auto t1 = std::chrono::steady_clock::now();
      if (r > 0) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%s %.3f %.3f\n", l.name, ms[ms.size() / 2], ms.front());
  }
}
