// pool and adaptivePool (CudaFamilies.h), runtime/cpu/PoolKernels.cpp's
// rules, one thread per output element:
//   max: the largest value of the window (dilated taps inside the input),
//     NaN wins (torch: `val > max || isnan(val)`);
//   avg: the window clipped to input + padding gives count_include_pad's
//     divisor, clipped to the input the other one; divisor_override replaces
//     both; a window wholly in the padding gives 0; sums in double;
//   adaptive: window i of out covers [floor(i*in/out), ceil((i+1)*in/out)).
// 1-d and 2-d are 3-d with a depth (and height) of 1.
#include "runtime/cuda/CudaFamilies.h"

#include "runtime/ForwardChecks.h"
#include "runtime/Spatial3d.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/DeviceStorage.cuh"

#include <cmath>

namespace shardc::runtime::cuda {
using plan::DType;

namespace {
using namespace dev;

/// The 3-d view of a pooling: planes of D x H x W in, OD x OH x OW out,
/// and the window (kernel, stride, padding, dilation per axis).
struct Window {
  int64_t D, H, W, OD, OH, OW;
  int64_t kd = 1, kh = 1, kw = 1, sd = 1, sh = 1, sw = 1, pd = 0, ph = 0, pw = 0;
  int64_t dd = 1, dh = 1, dw = 1;
  bool max = true, countIncludePad = true;
  int64_t divisorOverride = 0;
  __host__ __device__ int64_t in() const { return D * H * W; }
  __host__ __device__ int64_t out() const { return OD * OH * OW; }
};

/// Sizes of x and y with `dims` spatial dims (the missing leading ones are 1).
Window planeOf(const Shape &x, const Shape &y, int dims) {
  Window g;
  set3(g.D, g.H, g.W, spatialSizes(x, dims));
  set3(g.OD, g.OH, g.OW, spatialSizes(y, dims));
  return g;
}

__device__ inline float maxOf(float best, float v) { return (v > best || v != v) ? v : best; }

template <typename T>
__global__ void poolKernel(Window g, const typename T::S *x, typename T::S *y, int64_t count) {
  SHARDC_GRID_LOOP(i, count) {
    const int64_t ow = i % g.OW, oh = (i / g.OW) % g.OH, od = (i / (g.OW * g.OH)) % g.OD;
    const typename T::S *in = x + (i / g.out()) * g.in();
    if (g.max) {
      float best = -INFINITY;
      for (int64_t kz = 0; kz < g.kd; ++kz) {
        const int64_t id = od * g.sd - g.pd + kz * g.dd;
        if (id < 0 || id >= g.D) continue;
        for (int64_t ki = 0; ki < g.kh; ++ki) {
          const int64_t ih = oh * g.sh - g.ph + ki * g.dh;
          if (ih < 0 || ih >= g.H) continue;
          for (int64_t kj = 0; kj < g.kw; ++kj) {
            const int64_t iw = ow * g.sw - g.pw + kj * g.dw;
            if (iw >= 0 && iw < g.W) best = maxOf(best, T::load(in[(id * g.H + ih) * g.W + iw]));
          }
        }
      }
      y[i] = T::store(best);
      continue;
    }
    int64_t d0 = od * g.sd - g.pd, h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
    int64_t d1 = min(d0 + g.kd, g.D + g.pd), h1 = min(h0 + g.kh, g.H + g.ph),
            w1 = min(w0 + g.kw, g.W + g.pw);
    const int64_t padded = (d1 - d0) * (h1 - h0) * (w1 - w0);
    d0 = max(d0, int64_t{0});
    h0 = max(h0, int64_t{0});
    w0 = max(w0, int64_t{0});
    d1 = min(d1, g.D);
    h1 = min(h1, g.H);
    w1 = min(w1, g.W);
    if (d0 >= d1 || h0 >= h1 || w0 >= w1) {
      y[i] = T::store(0.0f);
      continue;
    }
    double sum = 0;
    for (int64_t id = d0; id < d1; ++id)
      for (int64_t ih = h0; ih < h1; ++ih)
        for (int64_t iw = w0; iw < w1; ++iw) sum += T::load(in[(id * g.H + ih) * g.W + iw]);
    const int64_t divisor = g.divisorOverride ? g.divisorOverride
                            : g.countIncludePad ? padded
                                                : (d1 - d0) * (h1 - h0) * (w1 - w0);
    y[i] = T::store(static_cast<float>(sum / static_cast<double>(divisor)));
  }
}

template <typename T>
__global__ void adaptivePoolKernel(Window g, const typename T::S *x, typename T::S *y,
                                   int64_t count) {
  SHARDC_GRID_LOOP(i, count) {
    const int64_t ow = i % g.OW, oh = (i / g.OW) % g.OH, od = (i / (g.OW * g.OH)) % g.OD;
    const typename T::S *in = x + (i / g.out()) * g.in();
    const int64_t d0 = (od * g.D) / g.OD, d1 = ((od + 1) * g.D + g.OD - 1) / g.OD;
    const int64_t h0 = (oh * g.H) / g.OH, h1 = ((oh + 1) * g.H + g.OH - 1) / g.OH;
    const int64_t w0 = (ow * g.W) / g.OW, w1 = ((ow + 1) * g.W + g.OW - 1) / g.OW;
    if (g.max) {
      float best = -INFINITY;
      for (int64_t id = d0; id < d1; ++id)
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw)
            best = maxOf(best, T::load(in[(id * g.H + ih) * g.W + iw]));
      y[i] = T::store(best);
    } else {
      double sum = 0;
      for (int64_t id = d0; id < d1; ++id)
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) sum += T::load(in[(id * g.H + ih) * g.W + iw]);
      y[i] = T::store(static_cast<float>(
          sum / static_cast<double>((d1 - d0) * (h1 - h0) * (w1 - w0))));
    }
  }
}

}  // namespace

