// poolKernel and adaptivePoolKernel (runtime/cpu/FamilyKernels.h), as
// torch's CPU kernels compute them:
//   max: the largest value of the window (dilated taps inside the input);
//     NaN wins (torch: `val > max || isnan(val)`).
//   avg: the window clipped to input + padding gives count_include_pad's
//     divisor, clipped to the input the other one; divisor_override replaces
//     both; a window wholly in the padding gives 0. Sums in double.
//   adaptive: window i of out covers [floor(i*in/out), ceil((i+1)*in/out)).
// 1-d and 2-d are 3-d with a depth (and height) of 1. One task per
// (sample, channel) volume, "plane" below.
#include "runtime/cpu/FamilyKernels.h"

#include "runtime/ForwardChecks.h"
#include "runtime/Spatial3d.h"
#include "runtime/cpu/KernelSupport.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

namespace shardc::runtime {
using plan::DType;

namespace {

struct Plane {
  int64_t planes, D, H, W, OD, OH, OW;
  int64_t in() const { return D * H * W; }
  int64_t out() const { return OD * OH * OW; }
};

/// Planes and 3-d sizes of a pooling input x and output y with `dims`
/// spatial dims (the missing leading ones have size 1).
Plane planeOf(const Shape &x, const Shape &y, int dims) {
  Plane p;
  set3(p.D, p.H, p.W, spatialSizes(x, dims));
  set3(p.OD, p.OH, p.OW, spatialSizes(y, dims));
  p.planes = plan::numElements(x) / std::max<int64_t>(p.in(), 1);
  return p;
}

/// Runs body(in, out) per plane with the plane in float: float32 planes in
/// place, 16-bit ones converted into a per-worker buffer (one plane in, one
/// out).
template <typename Body>
void perPlane(const KTensor &x, const KTensor &y, const Plane &g, int64_t work, int threads,
              const Body &body) {
  cpu::parallelTasks(g.planes, threads, work, [&](int64_t plane) {
    const int64_t inOff = plane * g.in(), outOff = plane * g.out();
    if (x.dtype == DType::F32) {
      body(static_cast<const float *>(x.data) + inOff, static_cast<float *>(y.data) + outOff);
      return;
    }
    thread_local std::vector<float> buf;
    buf.resize(static_cast<size_t>(g.in() + g.out()));
    float *in = buf.data(), *out = in + g.in();
    cpu::loadFloats(x.dtype, x.data, inOff, g.in(), in);
    body(in, out);
    cpu::storeFloats(y.dtype, out, g.out(), y.data, outOff);
  });
}

float maxOf(float best, float v) { return (v > best || std::isnan(v)) ? v : best; }

/// A pooling window per spatial dim (depth, height, width; a missing leading
/// dim has kernel, stride and dilation 1 and padding 0). Plain members, not
/// structured bindings: the kernels' lambdas capture them, which clang before
/// 16 refuses for bindings (the fuzzers' build).
struct Window {
  int64_t kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw;
  int64_t taps() const { return kd * kh * kw; }
};

Window windowOf(const PoolParams &p) {
  const int dims = p.spatialDims;
  Window w;
  set3(w.kd, w.kh, w.kw, spatialParams(p.kernel, dims, 1));
  set3(w.sd, w.sh, w.sw, spatialParams(p.stride.empty() ? p.kernel : p.stride, dims, 1));
  set3(w.pd, w.ph, w.pw, spatialParams(p.padding, dims, 0));
  set3(w.dd, w.dh, w.dw, spatialParams(p.dilation, dims, 1));
  return w;
}

/// Calls tap(i) for each tap of output (od, oh, ow)'s window that lies inside
/// the input, depth then height then width (torch's order, which decides
/// which of equal maxima wins), i the tap's offset within the plane.
template <typename Tap>
inline void forEachTap(const Window &w, const Plane &g, int64_t od, int64_t oh, int64_t ow,
                       const Tap &tap) {
  for (int64_t kz = 0; kz < w.kd; ++kz) {
    const int64_t id = od * w.sd - w.pd + kz * w.dd;
    if (id < 0 || id >= g.D) continue;
    for (int64_t ki = 0; ki < w.kh; ++ki) {
      const int64_t ih = oh * w.sh - w.ph + ki * w.dh;
      if (ih < 0 || ih >= g.H) continue;
      const int64_t line = (id * g.H + ih) * g.W;
      for (int64_t kj = 0; kj < w.kw; ++kj) {
        const int64_t iw = ow * w.sw - w.pw + kj * w.dw;
        if (iw >= 0 && iw < g.W) tap(line + iw);
      }
    }
  }
}

}  // namespace

void poolKernel(const PoolParams &p, const KTensor &x, const KTensor &y, int threads) {
  const char *op = p.kind == PoolKind::Max ? "max_pool" : "avg_pool";
  checks::expectFloat(op, "x", x);
  checks::expectDType(op, "output", y, x.dtype);
  checks::expectShape(op, "output", y, poolShape(p, x.shape));
  if (y.numel() == 0) return;
  const Window w = windowOf(p);
  const Plane g = planeOf(x.shape, y.shape, p.spatialDims);
  const int64_t work = y.numel() * w.taps();
  if (p.kind == PoolKind::Max) {
    perPlane(x, y, g, work, threads, [&](const float *in, float *out) {
      for (int64_t od = 0; od < g.OD; ++od)
        for (int64_t oh = 0; oh < g.OH; ++oh)
          for (int64_t ow = 0; ow < g.OW; ++ow) {
            float best = -std::numeric_limits<float>::infinity();
            forEachTap(w, g, od, oh, ow, [&](int64_t i) { best = maxOf(best, in[i]); });
            out[(od * g.OH + oh) * g.OW + ow] = best;
          }
    });
    return;
  }
  perPlane(x, y, g, work, threads, [&](const float *in, float *out) {
    for (int64_t od = 0; od < g.OD; ++od)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          int64_t d0 = od * w.sd - w.pd, h0 = oh * w.sh - w.ph, w0 = ow * w.sw - w.pw;
          int64_t d1 = std::min(d0 + w.kd, g.D + w.pd), h1 = std::min(h0 + w.kh, g.H + w.ph),
                  w1 = std::min(w0 + w.kw, g.W + w.pw);
          const int64_t padded = (d1 - d0) * (h1 - h0) * (w1 - w0);
          d0 = std::max<int64_t>(d0, 0);
          h0 = std::max<int64_t>(h0, 0);
          w0 = std::max<int64_t>(w0, 0);
          d1 = std::min(d1, g.D);
          h1 = std::min(h1, g.H);
          w1 = std::min(w1, g.W);
          float &o = out[(od * g.OH + oh) * g.OW + ow];
          if (d0 >= d1 || h0 >= h1 || w0 >= w1) {
            o = 0;
            continue;
          }
          double sum = 0;
          for (int64_t id = d0; id < d1; ++id)
            for (int64_t ih = h0; ih < h1; ++ih)
              for (int64_t iw = w0; iw < w1; ++iw) sum += in[(id * g.H + ih) * g.W + iw];
          const int64_t divisor = p.divisorOverride ? p.divisorOverride
                                  : p.countIncludePad ? padded
                                                      : (d1 - d0) * (h1 - h0) * (w1 - w0);
          o = static_cast<float>(sum / static_cast<double>(divisor));
        }
  });
}

