// The index family (CudaFamilies.h) on a CUDA device: topk and gather, the
// semantics of runtime/cpu/IndexKernels.cpp. Both only compare and copy
// elements, so the values they produce are exact.
//
// topk: on the host, by the CPU's own kernel (runtime/cpu/IndexKernels.cpp):
// x is copied over, torch's CPU selection (partial_sort / nth_element)
// picks the indices, and they are copied back. Among equal values that
// selection's choice is whatever the algorithms leave, which no simpler
// device rule reproduces; a lowest-index rule differed on real router
// rows (bfloat16 ties). So the indices are the CPU's for the same x, bit
// for bit. The cost is two copies and a host wait per call: small for
// routing (tokens x experts), and moe_experts, which follows a router's
// topk, waits for the host anyway.
//
// gather: one thread per index element. Indices are data: an index out of
// range is found on the device (the smallest such element, as the CPU's
// first in order) and reported with the CPU's words after the kernel.
//
// cross_entropy_backward: the targets are copied to the host and checked
// there (the CPU's words), the device's softmax writes y, then one block
// per row subtracts one at its target in float, rounded once (the CPU's
// arithmetic), or zeroes a row whose target is ignore_index.
//
// embedding_backward: the indices are copied to the host, checked and
// sorted by row there (the CPU kernel's stable counting sort), and the
// row offsets and positions go to the device's scratch; then one thread per
// output element sums its column over the row's positions in increasing
// order, in double, rounded once: the CPU's sum, bit for bit (plus acc's
// element in the CPU's arithmetic, when given). When the
// sort does not fit in the scratch, the CPU kernel runs on the host copies
// of src and index and y is copied back (the same values, slower).
#include "runtime/cuda/CudaFamilies.h"

#include "runtime/ForwardChecks.h"
#include "runtime/cpu/FamilyKernels.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/CudaForward.h"
#include "runtime/cuda/DeviceStorage.cuh"

#include <climits>
#include <string>
#include <vector>

namespace shardc::runtime::cuda {
using plan::DType;

namespace {
using namespace dev;

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

/// y[v, c] = the sum over k in [start[v], start[v + 1]) of src[order[k], c]
/// in double, rounded once; row `padding` (-1: none) zero. With acc, that
/// rounded sum is added to acc[e] in C and rounded once (`add`'s
/// arithmetic); acc[e] is read before y[e] is written (acc may be y).
template <typename St>
__global__ void embeddingBackwardKernel(const typename St::S *src, const int64_t *start,
                                        const int64_t *order, const typename St::S *acc,
                                        typename St::S *y, int64_t rows, int64_t D,
                                        int64_t padding) {
  using C = typename St::C;
  SHARDC_GRID_LOOP(e, rows * D) {
    const int64_t v = e / D, c = e % D;
    double sum = 0.0;
    if (v != padding)
      for (int64_t k = start[v]; k < start[v + 1]; ++k)
        sum = __dadd_rn(sum, double(St::load(src[order[k] * D + c])));
    const auto rounded = St::store(C(sum));
    y[e] = acc ? St::store(St::load(acc[e]) + St::load(rounded)) : rounded;
  }
}

/// Row blockIdx.x of softmax y: minus one at its target, or zeros.
template <typename St>
__global__ void subtractTargetKernel(typename St::S *y, const int64_t *target, int64_t C,
                                     int64_t ignoreIndex) {
  const int64_t n = blockIdx.x, t = target[n];
  typename St::S *row = y + n * C;
  if (t == ignoreIndex) {
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) row[c] = St::store(0);
  } else if (threadIdx.x == 0) {
    row[t] = St::store(St::load(row[t]) - 1);
  }
}

}  // namespace

void crossEntropyBackward(CudaDevice &device, const IndexParams &p, const KTensor &x,
                          const KTensor &target, const KTensor &y) {
  checks::crossEntropyBackward(x, target, y);
  const int64_t N = x.shape[0], C = x.shape[1];
  if (y.numel() == 0) return;
  std::vector<int64_t> targets(static_cast<size_t>(N));
  copyToHost(device, targets.data(), target.data, targets.size() * sizeof(int64_t));
  checks::crossEntropyTargets(p, targets.data(), N, C);  // data: checked before any write
  softmax(device, x, 1, y);
  device.makeCurrent();
  dispatchFloat("cross_entropy_backward", x.dtype, false, [&](auto st) {
    using St = decltype(st);
    subtractTargetKernel<St><<<static_cast<unsigned>(N), kThreads, 0, device.stream()>>>(
        static_cast<typename St::S *>(y.data), static_cast<const int64_t *>(target.data), C,
        p.ignoreIndex);
  });
  checkLaunch("cross_entropy_backward kernel launch");
}

