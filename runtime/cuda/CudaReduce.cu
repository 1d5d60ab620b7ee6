// reduce (CudaFamilies.h): sum, mean, amax, amin, var, argmax, argmin over
// any set of dims, the semantics of runtime/cpu/ReduceKernels.cpp. One
// thread per output element walks its reduced elements in index order (the
// last reduced dim innermost), so results are deterministic and do not
// depend on the launch shape:
//   sum, mean: one running double sum (the CPU adds pieces of eight float
//     lane sums into a double: a different order, the same double
//     accumulation, within the suite's tolerance);
//   var: two passes in double, divided by max(0, count - correction);
//   amax, amin, argmax, argmin: the first extreme, a NaN counting as the
//     extreme (torch), its value or its int64 index into the reduced space;
//     one rule for both kernels (firstExtreme, betterExtreme).
// Many elements into few outputs (a whole-tensor sum: one thread's walk
// otherwise) take a block per output instead: thread i takes the reduced
// elements i, i + blockDim, ... and the block combines through a fixed tree,
// so that path is deterministic too. sum/mean/var sum in double in another
// order (within the tolerance); the extremes carry their reduced index
// through the tree, ties going to the smaller one, so amax/amin return the
// CPU's first extreme (its NaN, its signed zero) and argmax/argmin its index.
#include "runtime/cuda/CudaFamilies.h"

#include "runtime/ForwardChecks.h"
#include "runtime/Kernels.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/DeviceFloat.h"
#include "runtime/cuda/DeviceStorage.cuh"

#include <cmath>

namespace shardc::runtime::cuda {
using plan::DType;

namespace {
using namespace dev;

/// Where output element o reads: kept dims give the base offset, the
/// reduced dims are walked from it (both outer to inner).
struct Layout {
  int kept = 0, red = 0;
  int64_t keptSize[kMaxRank], keptStride[kMaxRank];
  int64_t redSize[kMaxRank], redStride[kMaxRank];
  int64_t count = 1;  // reduced elements per output
};

Layout layoutOf(const char *op, const Shape &x, const std::vector<int64_t> &dims) {
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank > kMaxRank)
    checks::fail(op, "x has rank " + std::to_string(rank) + " (the cuda backend supports up to " +
                         std::to_string(kMaxRank) + ")");
  bool reduced[kMaxRank];
  for (int64_t d = 0; d < rank; ++d) reduced[d] = dims.empty();
  for (int64_t d : dims)
    if (rank > 0) reduced[d < 0 ? d + rank : d] = true;
  Layout l;
  int64_t strides[kMaxRank], stride = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= x[d];
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[d]) {
      l.redSize[l.red] = x[d];
      l.redStride[l.red++] = strides[d];
      l.count *= x[d];
    } else {
      l.keptSize[l.kept] = x[d];
      l.keptStride[l.kept++] = strides[d];
    }
  }
  return l;
}

/// Where output o's reduced elements start.
__device__ inline int64_t baseOf(const Layout &l, int64_t o) {
  int64_t base = 0;
  for (int d = l.kept - 1; d >= 0; --d) {
    base += (o % l.keptSize[d]) * l.keptStride[d];
    o /= l.keptSize[d];
  }
  return base;
}

/// The offset of reduced element k from its output's base.
__device__ inline int64_t offsetOf(const Layout &l, int64_t base, int64_t k) {
  int64_t at = base;
  for (int d = l.red - 1; d >= 0; --d) {
    at += (k % l.redSize[d]) * l.redStride[d];
    k /= l.redSize[d];
  }
  return at;
}

/// Calls visit(offset, reducedIndex) for output o's reduced elements in
/// index order.
template <typename Visit> __device__ void walk(const Layout &l, int64_t o, Visit &&visit) {
  const int64_t base = baseOf(l, o);
  for (int64_t k = 0; k < l.count; ++k) visit(offsetOf(l, base, k), k);
}

__device__ inline bool isLargest(ReduceKind kind) {
  return kind == ReduceKind::Amax || kind == ReduceKind::Argmax;
}

/// The first extreme (betterExtreme's order) among the reduced elements
/// k = from, from + step, ... of the output at `base`: a thread's whole walk
/// (step 1) or its share of a block's (step blockDim). Stops at the first
/// NaN, which nothing later beats. bestAt -1: no element.
template <typename T>
__device__ void firstExtreme(const Layout &l, int64_t base, const typename T::S *x,
                             bool largest, int64_t from, int64_t step, double &best,
                             int64_t &bestAt) {
  best = 0;
  bestAt = -1;
  for (int64_t k = from; k < l.count; k += step) {
    if (bestAt >= 0 && best != best) break;
    const double v = static_cast<double>(T::load(x[offsetOf(l, base, k)]));
    if (betterExtreme(largest, v, k, best, bestAt)) {
      best = v;
      bestAt = k;
    }
  }
}

/// Output o of argmax/argmin is the index; of amax/amin the value, -inf
/// (+inf) over no elements, where the CPU's running extreme starts.
template <typename T>
__device__ void storeExtreme(ReduceKind kind, double best, int64_t bestAt, void *y, int64_t o) {
  if (kind == ReduceKind::Argmax || kind == ReduceKind::Argmin) {
    static_cast<int64_t *>(y)[o] = bestAt;
    return;
  }
  const double value = bestAt >= 0 ? best : isLargest(kind) ? -INFINITY : INFINITY;
  static_cast<typename T::S *>(y)[o] = T::store(static_cast<typename T::C>(value));
}

