// The element rules of the integer-value families (runtime/OpFamilies.h)
// that the CPU kernels (runtime/cpu/ValueKernels.cpp) and the CUDA kernels
// (runtime/cuda/CudaValues.cu) share, as host and device code, so both
// compare and truncate exactly alike.
#pragma once

#include "runtime/HostDevice.h"
#include "runtime/OpFamilies.h"

#include <cstdint>

namespace shardc::runtime::values {

template <typename T> SHARDC_HOST_DEVICE inline bool compare(CompareOp op, T a, T b) {
  switch (op) {
  case CompareOp::Eq: return a == b;
  case CompareOp::Ne: return a != b;
  case CompareOp::Lt: return a < b;
  case CompareOp::Le: return a <= b;
  case CompareOp::Gt: return a > b;
  case CompareOp::Ge: return a >= b;
  }
  return false;
}

/// Inside int64's range (NaN is not): converting such a double is defined.
SHARDC_HOST_DEVICE inline bool inInt64Range(double v) {
  return v >= -9223372036854775808.0 && v < 9223372036854775808.0;
}

/// An integral double inside int64's range: an int64 operand compares with
/// it exactly.
SHARDC_HOST_DEVICE inline bool isInt64Value(double v) {
  return inInt64Range(v) && v == static_cast<double>(static_cast<int64_t>(v));
}

/// torch's float-to-int64 conversion on x86: truncation toward zero, and
/// INT64_MIN for NaN and values outside int64's range (cvttsd2si's answer).
SHARDC_HOST_DEVICE inline int64_t truncateToInt64(double v) {
  return inInt64Range(v) ? static_cast<int64_t>(v) : static_cast<int64_t>(1ull << 63);
}

/// cumsum's lines: x as [outer, n, inner] around `dim` (wrapped); line l's
/// element j is at (l / inner * n + j) * inner + l % inner (scanLines runs
/// on the host, the accessors on either side). A scan visits n elements
/// from start(l), step() apart: forward from element 0, or (reverse) from
/// element n - 1 back to 0.
struct ScanLines {
  int64_t outer = 1, n = 1, inner = 1;
  bool reverse = false;
  SHARDC_HOST_DEVICE int64_t count() const { return outer * inner; }
  SHARDC_HOST_DEVICE int64_t first(int64_t line) const {
    return (line / inner) * n * inner + line % inner;
  }
  SHARDC_HOST_DEVICE int64_t start(int64_t line) const {
    return first(line) + (reverse ? (n - 1) * inner : 0);
  }
  SHARDC_HOST_DEVICE int64_t step() const { return reverse ? -inner : inner; }
};
inline ScanLines scanLines(const Shape &shape, int64_t dim, bool reverse = false) {
  ScanLines lines;
  const int64_t d0 = wrapDim("cumsum", dim, shape.size());
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    (d < d0 ? lines.outer : d == d0 ? lines.n : lines.inner) *= shape[d];
  lines.reverse = reverse;
  return lines;
}

}  // namespace shardc::runtime::values
