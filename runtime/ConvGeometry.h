// The 3-d view of a 1-d, 2-d or 3-d convolution, shared by the CPU kernels
// (runtime/cpu/ConvKernels.cpp) and the CUDA kernels (runtime/cuda/CudaConv.cu)
// so that both read the same sizes from the same shapes: a 2-d convolution
// is a 3-d one with a depth of 1, a 1-d one also has a height of 1. The
// accessors run on the device too.
#pragma once

#include "runtime/OpFamilies.h"

#include <cstdint>
#include <vector>

#ifdef __CUDACC__
#define SHARDC_HOST_DEVICE __host__ __device__
#else
#define SHARDC_HOST_DEVICE
#endif

namespace shardc::runtime {

struct ConvGeometry {
  int64_t N, Cin, D, H, W;   // input
  int64_t Cout, kd, kh, kw;  // weight (non-transposed: [Cout, Cin/g, kd, kh, kw])
  int64_t OD, OH, OW;        // output
  int64_t sd, sh, sw, pd, ph, pw, dd, dh, dw;
  int64_t groups;
  SHARDC_HOST_DEVICE int64_t cinG() const { return Cin / groups; }
  SHARDC_HOST_DEVICE int64_t coutG() const { return Cout / groups; }
  SHARDC_HOST_DEVICE int64_t taps() const { return kd * kh * kw; }
  SHARDC_HOST_DEVICE int64_t K() const { return cinG() * taps(); }  // im2col rows
  SHARDC_HOST_DEVICE int64_t inPlane() const { return D * H * W; }  // one input channel
  SHARDC_HOST_DEVICE int64_t pixels() const { return OD * OH * OW; }
  /// True for a 1-d or 2-d convolution (the depthwise and transposed paths
  /// take only those).
  SHARDC_HOST_DEVICE bool flat() const { return D == 1 && kd == 1 && OD == 1; }
};

/// The geometry of conv(x, w) -> y; the shapes were checked by conv's shape rule.
inline ConvGeometry convGeometryOf(const ConvParams &p, const Shape &x, const Shape &w,
                                   const Shape &y) {
  // Spatial dim d of the 3-d view is dim d - (3 - dims) of the op's; the
  // missing leading ones have size 1, stride 1, no padding.
  const int lead = 3 - p.spatialDims;
  auto in = [&](const Shape &s, int d) { return d < lead ? int64_t(1) : s[2 + d - lead]; };
  auto at = [&](const std::vector<int64_t> &v, int d, int64_t none) {
    return d < lead ? none : v[d - lead];
  };
  ConvGeometry g;
  g.N = x[0];
  g.Cin = x[1];
  g.D = in(x, 0);
  g.H = in(x, 1);
  g.W = in(x, 2);
  g.Cout = y[1];
  g.kd = in(w, 0);
  g.kh = in(w, 1);
  g.kw = in(w, 2);
  g.OD = in(y, 0);
  g.OH = in(y, 1);
  g.OW = in(y, 2);
  g.sd = at(p.stride, 0, 1);
  g.sh = at(p.stride, 1, 1);
  g.sw = at(p.stride, 2, 1);
  g.pd = at(p.padding, 0, 0);
  g.ph = at(p.padding, 1, 0);
  g.pw = at(p.padding, 2, 0);
  g.dd = at(p.dilation, 0, 1);
  g.dh = at(p.dilation, 1, 1);
  g.dw = at(p.dilation, 2, 1);
  g.groups = p.groups;
  return g;
}

}  // namespace shardc::runtime
