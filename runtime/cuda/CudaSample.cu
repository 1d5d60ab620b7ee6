// The sample family (CudaFamilies.h) on a CUDA device: grid_sample with
// the CPU kernel's element rules (runtime/SampleRules.h, shared as host and
// device code), one thread per output element, math in T::C (float; double
// for float64) and one rounding to x's dtype, as on the CPU.
#include "runtime/cuda/CudaFamilies.h"

#include "runtime/ForwardChecks.h"
#include "runtime/SampleRules.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/DeviceStorage.cuh"

namespace shardc::runtime::cuda {
using plan::DType;

namespace {
using namespace dev;

struct SampleGeometry {
  int64_t N, C, H, W, Ho, Wo;
};

template <typename T>
__global__ void gridSampleKernel(SampleParams p, SampleGeometry g, const typename T::S *x,
                                 const typename T::S *grid, typename T::S *y, int64_t count) {
  using Real = typename T::C;
  const sample::SourceAxis<Real> ax{g.W, p.alignCorners, p.padding};
  const sample::SourceAxis<Real> ay{g.H, p.alignCorners, p.padding};
  SHARDC_GRID_LOOP(i, count) {  // i = ((n * C + c) * Ho + ho) * Wo + wo
    const int64_t wo = i % g.Wo, ho = i / g.Wo % g.Ho, c = i / (g.Wo * g.Ho) % g.C;
    const int64_t n = i / (g.Wo * g.Ho * g.C);
    const int64_t at = ((n * g.Ho + ho) * g.Wo + wo) * 2;
    const Real sx = ax.source(T::load(grid[at])), sy = ay.source(T::load(grid[at + 1]));
    const typename T::S *plane = x + (n * g.C + c) * g.H * g.W;
    Real v = 0;
    if (p.mode == SampleMode::Nearest) {
      const int64_t tap = sample::nearestTap(ax, ay, sx, sy);
      v = tap < 0 ? Real(0) : T::load(plane[tap]);
    } else {
      const sample::BilinearTaps<Real> t = sample::bilinearTaps(ax, ay, sx, sy);
      const typename T::S *nw = plane + t.iy * g.W + t.ix;
      v = (t.nw ? T::load(nw[0]) : Real(0)) * t.wNW + (t.ne ? T::load(nw[1]) : Real(0)) * t.wNE +
          (t.sw ? T::load(nw[g.W]) : Real(0)) * t.wSW +
          (t.se ? T::load(nw[g.W + 1]) : Real(0)) * t.wSE;
    }
    y[i] = T::store(v);
  }
}

}  // namespace

void gridSample(CudaDevice &device, const SampleParams &p, const KTensor &x, const KTensor &grid,
                const KTensor &y) {
  checks::gridSample(x, grid, y);
  const int64_t count = y.numel();
  if (count == 0) return;
  const SampleGeometry g{x.shape[0], x.shape[1], x.shape[2], x.shape[3], grid.shape[1],
                         grid.shape[2]};
  device.makeCurrent();
  dispatchFloat("grid_sample", x.dtype, true, [&](auto tag) {
    using T = decltype(tag);
    using S = typename T::S;
    gridSampleKernel<T><<<gridFor(count), kThreads, 0, device.stream()>>>(
        p, g, static_cast<const S *>(x.data), static_cast<const S *>(grid.data),
        static_cast<S *>(y.data), count);
  });
  checkLaunch("grid_sample kernel launch");
}

}  // namespace shardc::runtime::cuda
