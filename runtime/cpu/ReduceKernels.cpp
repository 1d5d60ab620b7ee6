// reduceKernel (runtime/cpu/FamilyKernels.h): sum, mean, amax, amin, var,
// argmax, argmin over any set of dims.
//
// Each output element is reduced by one task, in index order over the
// reduced dims (an odometer over them, the last one innermost), so the
// result does not depend on the thread count or on other samples.
//   sum, mean: double accumulation, one rounding to the storage dtype.
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
#include <vector>

namespace shardc::runtime {
using plan::DType;

namespace {

const char *reduceOpName(ReduceKind kind) {
  switch (kind) {
  case ReduceKind::Sum: return "sum";
  case ReduceKind::Mean: return "mean";
  case ReduceKind::Amax: return "amax";
  case ReduceKind::Amin: return "amin";
  case ReduceKind::Var: return "var";
  case ReduceKind::Argmax: return "argmax";
  case ReduceKind::Argmin: return "argmin";
  }
  return "reduce";
}

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

/// Calls visit(value, reducedIndex) for the reduced elements of output o in
/// index order; `values` is x as C (float or double) through `load`.
template <typename Load, typename Visit>
void walk(const Layout &l, int64_t o, const Load &load, const Visit &visit) {
  int64_t base = 0;
  for (size_t d = l.keptSize.size(); d-- > 0;) {
    base += (o % l.keptSize[d]) * l.keptStride[d];
    o /= l.keptSize[d];
  }
  if (l.count == 0) return;
  const size_t r = l.redSize.size();
  if (r == 0) {
    visit(load(base), 0);
    return;
  }
  const int64_t inner = l.redSize[r - 1], innerStride = l.redStride[r - 1];
  std::vector<int64_t> index(r, 0);
  int64_t at = base, flat = 0;
  for (;;) {
    for (int64_t j = 0; j < inner; ++j) visit(load(at + j * innerStride), flat + j);
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

template <typename S, typename C>
void reduceTyped(ReduceKind kind, const KTensor &x, const Layout &l, int64_t correction,
                 C (*widen)(S), S (*narrow)(C), const KTensor &y, int threads) {
  const S *in = static_cast<const S *>(x.data);
  auto load = [&](int64_t i) { return static_cast<double>(widen(in[i])); };
  const int64_t outputs = y.numel();
  constexpr int64_t kPerTask = 64;
  cpu::parallelTasks((outputs + kPerTask - 1) / kPerTask, threads, x.numel() * 2, [&](int64_t t) {
    for (int64_t o = t * kPerTask; o < std::min(outputs, (t + 1) * kPerTask); ++o) {
      switch (kind) {
      case ReduceKind::Sum:
      case ReduceKind::Mean:
      case ReduceKind::Var: {
        double sum = 0;
        walk(l, o, load, [&](double v, int64_t) { sum += v; });
        const double n = static_cast<double>(l.count);
        double result = kind == ReduceKind::Sum ? sum : sum / n;
        if (kind == ReduceKind::Var) {
          const double mean = result;
          double sq = 0;
          walk(l, o, load, [&](double v, int64_t) { sq += (v - mean) * (v - mean); });
          result = sq / std::max(0.0, n - static_cast<double>(correction));
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
  const char *op = reduceOpName(kind);
  if (x.dtype != DType::F64) checks::expectFloat(op, "x", x);
  const bool arg = kind == ReduceKind::Argmax || kind == ReduceKind::Argmin;
  checks::expectDType(op, "output", y, arg ? DType::I64 : x.dtype);
  const Shape dropped = reduceShape(kind, x.shape, dims, false);
  const Shape kept = reduceShape(kind, x.shape, dims, true);
  if (y.shape != dropped && y.shape != kept)
    checks::fail(op, "output has shape " + shapeToString(y.shape) + ", expected " +
                         shapeToString(dropped) + " or, with keepdim, " + shapeToString(kept));
  const Layout l = layoutOf(x.shape, dims);
  switch (x.dtype) {
  case DType::F64:
    return reduceTyped<double, double>(kind, x, l, correction, idD, idD, y, threads);
  case DType::F32:
    return reduceTyped<float, float>(kind, x, l, correction, idF, idF, y, threads);
  case DType::BF16:
    return reduceTyped<uint16_t, float>(kind, x, l, correction, bfloat16BitsToFloat,
                                        floatToBFloat16Bits, y, threads);
  case DType::F16:
    return reduceTyped<uint16_t, float>(kind, x, l, correction, halfBitsToFloat,
                                        floatToHalfBits, y, threads);
  default: return;
  }
}

}  // namespace shardc::runtime
