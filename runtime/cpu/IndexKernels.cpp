// CPU kernels of the index family (runtime/OpFamilies.h): topk, gather,
// embedding_backward and cross_entropy_backward. topk and gather only
// compare and copy elements, so they are exact for every float dtype;
// embedding_backward sums rows in order of the index, in double;
// cross_entropy_backward is the softmax kernel's rows with one subtracted
// at each target. None depends on the thread count: each task owns its
// outputs and reads nothing another task writes.
#include "runtime/cpu/FamilyKernels.h"

#include "runtime/ForwardChecks.h"
#include "runtime/ForwardKernels.h"
#include "runtime/InitOps.h"
#include "runtime/cpu/KernelSupport.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace shardc::runtime {
using plan::DType;

namespace {

/// The extent of `dim` and the products of the dims before (outer) and after
/// (inner) it: element (o, j, i) of a row-major tensor is at (o*n + j)*inner + i.
struct RowGeometry {
  int64_t outer = 1, extent = 1, inner = 1;
};
RowGeometry rowsAlong(const Shape &shape, int64_t dim) {
  RowGeometry g;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < dim) g.outer *= shape[d];
    else if (d == dim) g.extent = shape[d];
    else g.inner *= shape[d];
  }
  return g;
}

}  // namespace

void topkKernel(const IndexParams &p, const KTensor &x, const KTensor &y, int threads) {
  checks::topk(p, x, y);
  const int64_t dim = wrapDim("topk", p.dim, x.shape.size());
  const RowGeometry g = rowsAlong(x.shape, x.shape.empty() ? 0 : dim);
  const int64_t k = p.k, n = g.extent;
  if (k == 0 || y.numel() == 0) return;
  int64_t *out = static_cast<int64_t *>(y.data);
  const bool largest = p.largest;
  const int64_t logK = 64 - __builtin_clzll(static_cast<unsigned long long>(k) | 1);
  cpu::parallelTasks(g.outer * g.inner, threads, x.numel() * logK, [&](int64_t row) {
    const int64_t o = row / g.inner, i = row % g.inner;
    const int64_t first = o * n * g.inner + i;
    // (value, index) pairs in index order, compared by value only, with the
    // selection torch's CPU kernel uses (a partial sort when k is at most
    // 1/64 of the row, else nth_element and a sort of the k-1 before it):
    // the same standard-library algorithms on the same sequence choose the
    // same index among equal values as torch does. NaN is the largest value.
    std::vector<std::pair<double, int64_t>> queue(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) queue[j] = {loadAsDouble(x.dtype, x.data, first + j * g.inner), j};
    auto before = [largest](const std::pair<double, int64_t> &a,
                            const std::pair<double, int64_t> &b) {
      const bool nanA = std::isnan(a.first), nanB = std::isnan(b.first);
      return largest ? (nanA && !nanB) || a.first > b.first
                     : (!nanA && nanB) || a.first < b.first;
    };
    if (k * 64 <= n) {
      std::partial_sort(queue.begin(), queue.begin() + k, queue.end(), before);
    } else {
      std::nth_element(queue.begin(), queue.begin() + (k - 1), queue.end(), before);
      std::sort(queue.begin(), queue.begin() + (k - 1), before);
    }
    for (int64_t j = 0; j < k; ++j) out[(o * k + j) * g.inner + i] = queue[j].second;
  });
}

void gatherKernel(const IndexParams &p, const KTensor &x, const KTensor &index, const KTensor &y,
                  int threads) {
  checks::gather(p, x, index, y);
  const int64_t dim = wrapDim("gather", p.dim, x.shape.size());
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const int64_t extent = rank == 0 ? 1 : x.shape[dim];
  const int64_t *idx = static_cast<const int64_t *>(index.data);
  const int64_t count = index.numel();
  // Indices are data: checked here, before any worker runs.
  for (int64_t e = 0; e < count; ++e)
    if (idx[e] < 0 || idx[e] >= extent)
      checks::fail("gather", "index " + std::to_string(idx[e]) + " at element " +
                                 std::to_string(e) + " is out of bounds for dimension " +
                                 std::to_string(dim) + " with size " + std::to_string(extent));
  // Element e of index (coordinates c) reads x at c with c[dim] = idx[e];
  // x's strides are row-major over x's own shape (index may be smaller).
  std::vector<int64_t> xStride(static_cast<size_t>(rank), 1);
  for (int64_t d = rank - 2; d >= 0; --d) xStride[d] = xStride[d + 1] * x.shape[d + 1];
  const size_t size = plan::dtypeSize(x.dtype);
  const char *src = static_cast<const char *>(x.data);
  char *dst = static_cast<char *>(y.data);
  const int64_t last = rank == 0 ? 1 : index.shape.back();
  const int64_t rows = last == 0 ? 0 : count / last;
  cpu::parallelTasks(rows, threads, count, [&](int64_t row) {
    // Coordinates of the row's first element in index's shape.
    int64_t rest = row, base = 0, dimCoordStride = rank == 0 ? 0 : xStride[dim];
    for (int64_t d = rank - 2; d >= 0; --d) {
      const int64_t c = rest % index.shape[d];
      rest /= index.shape[d];
      if (d != dim) base += c * xStride[d];
    }
    for (int64_t j = 0; j < last; ++j) {
      const int64_t e = row * last + j;
      int64_t at = base + idx[e] * dimCoordStride;
      if (rank > 0 && dim != rank - 1) at += j;  // the last dim's coordinate (stride 1)
      std::memcpy(dst + static_cast<size_t>(e) * size, src + static_cast<size_t>(at) * size, size);
    }
  });
}