void embeddingBackward(CudaDevice &device, const IndexParams &p, const KTensor &src,
                       const KTensor &index, const KTensor *acc, const KTensor &y) {
  const char *op = "embedding_backward";
  checks::embeddingBackward(p, src, index, acc, y);
  const int64_t M = src.shape[0], D = src.shape[1];
  if (y.numel() == 0) return;
  std::vector<int64_t> idx(static_cast<size_t>(M));
  if (M > 0) copyToHost(device, idx.data(), index.data, idx.size() * sizeof(int64_t));
  checks::embeddingIndices(p, idx.data(), M);  // indices are data: checked before any sum
  const size_t sortBytes = static_cast<size_t>(p.rows + 1 + M) * sizeof(int64_t);
  if (sortBytes > CudaDevice::kMaxScratchBytes) {
    // The CPU kernel on host copies: the same sums in the same order.
    std::vector<std::byte> hostSrc(static_cast<size_t>(src.numel() * plan::dtypeSize(src.dtype)));
    std::vector<std::byte> hostY(static_cast<size_t>(y.numel() * plan::dtypeSize(y.dtype)));
    if (!hostSrc.empty()) copyToHost(device, hostSrc.data(), src.data, hostSrc.size());
    const KTensor hostYTensor{y.dtype, y.shape, hostY.data()};
    if (acc) copyToHost(device, hostY.data(), acc->data, hostY.size());  // y = acc + sums in place
    embeddingBackwardKernel(p, KTensor{src.dtype, src.shape, hostSrc.data()},
                            KTensor{index.dtype, index.shape, idx.data()}, hostYTensor, 1,
                            acc ? &hostYTensor : nullptr);
    copyToDevice(device, y.data, hostY.data(), hostY.size());
    return;
  }
  // The m of each row in increasing order: the CPU kernel's counting sort.
  std::vector<int64_t> sorted(static_cast<size_t>(p.rows + 1 + M), 0);
  int64_t *start = sorted.data(), *order = sorted.data() + p.rows + 1;
  for (int64_t m = 0; m < M; ++m) ++start[idx[m] + 1];
  for (int64_t v = 0; v < p.rows; ++v) start[v + 1] += start[v];
  std::vector<int64_t> next(start, start + p.rows);
  for (int64_t m = 0; m < M; ++m) order[next[idx[m]]++] = m;
  auto *deviceSorted = static_cast<int64_t *>(device.scratch(sortBytes));
  copyToDevice(device, deviceSorted, sorted.data(), sortBytes);
  device.makeCurrent();
  dispatchFloat(op, src.dtype, true, [&](auto st) {
    using St = decltype(st);
    using S = typename St::S;
    embeddingBackwardKernel<St><<<gridFor(y.numel()), kThreads, 0, device.stream()>>>(
        static_cast<const S *>(src.data), deviceSorted, deviceSorted + p.rows + 1,
        acc ? static_cast<const S *>(acc->data) : nullptr, static_cast<S *>(y.data), p.rows, D,
        p.paddingIdx);
  });
  checkLaunch("embedding_backward kernel launch");
}

void topk(CudaDevice &device, const IndexParams &p, const KTensor &x, const KTensor &y) {
  checks::topk(p, x, y);
  if (p.k == 0 || y.numel() == 0) return;
  std::vector<std::byte> hostX(static_cast<size_t>(x.numel() * plan::dtypeSize(x.dtype)));
  std::vector<int64_t> hostY(static_cast<size_t>(y.numel()));
  copyToHost(device, hostX.data(), x.data, hostX.size());
  topkKernel(p, KTensor{x.dtype, x.shape, hostX.data()}, KTensor{y.dtype, y.shape, hostY.data()},
             1);
  copyToDevice(device, y.data, hostY.data(), hostY.size() * sizeof(int64_t));
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
