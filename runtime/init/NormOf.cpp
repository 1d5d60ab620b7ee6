#include "runtime/init/NormOf.h"

#include "runtime/InitOps.h"

#include <algorithm>
#include <cmath>

namespace shardc::runtime::init {

void normOf(const NormOfSource &source, const std::vector<int64_t> &dims, int64_t begin,
            int64_t count, plan::DType outDtype, void *out, void *work) {
  const std::vector<int64_t> &shape = source.generator.shape;
  const size_t rank = shape.size();
  // Output strides over the source's index: a reduced dim contributes 0.
  std::vector<int64_t> outStride(rank, 0);
  std::vector<bool> reduced(rank, false);
  for (int64_t d : dims) reduced[static_cast<size_t>(d)] = true;
  int64_t stride = 1;
  for (size_t d = rank; d-- > 0;) {
    if (!reduced[d]) {
      outStride[d] = stride;
      stride *= shape[d];
    }
  }
  double *sums = static_cast<double *>(work);
  std::byte *block = reinterpret_cast<std::byte *>(sums + count);
  std::fill(sums, sums + count, 0.0);

  int64_t total = 1;
  for (int64_t n : shape) total *= n;
  std::vector<int64_t> index(rank, 0);  // the source index of the next element
  int64_t at = 0;                        // its output flat index
  for (int64_t done = 0; done < total; done += kNormOfBlockElements) {
    const int64_t n = std::min(kNormOfBlockElements, total - done);
    // One thread: the block is small, and the values do not depend on it.
    generateRange(source.generator, source.dtype, done, n, block, 1);
    for (const NormOfSource::Step &step : source.pointwise)
      applyPointwise(step.kind, step.a, step.b, source.dtype, block, n, 1);
    for (int64_t i = 0; i < n; ++i) {
      if (at >= begin && at < begin + count) {
        const double v = loadAsDouble(source.dtype, block, i);
        sums[at - begin] += v * v;
      }
      // Advance the source index (row-major) and its output index.
      for (size_t d = rank; d-- > 0;) {
        at += outStride[d];
        if (++index[d] < shape[d]) break;
        at -= outStride[d] * shape[d];
        index[d] = 0;
      }
    }
  }
  for (int64_t k = 0; k < count; ++k) storeFromDouble(outDtype, out, k, std::sqrt(sums[k]));
}

}  // namespace shardc::runtime::init
