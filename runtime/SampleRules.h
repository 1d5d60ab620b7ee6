// The element rules of grid_sample (runtime/OpFamilies.h) that the CPU
// kernel (runtime/cpu/SampleKernels.cpp) and the CUDA kernel
// (runtime/cuda/CudaSample.cu) share, as host and device code: a grid
// coordinate to a source position, and the bilinear and nearest taps. They
// follow torch's vectorized CPU kernel (aten/src/ATen/native/cpu/
// GridSamplerKernel.cpp) formula for formula, in its order of operations,
// in Real = float (double for float64 data).
#pragma once

#include "runtime/HostDevice.h"
#include "runtime/OpFamilies.h"

#include <cstdint>
#include <math.h>

namespace shardc::runtime::sample {

SHARDC_HOST_DEVICE inline float floorOf(float v) { return floorf(v); }
SHARDC_HOST_DEVICE inline double floorOf(double v) { return floor(v); }
SHARDC_HOST_DEVICE inline float truncOf(float v) { return truncf(v); }
SHARDC_HOST_DEVICE inline double truncOf(double v) { return trunc(v); }
SHARDC_HOST_DEVICE inline float absOf(float v) { return fabsf(v); }
SHARDC_HOST_DEVICE inline double absOf(double v) { return fabs(v); }
/// Round half to even (the default rounding mode), torch's Vectorized round.
SHARDC_HOST_DEVICE inline float roundOf(float v) { return nearbyintf(v); }
SHARDC_HOST_DEVICE inline double roundOf(double v) { return nearbyint(v); }

/// One axis of x (W for the grid's x, H for its y): a normalized grid
/// coordinate to a source position, by the padding mode.
template <typename Real> struct SourceAxis {
  int64_t size;
  bool alignCorners;
  SamplePadding padding;

  SHARDC_HOST_DEVICE Real unnormalize(Real in) const {
    // align_corners: -1 and 1 are the centres of pixels 0 and size - 1;
    // else the outer edges of those pixels.
    if (alignCorners) return (in + Real(1)) * (static_cast<Real>(size - 1) / 2);
    return (in + Real(1)) * (static_cast<Real>(size) / 2) - Real(0.5);
  }
  SHARDC_HOST_DEVICE Real clip(Real in) const {
    const Real hi = static_cast<Real>(size - 1);
    const Real low = in > Real(0) ? in : Real(0);
    return hi < low ? hi : low;
  }
  /// Mirrors `in` at the edges until it lies in the span: [0, size - 1]
  /// with align_corners, else [-0.5, size - 0.5].
  SHARDC_HOST_DEVICE Real reflect(Real in) const {
    const Real twiceSpan = static_cast<Real>(alignCorners ? (size - 1) * 2 : size * 2);
    if (twiceSpan <= 0) return Real(0);
    const Real shift = alignCorners ? Real(0) : Real(0.5);
    const Real absIn = absOf(in + shift);
    const Real doubleFlips = truncOf(absIn / twiceSpan);
    const Real extra = absIn - doubleFlips * twiceSpan;
    const Real back = twiceSpan - extra;
    return (extra < back ? extra : back) - shift;
  }
  SHARDC_HOST_DEVICE Real source(Real in) const {
    const Real at = unnormalize(in);
    if (padding == SamplePadding::Border) return clip(at);
    if (padding == SamplePadding::Reflection) return clip(reflect(at));
    return at;
  }
  /// source(in), and in `slope` its derivative by in (the backward's grid
  /// gradient): unnormalize's scale, times -1 where reflection mirrors and
  /// 0 where a clip holds the position at an edge (torch's
  /// *_coordinates_set_grad).
  SHARDC_HOST_DEVICE Real source(Real in, Real &slope) const {
    slope = alignCorners ? static_cast<Real>(size - 1) / 2 : static_cast<Real>(size) / 2;
    Real at = unnormalize(in);
    if (padding == SamplePadding::Zeros) return at;
    if (padding == SamplePadding::Reflection) at = reflect(at, slope);
    // torch's clip_coordinates_set_grad: no slope at or past either edge.
    if (at <= Real(0) || at >= static_cast<Real>(size - 1)) slope = Real(0);
    return clip(at);
  }
  /// reflect(in), its slope multiplied by -1 where the mirror image runs
  /// backwards (a mirrored half period; at a period's middle, as torch's
  /// odd flip count, the backward half).
  SHARDC_HOST_DEVICE Real reflect(Real in, Real &slope) const {
    const Real twiceSpan = static_cast<Real>(alignCorners ? (size - 1) * 2 : size * 2);
    if (twiceSpan <= 0) {
      slope = Real(0);
      return Real(0);
    }
    const Real shift = alignCorners ? Real(0) : Real(0.5);
    const Real shifted = in + shift, absIn = absOf(shifted);
    const Real doubleFlips = truncOf(absIn / twiceSpan);
    const Real extra = absIn - doubleFlips * twiceSpan;
    const Real back = twiceSpan - extra;
    const Real sign = shifted < Real(0) ? Real(-1) : Real(1);
    slope *= extra < back ? sign : -sign;
    return (extra < back ? extra : back) - shift;
  }
  /// Whether integer position i (held as a Real, so NaN and huge values
  /// compare safely) is inside the axis.
  SHARDC_HOST_DEVICE bool inside(Real i) const {
    return i >= Real(0) && i <= static_cast<Real>(size - 1);
  }
};

/// The four neighbours of source position (sx, sy): the north-west one at
/// (ix, iy), which of the four lie inside x, and their weights, as torch
/// forms them. A neighbour outside x reads 0.
template <typename Real> struct BilinearTaps {
  int64_t ix = 0, iy = 0;
  bool nw = false, ne = false, sw = false, se = false;
  Real wNW = 0, wNE = 0, wSW = 0, wSE = 0;
  Real fracX = 0, fracY = 0;  // the position's distance east and south of the north-west tap
};
template <typename Real>
SHARDC_HOST_DEVICE inline BilinearTaps<Real> bilinearTaps(const SourceAxis<Real> &ax,
                                                          const SourceAxis<Real> &ay, Real sx,
                                                          Real sy) {
  BilinearTaps<Real> t;
  const Real xw = floorOf(sx), yn = floorOf(sy);
  const Real w = sx - xw, e = Real(1) - w, n = sy - yn, s = Real(1) - n;
  t.wNW = s * e;
  t.wNE = s * w;
  t.wSW = n * e;
  t.wSE = n * w;
  t.fracX = w;
  t.fracY = n;
  const bool west = ax.inside(xw), east = ax.inside(xw + Real(1));
  const bool north = ay.inside(yn), south = ay.inside(yn + Real(1));
  t.nw = north && west;
  t.ne = north && east;
  t.sw = south && west;
  t.se = south && east;
  // Converted only when a neighbour is inside (then |xw| < size + 1).
  if (west || east) t.ix = static_cast<int64_t>(xw);
  if (north || south) t.iy = static_cast<int64_t>(yn);
  return t;
}

/// The nearest pixel's offset y * W + x, or -1 when it lies outside x.
template <typename Real>
SHARDC_HOST_DEVICE inline int64_t nearestTap(const SourceAxis<Real> &ax,
                                             const SourceAxis<Real> &ay, Real sx, Real sy) {
  const Real rx = roundOf(sx), ry = roundOf(sy);
  if (!ax.inside(rx) || !ay.inside(ry)) return -1;
  return static_cast<int64_t>(ry) * ax.size + static_cast<int64_t>(rx);
}

}  // namespace shardc::runtime::sample
