// The index family (CudaFamilies.h) on a CUDA device: topk and gather, the
// semantics of runtime/cpu/IndexKernels.cpp. Both only compare and copy
// elements, so the values they produce are exact.
//
// topk: one thread per row along `dim`, k passes over the row, each picking
// the next element in the order (value, then index): NaN counts as the
// largest value, equal values come out lowest index first. The CPU kernel
// runs torch's CPU selection (partial_sort / nth_element), whose choice
// among equal values is whatever those algorithms leave; so indices agree
// with the CPU where the row has no ties among the selected values, and
// among ties the GPU picks the lowest indices (torch's CUDA kernel has its
// own tie rule too). O(n k) per row: made for routing (k <= 8 of a few
// hundred experts); a large k over a long row is slow.
//
// gather: one thread per index element. Indices are data: an index out of
// range is found on the device (the smallest such element, as the CPU's
// first in order) and reported with the CPU's words after the kernel.
#include "runtime/cuda/CudaFamilies.h"

#include "runtime/ForwardChecks.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/DeviceStorage.cuh"

#include <climits>
#include <string>

namespace shardc::runtime::cuda {
using plan::DType;

namespace {
using namespace dev;

/// a comes before b in topk's order: the better value first (NaN the
/// largest), then the lower index.
__device__ bool before(double a, int64_t ia, double b, int64_t ib, bool largest) {
  const bool nanA = a != a, nanB = b != b;
  if (nanA || nanB) {
    if (nanA && nanB) return ia < ib;
    return largest ? nanA : nanB;
  }
  if (a != b) return largest ? a > b : a < b;
  return ia < ib;
}

__global__ void topkKernel(DType dtype, const void *x, int64_t *out, int64_t rows, int64_t n,
                           int64_t inner, int64_t k, bool largest) {
  SHARDC_GRID_LOOP(row, rows) {
    const int64_t o = row / inner, i = row % inner;
    const int64_t first = o * n * inner + i;
    // The previous pick; each pass takes the first element after it.
    double lastValue = 0;
    int64_t lastIndex = -1;
    for (int64_t j = 0; j < k; ++j) {
      double bestValue = 0;
      int64_t bestIndex = -1;
      for (int64_t c = 0; c < n; ++c) {
        const double v = loadAnyFloat(dtype, x, first + c * inner);
        if (lastIndex >= 0 && !before(lastValue, lastIndex, v, c, largest)) continue;
        if (bestIndex < 0 || before(v, c, bestValue, bestIndex, largest)) {
          bestValue = v;
          bestIndex = c;
        }
      }
      out[(o * k + j) * inner + i] = bestIndex;
      lastValue = bestValue;
      lastIndex = bestIndex;
    }
  }
}

/// index's shape and x's row-major strides, by value.
struct GatherGeometry {
  int rank = 0, dim = 0;
  int64_t indexShape[kMaxRank];
  int64_t xStride[kMaxRank];
  int64_t extent = 1;
};

template <typename E>
__global__ void gatherKernel(GatherGeometry g, const E *x, const int64_t *idx, E *y,
                             int64_t count, unsigned long long *firstBad) {
  SHARDC_GRID_LOOP(e, count) {
    const int64_t at = idx[e];
    if (at < 0 || at >= g.extent) {
      atomicMin(firstBad, static_cast<unsigned long long>(e));
      continue;
    }
    // Element e's coordinates in index's shape; x's equal them except at dim.
    int64_t rest = e, offset = 0;
    for (int d = g.rank - 1; d >= 0; --d) {
      const int64_t c = rest % g.indexShape[d];
      rest /= g.indexShape[d];
      offset += (d == g.dim ? at : c) * g.xStride[d];
    }
    y[e] = x[offset];
  }
}

}  // namespace

void topk(CudaDevice &device, const IndexParams &p, const KTensor &x, const KTensor &y) {
  const char *op = "topk";
  checks::topk(p, x, y);
  dispatchFloat(op, x.dtype, true, [](auto) {});
  const int64_t dim = wrapDim(op, p.dim, x.shape.size());
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(x.shape.size()); ++d) {
    if (d < dim) outer *= x.shape[d];
    else if (d == dim) n = x.shape[d];
    else inner *= x.shape[d];
  }
  if (p.k == 0 || y.numel() == 0) return;
  const int64_t rows = outer * inner;
  device.makeCurrent();
  topkKernel<<<gridFor(rows), kThreads, 0, device.stream()>>>(
      x.dtype, x.data, static_cast<int64_t *>(y.data), rows, n, inner, p.k, p.largest);
  checkLaunch("topk kernel launch");
}

void gather(CudaDevice &device, const IndexParams &p, const KTensor &x, const KTensor &index,
            const KTensor &y) {
  const char *op = "gather";
  checks::gather(p, x, index, y);
  const int64_t dim = wrapDim(op, p.dim, x.shape.size());
  const int rank = static_cast<int>(x.shape.size());
  if (rank > kMaxRank)
    checks::fail(op, "rank " + std::to_string(rank) + " is above the CUDA kernels' " +
                         std::to_string(kMaxRank));
  GatherGeometry g;
  g.rank = rank;
  g.dim = static_cast<int>(dim);
  g.extent = rank == 0 ? 1 : x.shape[dim];
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    g.indexShape[d] = index.shape[d];
    g.xStride[d] = stride;
    stride *= x.shape[d];
  }
  const int64_t count = index.numel();
  if (count == 0) return;
  auto *firstBad = static_cast<unsigned long long *>(device.scratch(8));
  device.makeCurrent();
  checkCuda(cudaMemsetAsync(firstBad, 0xff, 8, device.stream()), "gather: cudaMemsetAsync");
  bySize(plan::dtypeSize(x.dtype), [&](auto *tag) {
    using E = std::remove_pointer_t<decltype(tag)>;
    gatherKernel<E><<<gridFor(count), kThreads, 0, device.stream()>>>(
        g, static_cast<const E *>(x.data), static_cast<const int64_t *>(index.data),
        static_cast<E *>(y.data), count, firstBad);
  });
  checkLaunch("gather kernel launch");
  unsigned long long bad = 0;
  copyToHost(device, &bad, firstBad, sizeof bad);
  if (bad != ULLONG_MAX) {
    int64_t value = 0;
    copyToHost(device, &value, static_cast<const int64_t *>(index.data) + bad, sizeof value);
    checks::fail(op, "index " + std::to_string(value) + " at element " + std::to_string(bad) +
                         " is out of bounds for dimension " + std::to_string(dim) +
                         " with size " + std::to_string(g.extent));
  }
}

}  // namespace shardc::runtime::cuda
