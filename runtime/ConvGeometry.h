// The 2-d view of a 1-d or 2-d convolution, shared by the CPU kernels
// (runtime/cpu/ConvKernels.cpp) and the CUDA kernels (runtime/cuda/CudaConv.cu)
// so that both read the same sizes from the same shapes: a 1-d convolution is
// a 2-d one with a height of 1. The accessors run on the device too.
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
  int64_t N, Cin, H, W;  // input
  int64_t Cout, kh, kw;  // weight (non-transposed: [Cout, Cin/g, kh, kw])
  int64_t OH, OW;        // output
  int64_t sh, sw, ph, pw, dh, dw;
  int64_t groups;
  SHARDC_HOST_DEVICE int64_t cinG() const { return Cin / groups; }
  SHARDC_HOST_DEVICE int64_t coutG() const { return Cout / groups; }
  SHARDC_HOST_DEVICE int64_t K() const { return cinG() * kh * kw; }  // im2col rows
  SHARDC_HOST_DEVICE int64_t pixels() const { return OH * OW; }
};

/// The geometry of conv(x, w) -> y; the shapes were checked by conv's shape rule.
inline ConvGeometry convGeometryOf(const ConvParams &p, const Shape &x, const Shape &w,
                                   const Shape &y) {
  const bool one = p.spatialDims == 1;
  auto at = [&](const std::vector<int64_t> &v, int d) { return one ? (d == 0 ? 1 : v[0]) : v[d]; };
  auto pad = [&](int d) { return one ? (d == 0 ? 0 : p.padding[0]) : p.padding[d]; };
  ConvGeometry g;
  g.N = x[0];
  g.Cin = x[1];
  g.H = one ? 1 : x[2];
  g.W = x.back();
  g.Cout = y[1];
  g.kh = one ? 1 : w[2];
  g.kw = w.back();
  g.OH = one ? 1 : y[2];
  g.OW = y.back();
  g.sh = at(p.stride, 0);
  g.sw = at(p.stride, 1);
  g.ph = pad(0);
  g.pw = pad(1);
  g.dh = at(p.dilation, 0);
  g.dw = at(p.dilation, 1);
  g.groups = p.groups;
  return g;
}

}  // namespace shardc::runtime
