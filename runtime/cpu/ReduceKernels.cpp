// reduceKernel (runtime/cpu/FamilyKernels.h): sum, mean, amax, amin, var,
// argmax, argmin over any set of dims.
//
// Each output element is reduced within one task, in index order over the
// reduced dims (an odometer over them, the last one innermost), so the
// result does not depend on the thread count or on other samples. When x's
// last dim is kept, sum, mean and var reduce up to 64 neighbouring outputs
// together (sumColumns: the same arithmetic per output, vectorized across
// them).
//   sum, mean: double accumulation (float storage: pieces of 4096 in eight
//     partial sums, cpu::sumLanes), one rounding to the storage dtype.
//   var: two passes in double (mean, then squared deviations), divided by
//     max(0, count - correction) (0 gives inf or NaN, as torch).
//   amax, amin: NaN propagates. argmax, argmin: the first extreme; a NaN
//     counts as the extreme (torch), int64 indices into the reduced dim (or
//     the flattened tensor when no dim is given).
#include "runtime/cpu/FamilyKernels.h"

#include "runtime/ForwardChecks.h"
#include "runtime/cpu/KernelSupport.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

namespace shardc::runtime {
using plan::DType;

namespace {

/// Where output element o reads: kept dims give the base offset, the
/// reduced dims are walked from it.
struct Layout {
  std::vector<int64_t> keptSize, keptStride;  // outer to inner
  std::vector<int64_t> redSize, redStride;    // outer to inner
  int64_t count = 1;                          // reduced elements per output
};

Layout layoutOf(const Shape &x, const std::vector<int64_t> &dims) {
  const int64_t rank = static_cast<int64_t>(x.size());
  std::vector<bool> reduced(static_cast<size_t>(rank), dims.empty());
  for (int64_t d : dims)
    if (rank > 0) reduced[d < 0 ? d + rank : d] = true;
  Layout l;
  int64_t stride = 1;
  std::vector<int64_t> strides(static_cast<size_t>(rank));
  for (int64_t d = rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= x[d];
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[d]) {
      l.redSize.push_back(x[d]);
      l.redStride.push_back(strides[d]);
      l.count *= x[d];
    } else {
      l.keptSize.push_back(x[d]);
      l.keptStride.push_back(strides[d]);
    }
  }
  return l;
}

/// Calls run(offset, count, stride, flatIndex) for the runs of the
/// innermost reduced dim of output o, in index order over the other reduced
/// dims (flatIndex: the run's first index in the reduced space).
template <typename Run> void walkRuns(const Layout &l, int64_t o, const Run &run) {
  int64_t base = 0;
  for (size_t d = l.keptSize.size(); d-- > 0;) {
    base += (o % l.keptSize[d]) * l.keptStride[d];
    o /= l.keptSize[d];
  }
  if (l.count == 0) return;
  const size_t r = l.redSize.size();
  if (r == 0) {
    run(base, 1, 1, 0);
    return;
  }
  const int64_t inner = l.redSize[r - 1], innerStride = l.redStride[r - 1];
  // The odometer on the stack up to 8 reduced dims: a heap vector per
  // output cost more than the sum itself where the runs are short (a batch
  // norm's gradient over 4 x 4 planes).
  int64_t onStack[8] = {};
  std::vector<int64_t> onHeap(r > 8 ? r : 0, 0);
  int64_t *index = r > 8 ? onHeap.data() : onStack;
  int64_t at = base, flat = 0;
  for (;;) {
    run(at, inner, innerStride, flat);
    flat += inner;
    size_t d = r - 1;
    for (;;) {
      if (d == 0) return;
      --d;
      at += l.redStride[d];
      if (++index[d] < l.redSize[d]) break;
      at -= l.redStride[d] * l.redSize[d];
      index[d] = 0;
    }
  }
}

/// Calls visit(value, reducedIndex) for the reduced elements of output o in
/// index order; `load` reads element i of x as double.
template <typename Load, typename Visit>
void walk(const Layout &l, int64_t o, const Load &load, const Visit &visit) {
  walkRuns(l, o, [&](int64_t at, int64_t n, int64_t stride, int64_t flat) {
    for (int64_t j = 0; j < n; ++j) visit(load(at + j * stride), flat + j);
  });
}

constexpr int64_t kRunChunk = 4096;  // floats per converted piece of a run

/// Sum (or, with `mean`, the squared deviations) of output o's elements in
/// double: each run in pieces of kRunChunk floats summed by cpu::sumLanes,
/// the pieces and runs added in order. float32 runs of stride 1 are read in
/// place; others are converted into `buf` first.
template <typename S, float (*Widen)(S)>
double sumRuns(const Layout &l, int64_t o, const S *in, std::vector<float> &buf,
               const double *mean) {
  double total = 0;
  walkRuns(l, o, [&](int64_t at, int64_t n, int64_t stride, int64_t) {
    for (int64_t j0 = 0; j0 < n; j0 += kRunChunk) {
      const int64_t m = std::min(kRunChunk, n - j0);
      const float *v;
      if (std::is_same_v<S, float> && stride == 1) {
        v = reinterpret_cast<const float *>(in) + at + j0;
      } else {
        buf.resize(static_cast<size_t>(kRunChunk));
        for (int64_t j = 0; j < m; ++j) buf[j] = Widen(in[at + (j0 + j) * stride]);
        v = buf.data();
      }
      total += mean ? cpu::sumSquaredDeviationsLanes(v, m, *mean) : cpu::sumLanes(v, m);
    }
  });
  return total;
}

/// Outputs per block of sumColumns: 8 partial sums of 64 doubles (4 KiB).
constexpr int64_t kColumnBlock = 64;

/// sumRuns for the outputs [o, o + width) at once, when x's last dim is kept
/// (stride 1) and they lie in one row of it: output o + j reads x at the
/// same offsets as output o, plus j. Each output's arithmetic is sumRuns'
/// exactly (the same runs, pieces, eight partial sums and their pairwise
/// combination); the loops over j run across outputs, which vectorizes a
/// reduction over outer dims (a bias or norm weight's gradient summed over
/// the tokens, heads summed in grouped-query attention) where sumRuns would
/// walk one output at a time through strided runs of a few elements.
template <typename S, float (*Widen)(S)>
void sumColumns(const Layout &l, int64_t o, int64_t width, const S *in, const double *mean,
                double *total) {
  std::fill_n(total, width, 0.0);
  double acc[8][kColumnBlock];
  walkRuns(l, o, [&](int64_t at, int64_t n, int64_t stride, int64_t) {
    for (int64_t j0 = 0; j0 < n; j0 += kRunChunk) {
      const int64_t m = std::min(kRunChunk, n - j0);
      for (auto &lane : acc) std::fill_n(lane, width, 0.0);
      for (int64_t i = 0; i < m; ++i) {
        const S *v = in + at + (j0 + i) * stride;
        double *lane = acc[i % 8];
        if (mean) {
          for (int64_t j = 0; j < width; ++j) {
            const double d = static_cast<double>(Widen(v[j])) - mean[j];
            lane[j] += d * d;
          }
        } else {
          for (int64_t j = 0; j < width; ++j) lane[j] += static_cast<double>(Widen(v[j]));
        }
      }
      for (int64_t j = 0; j < width; ++j)
        total[j] += ((acc[0][j] + acc[1][j]) + (acc[2][j] + acc[3][j])) +
                    ((acc[4][j] + acc[5][j]) + (acc[6][j] + acc[7][j]));
    }
  });
}

template <typename S, typename C, C (*Widen)(S)> float widenFloat(S v) {
  return static_cast<float>(Widen(v));
}

template <typename S, typename C, C (*widen)(S), S (*narrow)(C)>
void reduceTyped(ReduceKind kind, const KTensor &x, const Layout &l, int64_t correction,
                 const KTensor &y, int threads) {
  const S *in = static_cast<const S *>(x.data);
  auto load = [&](int64_t i) { return static_cast<double>(widen(in[i])); };
  const int64_t outputs = y.numel();
  if constexpr (std::is_same_v<C, float>) {
    const bool moments =
        kind == ReduceKind::Sum || kind == ReduceKind::Mean || kind == ReduceKind::Var;
    if (moments && outputs > 0 && !l.keptStride.empty() && l.keptStride.back() == 1) {
      const int64_t width = l.keptSize.back(), blocks = (width + kColumnBlock - 1) / kColumnBlock;
      const double n = static_cast<double>(l.count);
      cpu::parallelTasks(outputs / width * blocks, threads, x.numel() * 2, [&](int64_t t) {
        const int64_t o = t / blocks * width + t % blocks * kColumnBlock;
        const int64_t m = std::min(kColumnBlock, width - t % blocks * kColumnBlock);
        double sum[kColumnBlock], mean[kColumnBlock];
        sumColumns<S, widenFloat<S, C, widen>>(l, o, m, in, nullptr, sum);
        for (int64_t j = 0; j < m; ++j) mean[j] = kind == ReduceKind::Sum ? sum[j] : sum[j] / n;
        if (kind == ReduceKind::Var) {
          sumColumns<S, widenFloat<S, C, widen>>(l, o, m, in, mean, sum);
          for (int64_t j = 0; j < m; ++j)
            mean[j] = sum[j] / std::max(0.0, n - static_cast<double>(correction));
        }
        for (int64_t j = 0; j < m; ++j)
          static_cast<S *>(y.data)[o + j] = narrow(static_cast<C>(mean[j]));
      });
      return;
    }
  }
  constexpr int64_t kPerTask = 64;
  cpu::parallelTasks((outputs + kPerTask - 1) / kPerTask, threads, x.numel() * 2, [&](int64_t t) {
    thread_local std::vector<float> buf;
    for (int64_t o = t * kPerTask; o < std::min(outputs, (t + 1) * kPerTask); ++o) {
      switch (kind) {
      case ReduceKind::Sum:
      case ReduceKind::Mean:
      case ReduceKind::Var: {
        // float storage: eight partial sums per piece (cpu::sumLanes);
        // float64: one running sum.
        auto sumOf = [&](const double *mean) {
          if constexpr (std::is_same_v<C, float>) {
            return sumRuns<S, widenFloat<S, C, widen>>(l, o, in, buf, mean);
          } else {
            double acc = 0;
            walk(l, o, load, [&](double v, int64_t) { acc += mean ? (v - *mean) * (v - *mean) : v; });
            return acc;
          }
        };
        const double sum = sumOf(nullptr);
        const double n = static_cast<double>(l.count);
        double result = kind == ReduceKind::Sum ? sum : sum / n;
        if (kind == ReduceKind::Var) {
          const double mean = result;
          result = sumOf(&mean) / std::max(0.0, n - static_cast<double>(correction));
        }
        static_cast<S *>(y.data)[o] = narrow(static_cast<C>(result));
        break;
      }
      case ReduceKind::Amax:
      case ReduceKind::Amin: {
        const bool mx = kind == ReduceKind::Amax;
        double best = mx ? -std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::infinity();
        walk(l, o, load, [&](double v, int64_t) {
          if (std::isnan(best)) return;
          if (std::isnan(v) || (mx ? v > best : v < best)) best = v;
        });
        static_cast<S *>(y.data)[o] = narrow(static_cast<C>(best));
        break;
      }
      case ReduceKind::Argmax:
      case ReduceKind::Argmin: {
        const bool mx = kind == ReduceKind::Argmax;
        double best = 0;
        int64_t bestAt = -1;
        walk(l, o, load, [&](double v, int64_t i) {
          if (bestAt >= 0 && std::isnan(best)) return;
          if (bestAt < 0 || std::isnan(v) || (mx ? v > best : v < best)) {
            best = v;
            bestAt = i;
          }
        });
        static_cast<int64_t *>(y.data)[o] = bestAt;
        break;
      }
      }
    }
  });
}

float idF(float v) { return v; }
double idD(double v) { return v; }

}  // namespace

void reduceKernel(ReduceKind kind, const KTensor &x, const std::vector<int64_t> &dims,
                  int64_t correction, const KTensor &y, int threads) {
  checks::reduce(kind, x, dims, y);
  const Layout l = layoutOf(x.shape, dims);
  switch (x.dtype) {
  case DType::F64:
    return reduceTyped<double, double, idD, idD>(kind, x, l, correction, y, threads);
  case DType::F32:
    return reduceTyped<float, float, idF, idF>(kind, x, l, correction, y, threads);
  case DType::BF16:
    return reduceTyped<uint16_t, float, bfloat16BitsToFloat, floatToBFloat16Bits>(
        kind, x, l, correction, y, threads);
  case DType::F16:
    return reduceTyped<uint16_t, float, halfBitsToFloat, floatToHalfBits>(kind, x, l, correction,
                                                                         y, threads);
  default: return;
  }
}

}  // namespace shardc::runtime