void maxPoolBackwardKernel(const PoolParams &p, const KTensor &x, const KTensor &grad,
                           const KTensor &dx, int threads) {
  const char *op = "max_pool_backward";
  checks::expectFloat(op, "x", x);
  checks::expectDType(op, "gradient", grad, x.dtype);
  checks::expectDType(op, "output", dx, x.dtype);
  const Shape want = maxPoolBackwardShape(p, x.shape, grad.shape);
  checks::expectShape(op, "output", dx, want);
  if (dx.numel() == 0) return;
  const Window w = windowOf(p);
  const Plane g = planeOf(x.shape, grad.shape, p.spatialDims);
  // Per plane in float: x's plane, the gradient's, and dx's sums (16-bit
  // storage converted in and out; float32 read and written in place).
  cpu::parallelTasks(g.planes, threads, grad.numel() * w.taps(), [&](int64_t plane) {
    const int64_t inOff = plane * g.in(), outOff = plane * g.out();
    thread_local std::vector<float> buf;
    const float *in, *gy;
    float *sum;
    if (x.dtype == DType::F32) {
      in = static_cast<const float *>(x.data) + inOff;
      gy = static_cast<const float *>(grad.data) + outOff;
      sum = static_cast<float *>(dx.data) + inOff;
    } else {
      buf.resize(static_cast<size_t>(2 * g.in() + g.out()));
      cpu::loadFloats(x.dtype, x.data, inOff, g.in(), buf.data());
      cpu::loadFloats(grad.dtype, grad.data, outOff, g.out(), buf.data() + g.in());
      in = buf.data();
      gy = buf.data() + g.in();
      sum = buf.data() + g.in() + g.out();
    }
    std::fill_n(sum, g.in(), 0.0f);
    for (int64_t od = 0; od < g.OD; ++od)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          // The first tap inside the input, then a later one if larger or
          // NaN (so the last NaN): poolKernel's maximum, and where torch's
          // kernel records it (`val > maxval || isnan(val)`).
          int64_t at = -1;
          float best = -std::numeric_limits<float>::infinity();
          forEachTap(w, g, od, oh, ow, [&](int64_t i) {
            if (at < 0) at = i;
            if (in[i] > best || std::isnan(in[i])) {
              best = in[i];
              at = i;
            }
          });
          if (at >= 0) sum[at] += gy[(od * g.OH + oh) * g.OW + ow];
        }
    if (x.dtype != DType::F32) cpu::storeFloats(dx.dtype, sum, g.in(), dx.data, inOff);
  });
}