template <typename T>
__global__ void reduceKernel(ReduceKind kind, Layout l, int64_t correction,
                             const typename T::S *x, void *y, int64_t outputs) {
  using C = typename T::C;
  SHARDC_GRID_LOOP(o, outputs) {
    auto load = [&](int64_t at) { return static_cast<double>(T::load(x[at])); };
    switch (kind) {
    case ReduceKind::Sum:
    case ReduceKind::Mean:
    case ReduceKind::Var: {
      double sum = 0;
      walk(l, o, [&](int64_t at, int64_t) { sum += load(at); });
      const double n = static_cast<double>(l.count);
      double result = kind == ReduceKind::Sum ? sum : sum / n;
      if (kind == ReduceKind::Var) {
        const double mean = result;
        double sq = 0;
        walk(l, o, [&](int64_t at, int64_t) {
          const double d = load(at) - mean;
          sq += d * d;
        });
        const double dof = n - static_cast<double>(correction);
        result = sq / (dof > 0 ? dof : 0.0);
      }
      static_cast<typename T::S *>(y)[o] = T::store(static_cast<C>(result));
      break;
    }
    default: {  // amax, amin, argmax, argmin: the first extreme
      double best;
      int64_t bestAt;
      firstExtreme<T>(l, baseOf(l, o), x, isLargest(kind), 0, 1, best, bestAt);
      storeExtreme<T>(kind, best, bestAt, y, o);
      break;
    }
    }
  }
}

/// Whether a reduction takes the block-per-output kernel: enough elements
/// per output to keep a block busy, and few enough outputs that one thread
/// each would leave most of the GPU idle (an H200 runs ~34,000 threads at
/// once; 16384 blocks keep it full either way).
bool blockPerOutput(const Layout &l, int64_t outputs) {
  return l.count >= 4 * kThreads && outputs <= 16384;
}

template <typename T>
__global__ void reduceBlockKernel(ReduceKind kind, Layout l, int64_t correction,
                                  const typename T::S *x, void *y) {
  using C = typename T::C;
  __shared__ double sharedD[kThreads];
  __shared__ int64_t sharedI[kThreads];
  const int64_t o = blockIdx.x;
  const int64_t base = baseOf(l, o);
  auto load = [&](int64_t k) { return static_cast<double>(T::load(x[offsetOf(l, base, k)])); };
  switch (kind) {
  case ReduceKind::Sum:
  case ReduceKind::Mean:
  case ReduceKind::Var: {
    double sum = 0;
    for (int64_t k = threadIdx.x; k < l.count; k += blockDim.x) sum += load(k);
    const double n = static_cast<double>(l.count);
    double result = blockSum(sum, sharedD);
    if (kind != ReduceKind::Sum) result /= n;
    if (kind == ReduceKind::Var) {
      const double mean = result;
      double sq = 0;
      for (int64_t k = threadIdx.x; k < l.count; k += blockDim.x) {
        const double d = load(k) - mean;
        sq += d * d;
      }
      sq = blockSum(sq, sharedD);
      const double dof = n - static_cast<double>(correction);
      result = sq / (dof > 0 ? dof : 0.0);
    }
    if (threadIdx.x == 0) static_cast<typename T::S *>(y)[o] = T::store(static_cast<C>(result));
    break;
  }
  default: {  // amax, amin, argmax, argmin: the first extreme, with its index
    const bool largest = isLargest(kind);
    double best;
    int64_t bestAt;
    firstExtreme<T>(l, base, x, largest, threadIdx.x, blockDim.x, best, bestAt);
    sharedD[threadIdx.x] = best;
    sharedI[threadIdx.x] = bestAt;
    __syncthreads();
    for (int width = kThreads / 2; width > 0; width /= 2) {
      if (threadIdx.x < width &&
          betterExtreme(largest, sharedD[threadIdx.x + width], sharedI[threadIdx.x + width],
                        sharedD[threadIdx.x], sharedI[threadIdx.x])) {
        sharedD[threadIdx.x] = sharedD[threadIdx.x + width];
        sharedI[threadIdx.x] = sharedI[threadIdx.x + width];
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) storeExtreme<T>(kind, sharedD[0], sharedI[0], y, o);
    break;
  }
  }
}

}  // namespace

void reduce(CudaDevice &device, ReduceKind kind, const KTensor &x,
            const std::vector<int64_t> &dims, int64_t correction, const KTensor &y) {
  const char *op = reduceKindName(kind);
  checks::reduce(kind, x, dims, y);
  const Layout l = layoutOf(op, x.shape, dims);
  const int64_t outputs = y.numel();
  if (outputs == 0) return;
  device.makeCurrent();
  const bool perBlock = blockPerOutput(l, outputs);
  dispatchFloat(op, x.dtype, true, [&](auto tag) {
    using T = decltype(tag);
    const auto *xs = static_cast<const typename T::S *>(x.data);
    if (perBlock)
      reduceBlockKernel<T><<<static_cast<unsigned>(outputs), kThreads, 0, device.stream()>>>(
          kind, l, correction, xs, y.data);
    else
      reduceKernel<T><<<gridFor(outputs), kThreads, 0, device.stream()>>>(kind, l, correction, xs,
                                                                           y.data, outputs);
  });
  checkLaunch(std::string(op) + " kernel launch");
}

}  // namespace shardc::runtime::cuda