namespace {

/// The M reads in order of their row, each row's in increasing m (a
/// stable sort). A counting sort where the table's rows are few next to the
/// reads (O(M + rows): an embedding table's or bag sums' gradient); a
/// comparison sort where they are not (O(M) memory whatever the rows: a
/// gather's gradient over a vocabulary of logits). The same order either way.
std::vector<int64_t> readsByRow(const int64_t *idx, int64_t M, int64_t rows) {
  std::vector<int64_t> order(static_cast<size_t>(M));
  if (rows <= 4 * M + 65536) {
    std::vector<int64_t> start(static_cast<size_t>(rows) + 1, 0);
    for (int64_t m = 0; m < M; ++m) ++start[static_cast<size_t>(idx[m]) + 1];
    for (int64_t v = 0; v < rows; ++v) start[v + 1] += start[v];
    for (int64_t m = 0; m < M; ++m) order[static_cast<size_t>(start[idx[m]]++)] = m;
    return order;
  }
  for (int64_t m = 0; m < M; ++m) order[static_cast<size_t>(m)] = m;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return idx[a] < idx[b]; });
  return order;
}

/// y[v] = the rows order[first..last) of src summed in that order in double,
/// rounded once to y's dtype. T: src's and y's element type, or void for
/// any dtype through loadAsDouble / storeFromDouble.
template <typename T>
void sumRows(const KTensor &src, const KTensor &y, const std::vector<int64_t> &order, int64_t first,
             int64_t last, int64_t v, int64_t D, std::vector<double> &sum) {
  sum.assign(static_cast<size_t>(D), 0.0);
  for (int64_t k = first; k < last; ++k) {
    const int64_t row = order[static_cast<size_t>(k)] * D;
    if constexpr (std::is_void_v<T>) {
      for (int64_t c = 0; c < D; ++c) sum[c] += loadAsDouble(src.dtype, src.data, row + c);
    } else {
      const T *in = static_cast<const T *>(src.data) + row;
      for (int64_t c = 0; c < D; ++c) sum[c] += static_cast<double>(in[c]);
    }
  }
  if constexpr (std::is_void_v<T>) {
    for (int64_t c = 0; c < D; ++c) storeFromDouble(y.dtype, y.data, v * D + c, sum[c]);
  } else {
    T *out = static_cast<T *>(y.data) + v * D;
    for (int64_t c = 0; c < D; ++c) out[c] = static_cast<T>(sum[c]);
  }
}

/// y[v] = acc[v] + the rows order[first..last) of src summed as sumRows
/// does (first == last: +0), bit for bit `add` of acc and sumRows' row:
/// the sum rounded to the dtype first, then added in float (double for
/// float64) and rounded once. acc[v] is read before y[v] is written, so acc
/// may be y.
void accumulateRow(const KTensor &src, const KTensor &acc, const KTensor &y,
                   const std::vector<int64_t> &order, int64_t first, int64_t last, int64_t v,
                   int64_t D) {
  thread_local std::vector<double> sum;
  sum.assign(static_cast<size_t>(D), 0.0);
  for (int64_t k = first; k < last; ++k) {
    const int64_t row = order[static_cast<size_t>(k)] * D;
    for (int64_t c = 0; c < D; ++c) sum[c] += loadAsDouble(src.dtype, src.data, row + c);
  }
  const int64_t at = v * D;
  if (y.dtype == DType::F64) {
    const double *a = static_cast<const double *>(acc.data) + at;
    double *out = static_cast<double *>(y.data) + at;
    for (int64_t c = 0; c < D; ++c) out[c] = a[c] + sum[c];
    return;
  }
  if (y.dtype == DType::F32) {
    const float *a = static_cast<const float *>(acc.data) + at;
    float *out = static_cast<float *>(y.data) + at;
    for (int64_t c = 0; c < D; ++c) out[c] = a[c] + static_cast<float>(sum[c]);
    return;
  }
  // 16-bit: each sum rounded to the dtype as the two-operand op stores it.
  thread_local std::vector<std::byte> rounded;
  thread_local std::vector<float> a, s;
  rounded.resize(static_cast<size_t>(D * plan::dtypeSize(y.dtype)));
  a.resize(static_cast<size_t>(D));
  s.resize(static_cast<size_t>(D));
  for (int64_t c = 0; c < D; ++c) storeFromDouble(y.dtype, rounded.data(), c, sum[c]);
  cpu::loadFloats(y.dtype, rounded.data(), 0, D, s.data());
  cpu::loadFloats(y.dtype, acc.data, at, D, a.data());
  for (int64_t c = 0; c < D; ++c) a[c] += s[c];
  cpu::storeFloats(y.dtype, a.data(), D, y.data, at);
}

}  // namespace