void adaptivePoolKernel(PoolKind kind, const std::vector<int64_t> &outSize, const KTensor &x,
                        const KTensor &y, int threads) {
  const char *op = kind == PoolKind::Max ? "adaptive_max_pool" : "adaptive_avg_pool";
  checks::expectFloat(op, "x", x);
  checks::expectDType(op, "output", y, x.dtype);
  const int dims = static_cast<int>(outSize.size());
  checks::expectShape(op, "output", y, adaptivePoolShape(kind, outSize, x.shape));
  if (y.numel() == 0) return;
  const Plane g = planeOf(x.shape, y.shape, dims);
  auto start = [](int64_t i, int64_t in, int64_t out) { return (i * in) / out; };
  auto end = [](int64_t i, int64_t in, int64_t out) { return ((i + 1) * in + out - 1) / out; };
  perPlane(x, y, g, x.numel() + y.numel(), threads, [&](const float *in, float *out) {
    for (int64_t od = 0; od < g.OD; ++od) {
      const int64_t d0 = start(od, g.D, g.OD), d1 = end(od, g.D, g.OD);
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        const int64_t h0 = start(oh, g.H, g.OH), h1 = end(oh, g.H, g.OH);
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const int64_t w0 = start(ow, g.W, g.OW), w1 = end(ow, g.W, g.OW);
          float &o = out[(od * g.OH + oh) * g.OW + ow];
          if (kind == PoolKind::Max) {
            float best = -std::numeric_limits<float>::infinity();
            for (int64_t id = d0; id < d1; ++id)
              for (int64_t ih = h0; ih < h1; ++ih)
                for (int64_t iw = w0; iw < w1; ++iw)
                  best = maxOf(best, in[(id * g.H + ih) * g.W + iw]);
            o = best;
          } else {
            double sum = 0;
            for (int64_t id = d0; id < d1; ++id)
              for (int64_t ih = h0; ih < h1; ++ih)
                for (int64_t iw = w0; iw < w1; ++iw) sum += in[(id * g.H + ih) * g.W + iw];
            o = static_cast<float>(sum / static_cast<double>((d1 - d0) * (h1 - h0) * (w1 - w0)));
          }
        }
      }
    }
  });
}

}  // namespace shardc::runtime
