// What the family kernels (runtime/cpu/*Kernels.cpp) share: 16-bit storage
// conversion, the task runner, OpenBLAS in single-threaded mode.
// The same rules as runtime/ForwardKernels.cpp's helpers (kept private
// there): each result is rounded to the storage dtype once, and the work is
// cut into tasks whose boundaries do not depend on the thread count.
#pragma once

#include "runtime/ForwardKernels.h"
#include "runtime/HalfFloat.h"
#include "runtime/cpu/KernelTeam.h"
#include "runtime/cpu/VectorMath.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace shardc::runtime::cpu {

/// n values of `dtype` (float32, bfloat16, float16) from element `offset`
/// of `base`, widened to float.
inline void loadFloats(plan::DType dtype, const void *base, int64_t offset, int64_t n,
                       float *dst) {
  switch (dtype) {
  case plan::DType::F32:
    std::memcpy(dst, static_cast<const float *>(base) + offset, static_cast<size_t>(n) * 4);
    return;
  case plan::DType::BF16: {
    const uint16_t *src = static_cast<const uint16_t *>(base) + offset;
    for (int64_t i = 0; i < n; ++i) dst[i] = bfloat16BitsToFloat(src[i]);
    return;
  }
  case plan::DType::F16: {
    const uint16_t *src = static_cast<const uint16_t *>(base) + offset;
    for (int64_t i = 0; i < n; ++i) dst[i] = halfBitsToFloat(src[i]);
    return;
  }
  default: return;  // rejected by the callers' dtype checks
  }
}

/// n floats rounded once into `dtype` at element `offset` of `base`.
inline void storeFloats(plan::DType dtype, const float *src, int64_t n, void *base,
                        int64_t offset) {
  switch (dtype) {
  case plan::DType::F32:
    std::memmove(static_cast<float *>(base) + offset, src, static_cast<size_t>(n) * 4);
    return;
  case plan::DType::BF16: {
    uint16_t *dst = static_cast<uint16_t *>(base) + offset;
    for (int64_t i = 0; i < n; ++i) dst[i] = floatToBFloat16Bits(src[i]);
    return;
  }
  case plan::DType::F16: {
    uint16_t *dst = static_cast<uint16_t *>(base) + offset;
    for (int64_t i = 0; i < n; ++i) dst[i] = floatToHalfBits(src[i]);
    return;
  }
  default: return;
  }
}

/// v rounded to `dtype` (bfloat16, float16; float32 unchanged) and widened
/// back: what storing it and reading it again gives.
inline float roundedTo(plan::DType dtype, float v) {
  if (dtype == plan::DType::BF16) return bfloat16BitsToFloat(floatToBFloat16Bits(v));
  if (dtype == plan::DType::F16) return halfBitsToFloat(floatToHalfBits(v));
  return v;
}

/// Runs task(i) for i in [0, tasks) on up to `threads` threads (the calling
/// thread's kernel team, KernelTeam.h); on this thread alone when the whole
/// job is small (work = rough count of element operations). Results must
/// not depend on which thread runs a task.
template <typename Task>
void parallelTasks(int64_t tasks, int threads, int64_t work, const Task &task) {
  if (tasks <= 0) return;
  const int used = work < (int64_t(1) << 15) ? 1 : threads;
  runOnKernelTeam(
      tasks, used,
      [](const void *context, int64_t begin, int64_t end) {
        const Task &body = *static_cast<const Task *>(context);
        for (int64_t t = begin; t < end; ++t) body(t);
      },
      &task);
}

/// Sum of v[0..n) in double: element i goes to partial sum i % 8 and the
/// eight are combined pairwise, so the loop vectorizes and the result
/// depends only on the values and n.
inline double sumLanes(const float *v, int64_t n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += static_cast<double>(v[i + j]);
  for (int j = 0; i < n; ++i, ++j) acc[j] += static_cast<double>(v[i]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/// The `softmax` op's arithmetic on one row of n floats, in two steps so
/// that a block of the row's columns can be finished alone (a fused loss
/// head's weight gradient, cpu/LossHeadKernels.cpp): softmaxRowExps writes
/// exp(v[i] - max) over v and returns the shift and 1 / sum;
/// softmaxRowScale then gives v[i] * inv rounded to float. exp's bits do
/// not depend on an element's place in the array (VectorMath.h).
struct SoftmaxRowStats {
  float shift;
  double inv;
};
inline SoftmaxRowStats softmaxRowExps(float *v, int64_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, v[i]);
  if (std::isinf(mx) && mx < 0) mx = 0;  // all -inf: exp gives 0, 0/0 = NaN as torch
  vecExpShifted(v, mx, v, n);
  return {mx, 1.0 / sumLanes(v, n)};
}
inline void softmaxRowScale(float *v, int64_t n, double inv) {
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(v[i] * inv);
}
inline void softmaxRow(float *v, int64_t n) { softmaxRowScale(v, n, softmaxRowExps(v, n).inv); }

/// Sum of (v[i] - mean)^2 in double, in sumLanes' order.
inline double sumSquaredDeviationsLanes(const float *v, int64_t n, double mean) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) {
      const double d = static_cast<double>(v[i + j]) - mean;
      acc[j] += d * d;
    }
  for (int j = 0; i < n; ++i, ++j) {
    const double d = static_cast<double>(v[i]) - mean;
    acc[j] += d * d;
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/// Puts OpenBLAS in single-threaded mode once: the kernels split the work
/// themselves and call sgemm from their workers.
void singleThreadedBlas();

}  // namespace shardc::runtime::cpu
