// CPU kernel of grid_sample's gradient (runtime/OpFamilies.h,
// grid_sample_backward): torch's grid_sampler_2d_backward with the forward's
// element rules (runtime/SampleRules.h), so the taps and weights are the
// forward kernel's own. Sums are in double, each result rounded once.
//  - The input's gradient scatters each output's gradient onto the taps it
//    read. One task owns one (sample, channel) plane and visits the outputs
//    in order, so every pixel's sum has one order whatever the threads.
//  - The grid's gradient is, per output position, the sum over channels of
//    the gradient times the bilinear mix's slope along x and y, times the
//    source position's slope by the grid coordinate (unnormalize's scale, 0
//    where a padding clip holds it, -1 where reflection mirrors). Nearest
//    sampling is flat: 0.
#include "runtime/cpu/FamilyKernels.h"

#include "runtime/ForwardChecks.h"
#include "runtime/InitOps.h"
#include "runtime/SampleRules.h"
#include "runtime/cpu/KernelSupport.h"

#include <cstdint>
#include <vector>

namespace shardc::runtime {
using plan::DType;

namespace {

struct Geometry {
  int64_t N, C, H, W, Ho, Wo;
  Geometry(const KTensor &x, const KTensor &grid)
      : N(x.shape[0]), C(x.shape[1]), H(x.shape[2]), W(x.shape[3]), Ho(grid.shape[1]),
        Wo(grid.shape[2]) {}
};

/// Real: the forward's math type (float, double for float64 data).
template <typename Real>
void inputGradient(const SampleParams &p, const KTensor &x, const KTensor &grid,
                   const KTensor &grad, const KTensor &dx, int threads) {
  const Geometry s(x, grid);
  const sample::SourceAxis<Real> ax{s.W, p.alignCorners, p.padding},
      ay{s.H, p.alignCorners, p.padding};
  const int64_t plane = s.H * s.W, outPlane = s.Ho * s.Wo;
  cpu::parallelTasks(s.N * s.C, threads, s.N * s.C * outPlane * 8, [&](int64_t nc) {
    const int64_t n = nc / s.C;
    thread_local std::vector<double> sum;  // the plane's gradient, reused
    sum.assign(static_cast<size_t>(plane), 0.0);
    for (int64_t o = 0; o < outPlane; ++o) {
      const int64_t at = (n * outPlane + o) * 2;
      const Real sx = ax.source(static_cast<Real>(loadAsDouble(grid.dtype, grid.data, at)));
      const Real sy = ay.source(static_cast<Real>(loadAsDouble(grid.dtype, grid.data, at + 1)));
      const double g = loadAsDouble(grad.dtype, grad.data, nc * outPlane + o);
      if (p.mode == SampleMode::Nearest) {
        const int64_t tap = sample::nearestTap(ax, ay, sx, sy);
        if (tap >= 0) sum[tap] += g;
        continue;
      }
      const sample::BilinearTaps<Real> t = sample::bilinearTaps(ax, ay, sx, sy);
      const int64_t nw = t.iy * s.W + t.ix;
      if (t.nw) sum[nw] += g * static_cast<double>(t.wNW);
      if (t.ne) sum[nw + 1] += g * static_cast<double>(t.wNE);
      if (t.sw) sum[nw + s.W] += g * static_cast<double>(t.wSW);
      if (t.se) sum[nw + s.W + 1] += g * static_cast<double>(t.wSE);
    }
    for (int64_t k = 0; k < plane; ++k) storeFromDouble(dx.dtype, dx.data, nc * plane + k, sum[k]);
  });
}

template <typename Real>
void gridGradient(const SampleParams &p, const KTensor &x, const KTensor &grid, const KTensor &grad,
                  const KTensor &dgrid, int threads) {
  const Geometry s(x, grid);
  const sample::SourceAxis<Real> ax{s.W, p.alignCorners, p.padding},
      ay{s.H, p.alignCorners, p.padding};
  const int64_t plane = s.H * s.W, outPlane = s.Ho * s.Wo;
  auto value = [&](int64_t i) { return loadAsDouble(x.dtype, x.data, i); };
  cpu::parallelTasks(s.N * s.Ho, threads, s.N * s.C * outPlane * 16, [&](int64_t row) {
    const int64_t n = row / s.Ho;
    for (int64_t o = (row % s.Ho) * s.Wo, end = o + s.Wo; o < end; ++o) {
      const int64_t at = (n * outPlane + o) * 2;
      if (p.mode == SampleMode::Nearest) {
        storeFromDouble(dgrid.dtype, dgrid.data, at, 0.0);
        storeFromDouble(dgrid.dtype, dgrid.data, at + 1, 0.0);
        continue;
      }
      Real slopeX, slopeY;
      const Real sx = ax.source(static_cast<Real>(loadAsDouble(grid.dtype, grid.data, at)), slopeX);
      const Real sy =
          ay.source(static_cast<Real>(loadAsDouble(grid.dtype, grid.data, at + 1)), slopeY);
      const sample::BilinearTaps<Real> t = sample::bilinearTaps(ax, ay, sx, sy);
      // The weights of the east and west columns, the south and north rows.
      const double east = t.fracX, west = 1 - east, south = t.fracY, north = 1 - south;
      double gx = 0, gy = 0;
      for (int64_t c = 0; c < s.C; ++c) {
        const double g = loadAsDouble(grad.dtype, grad.data, (n * s.C + c) * outPlane + o);
        const int64_t nw = (n * s.C + c) * plane + t.iy * s.W + t.ix;
        const double vNW = t.nw ? value(nw) : 0, vNE = t.ne ? value(nw + 1) : 0,
                     vSW = t.sw ? value(nw + s.W) : 0, vSE = t.se ? value(nw + s.W + 1) : 0;
        // d/dsx of the mix: north (vNE - vNW) + south (vSE - vSW); d/dsy:
        // west (vSW - vNW) + east (vSE - vNE).
        gx += g * ((vNE - vNW) * north + (vSE - vSW) * south);
        gy += g * ((vSW - vNW) * west + (vSE - vNE) * east);
      }
      storeFromDouble(dgrid.dtype, dgrid.data, at, gx * static_cast<double>(slopeX));
      storeFromDouble(dgrid.dtype, dgrid.data, at + 1, gy * static_cast<double>(slopeY));
    }
  });
}

}  // namespace

void gridSampleBackwardKernel(const SampleParams &p, SampleGrad wrt, const KTensor &x,
                              const KTensor &grid, const KTensor &grad, const KTensor &y,
                              int threads) {
  checks::gridSampleBackward(wrt, x, grid, grad, y);
  if (y.numel() == 0) return;
  const bool f64 = x.dtype == DType::F64;
  if (wrt == SampleGrad::Input)
    return f64 ? inputGradient<double>(p, x, grid, grad, y, threads)
               : inputGradient<float>(p, x, grid, grad, y, threads);
  return f64 ? gridGradient<double>(p, x, grid, grad, y, threads)
             : gridGradient<float>(p, x, grid, grad, y, threads);
}

}  // namespace shardc::runtime