void embeddingBackwardKernel(const IndexParams &p, const KTensor &src, const KTensor &index,
                             const KTensor &y, int threads, const KTensor *acc) {
  checks::embeddingBackward(p, src, index, acc, y);
  const int64_t M = src.shape[0], D = src.shape[1];
  const int64_t *idx = static_cast<const int64_t *>(index.data);
  checks::embeddingIndices(p, idx, M);  // indices are data: checked before any sum
  // The reads sorted by row, then each task sums one row's reads: every
  // output element is the same sum in the same order, whatever the thread
  // count. Rows nobody reads, and padding_idx, are zeros.
  const std::vector<int64_t> order = readsByRow(idx, M, p.rows);
  std::vector<int64_t> groups;  // the first read of each distinct row
  for (int64_t k = 0; k < M; ++k)
    if (k == 0 || idx[order[k]] != idx[order[k - 1]]) groups.push_back(k);
  groups.push_back(M);
  if (acc) {
    // Every row is written (acc plus its sum, or plus +0): one task per
    // block of rows, each row's reads found through its group.
    std::vector<int64_t> groupOf(static_cast<size_t>(p.rows), -1);
    for (size_t g = 0; g + 1 < groups.size(); ++g) groupOf[idx[order[groups[g]]]] = g;
    constexpr int64_t kRowsPerTask = 64;
    cpu::parallelTasks(
        (p.rows + kRowsPerTask - 1) / kRowsPerTask, threads, p.rows * D, [&](int64_t t) {
          for (int64_t v = t * kRowsPerTask; v < std::min(p.rows, (t + 1) * kRowsPerTask); ++v) {
            const int64_t g = v == p.paddingIdx ? -1 : groupOf[v];
            const int64_t first = g < 0 ? 0 : groups[g], last = g < 0 ? 0 : groups[g + 1];
            accumulateRow(src, *acc, y, order, first, last, v, D);
          }
        });
    return;
  }
  // Zeros first (+0 is all-zero bytes in every float dtype).
  const int64_t bytes = p.rows * D * plan::dtypeSize(y.dtype), zeroBlock = int64_t(1) << 20;
  cpu::parallelTasks((bytes + zeroBlock - 1) / zeroBlock, threads, bytes / 4, [&](int64_t b) {
    const int64_t begin = b * zeroBlock;
    std::memset(static_cast<std::byte *>(y.data) + begin, 0,
                static_cast<size_t>(std::min(zeroBlock, bytes - begin)));
  });
  const int64_t rowsRead = static_cast<int64_t>(groups.size()) - 1;
  cpu::parallelTasks(rowsRead, threads, M * D, [&](int64_t g) {
    const int64_t v = idx[order[groups[g]]];
    if (v == p.paddingIdx) return;
    thread_local std::vector<double> sum;  // reused: no allocation per row
    const int64_t first = groups[g], last = groups[g + 1];
    switch (src.dtype) {
    case DType::F32: return sumRows<float>(src, y, order, first, last, v, D, sum);
    case DType::F64: return sumRows<double>(src, y, order, first, last, v, D, sum);
    default: return sumRows<void>(src, y, order, first, last, v, D, sum);
    }
  });
}

void crossEntropyBackwardKernel(const IndexParams &p, const KTensor &x, const KTensor &target,
                                const KTensor &y, int threads) {
  checks::crossEntropyBackward(x, target, y);
  const int64_t N = x.shape[0], C = x.shape[1];
  const int64_t *t = static_cast<const int64_t *>(target.data);
  checks::crossEntropyTargets(p, t, N, C);  // targets are data: checked before anything
  // The softmax op's own rows (float32, bfloat16, float16: its dtypes),
  // then one subtracted at each target in float, rounded once (what `sub`
  // of a one-hot did: the same bits), so that no [N, C] one-hot is made.
  softmaxKernel(x, 1, y, threads);
  const int64_t itemBytes = plan::dtypeSize(y.dtype);
  auto *out = static_cast<std::byte *>(y.data);
  for (int64_t n = 0; n < N; ++n) {
    if (t[n] == p.ignoreIndex) {  // not counted: no gradient
      std::memset(out + n * C * itemBytes, 0, static_cast<size_t>(C * itemBytes));
      continue;
    }
    const int64_t at = n * C + t[n];
    float v;
    cpu::loadFloats(y.dtype, y.data, at, 1, &v);
    v -= 1.0f;
    cpu::storeFloats(y.dtype, &v, 1, y.data, at);
  }
}

}  // namespace shardc::runtime
