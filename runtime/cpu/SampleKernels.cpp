// CPU kernel of the sample family (runtime/OpFamilies.h): grid_sample.
// The element rules are runtime/SampleRules.h's (torch's CPU kernel's
// formulas and order of operations, shared with the CUDA kernel), computed
// in float (double for float64); each output element is rounded to x's
// dtype once. Tasks are output rows (one n, one ho): results do not
// depend on the thread count.
#include "runtime/cpu/FamilyKernels.h"

#include "runtime/ForwardChecks.h"
#include "runtime/InitOps.h"
#include "runtime/SampleRules.h"
#include "runtime/cpu/KernelSupport.h"

#include <cstdint>

namespace shardc::runtime {
using plan::DType;

namespace {

/// Element access of one storage: float32 and float64 directly, 16-bit
/// floats through their exact widening (and one rounding back).
template <typename Real> struct DirectStorage {
  static Real load(const void *data, int64_t i) { return static_cast<const Real *>(data)[i]; }
  static void store(void *data, int64_t i, Real v) { static_cast<Real *>(data)[i] = v; }
};
struct WidenedStorage {
  DType dtype;
  float load(const void *data, int64_t i) const {
    return static_cast<float>(loadAsDouble(dtype, data, i));
  }
  void store(void *data, int64_t i, float v) const { storeFromDouble(dtype, data, i, v); }
};

template <typename Real, typename Storage>
void sampleRows(const SampleParams &p, const Storage &io, const KTensor &x, const KTensor &grid,
                const KTensor &y, int threads) {
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t Ho = grid.shape[1], Wo = grid.shape[2];
  const sample::SourceAxis<Real> ax{W, p.alignCorners, p.padding}, ay{H, p.alignCorners, p.padding};
  const int64_t plane = H * W, outPlane = Ho * Wo;
  auto load = [&](int64_t i) { return static_cast<Real>(io.load(x.data, i)); };
  cpu::parallelTasks(N * Ho, threads, N * C * outPlane * 8, [&](int64_t row) {
    const int64_t n = row / Ho, ho = row % Ho;
    for (int64_t wo = 0; wo < Wo; ++wo) {
      const int64_t g = ((n * Ho + ho) * Wo + wo) * 2;
      const Real sx = ax.source(static_cast<Real>(io.load(grid.data, g)));
      const Real sy = ay.source(static_cast<Real>(io.load(grid.data, g + 1)));
      const int64_t out = n * C * outPlane + ho * Wo + wo, in = n * C * plane;
      if (p.mode == SampleMode::Nearest) {
        const int64_t at = sample::nearestTap(ax, ay, sx, sy);
        for (int64_t c = 0; c < C; ++c)
          io.store(y.data, out + c * outPlane, at < 0 ? Real(0) : load(in + c * plane + at));
        continue;
      }
      const sample::BilinearTaps<Real> t = sample::bilinearTaps(ax, ay, sx, sy);
      const int64_t nw = in + t.iy * W + t.ix;  // offset of the north-west tap in plane 0
      for (int64_t c = 0; c < C; ++c) {
        const int64_t at = nw + c * plane;
        // torch's sum: ((nw + ne) + sw) + se, an outside tap reading 0
        const Real v = (t.nw ? load(at) : Real(0)) * t.wNW +
                       (t.ne ? load(at + 1) : Real(0)) * t.wNE +
                       (t.sw ? load(at + W) : Real(0)) * t.wSW +
                       (t.se ? load(at + W + 1) : Real(0)) * t.wSE;
        io.store(y.data, out + c * outPlane, v);
      }
    }
  });
}

}  // namespace

void gridSampleKernel(const SampleParams &p, const KTensor &x, const KTensor &grid,
                      const KTensor &y, int threads) {
  checks::gridSample(x, grid, y);
  if (y.numel() == 0) return;
  if (x.dtype == DType::F64) sampleRows<double>(p, DirectStorage<double>{}, x, grid, y, threads);
  else if (x.dtype == DType::F32) sampleRows<float>(p, DirectStorage<float>{}, x, grid, y, threads);
  else sampleRows<float>(p, WidenedStorage{x.dtype}, x, grid, y, threads);
}

}  // namespace shardc::runtime
