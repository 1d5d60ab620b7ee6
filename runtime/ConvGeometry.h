// The 3-d view of a 1-d, 2-d or 3-d convolution, shared by the CPU kernels
// (runtime/cpu/ConvKernels.cpp) and the CUDA kernels (runtime/cuda/CudaConv.cu)
// so that both read the same sizes from the same shapes: a 2-d convolution
// is a 3-d one with a depth of 1, a 1-d one also has a height of 1. The
// accessors run on the device too.
#pragma once

#include "runtime/HostDevice.h"
#include "runtime/OpFamilies.h"
#include "runtime/Spatial3d.h"

#include <cstdint>
#include <vector>

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
  const int dims = p.spatialDims;
  ConvGeometry g;
  g.N = x[0];
  g.Cin = x[1];
  g.Cout = y[1];
  set3(g.D, g.H, g.W, spatialSizes(x, dims));
  set3(g.kd, g.kh, g.kw, spatialSizes(w, dims));
  set3(g.OD, g.OH, g.OW, spatialSizes(y, dims));
  set3(g.sd, g.sh, g.sw, spatialParams(p.stride, dims, 1));
  set3(g.pd, g.ph, g.pw, spatialParams(p.padding, dims, 0));
  set3(g.dd, g.dh, g.dw, spatialParams(p.dilation, dims, 1));
  g.groups = p.groups;
  return g;
}

}  // namespace shardc::runtime