void pool(CudaDevice &device, const PoolParams &p, const KTensor &x, const KTensor &y) {
  const char *op = p.kind == PoolKind::Max ? "max_pool" : "avg_pool";
  checks::expectFloat(op, "x", x);
  checks::expectDType(op, "output", y, x.dtype);
  checks::expectShape(op, "output", y, poolShape(p, x.shape));
  const int64_t count = y.numel();
  if (count == 0) return;
  const std::vector<int64_t> stride = p.stride.empty() ? p.kernel : p.stride;
  const int dims = p.spatialDims;
  Window g = planeOf(x.shape, y.shape, dims);
  set3(g.kd, g.kh, g.kw, spatialParams(p.kernel, dims, 1));
  set3(g.sd, g.sh, g.sw, spatialParams(stride, dims, 1));
  set3(g.pd, g.ph, g.pw, spatialParams(p.padding, dims, 0));
  set3(g.dd, g.dh, g.dw, spatialParams(p.dilation, dims, 1));
  g.max = p.kind == PoolKind::Max;
  g.countIncludePad = p.countIncludePad;
  g.divisorOverride = p.divisorOverride;
  device.makeCurrent();
  dispatchFloat(op, x.dtype, false, [&](auto tag) {
    using T = decltype(tag);
    poolKernel<T><<<gridFor(count), kThreads, 0, device.stream()>>>(
        g, static_cast<const typename T::S *>(x.data), static_cast<typename T::S *>(y.data),
        count);
  });
  checkLaunch(std::string(op) + " kernel launch");
}

void adaptivePool(CudaDevice &device, PoolKind kind, const std::vector<int64_t> &outSize,
                  const KTensor &x, const KTensor &y) {
  const char *op = kind == PoolKind::Max ? "adaptive_max_pool" : "adaptive_avg_pool";
  checks::expectFloat(op, "x", x);
  checks::expectDType(op, "output", y, x.dtype);
  checks::expectShape(op, "output", y, adaptivePoolShape(kind, outSize, x.shape));
  const int64_t count = y.numel();
  if (count == 0) return;
  Window g = planeOf(x.shape, y.shape, static_cast<int>(outSize.size()));
  g.max = kind == PoolKind::Max;
  device.makeCurrent();
  dispatchFloat(op, x.dtype, false, [&](auto tag) {
    using T = decltype(tag);
    adaptivePoolKernel<T><<<gridFor(count), kThreads, 0, device.stream()>>>(
        g, static_cast<const typename T::S *>(x.data), static_cast<typename T::S *>(y.data),
        count);
  });
  checkLaunch(std::string(op) + " kernel launch");
}

}  // namespace shardc::runtime::cuda
