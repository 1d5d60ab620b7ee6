// CPU kernels of the integer-value families (runtime/OpFamilies.h):
// comparisons, dtype casts and cumsum. Elementwise work is cut into fixed
// chunks and cumsum into independent lines along `dim`, so results do not
// depend on the thread count; each value is converted exactly as the
// family's comment says (torch's CPU conversions).
#include "runtime/cpu/FamilyKernels.h"

#include "runtime/ForwardChecks.h"
#include "runtime/HalfFloat.h"
#include "runtime/InitOps.h"
#include "runtime/ValueRules.h"
#include "runtime/cpu/KernelSupport.h"

#include <array>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

namespace shardc::runtime {
using plan::DType;

namespace {

constexpr int64_t kChunk = 1 << 14;

/// Runs body(i, offsets) for each output element i of `outShape` in
/// row-major order, offsets[k] the element of operand k (shapes[k], read
/// with broadcast strides); chunks of kChunk elements are the tasks. The
/// last dim is walked as a run with constant strides, the odometer carried
/// once per run (per element it cost more than where's own work).
template <size_t N, typename Body>
void forEachBroadcast(const Shape &outShape, const std::array<const Shape *, N> &shapes,
                      int threads, const Body &body) {
  const int64_t total = plan::numElements(outShape);
  const size_t rank = outShape.size();
  std::array<std::vector<int64_t>, N> strides;
  for (size_t k = 0; k < N; ++k) strides[k] = broadcastStrides(*shapes[k], rank);
  cpu::parallelTasks((total + kChunk - 1) / kChunk, threads, total, [&](int64_t task) {
    const int64_t begin = task * kChunk, end = std::min(total, begin + kChunk);
    std::vector<int64_t> index(rank, 0);
    std::array<int64_t, N> at{};
    int64_t rest = begin;
    for (size_t d = rank; d-- > 0;) {
      index[d] = rest % outShape[d];
      rest /= outShape[d];
      for (size_t k = 0; k < N; ++k) at[k] += index[d] * strides[k][d];
    }
    std::array<int64_t, N> step{};  // each operand's stride along the last dim
    for (size_t k = 0; k < N && rank > 0; ++k) step[k] = strides[k][rank - 1];
    for (int64_t i = begin; i < end;) {
      const int64_t run = rank > 0 ? std::min(end - i, outShape[rank - 1] - index[rank - 1]) : 1;
      for (int64_t j = 0; j < run; ++j) {
        body(i + j, at);
        for (size_t k = 0; k < N; ++k) at[k] += step[k];
      }
      i += run;
      if (rank == 0 || i >= end) break;
      // The run reached the end of the last dim: back to its row's start,
      // then carry into the outer dims.
      for (size_t k = 0; k < N; ++k) at[k] -= step[k] * outShape[rank - 1];
      index[rank - 1] = 0;
      for (size_t d = rank - 1; d-- > 0;) {
        for (size_t k = 0; k < N; ++k) at[k] += strides[k][d];
        if (++index[d] < outShape[d]) break;
        for (size_t k = 0; k < N; ++k) at[k] -= strides[k][d] * outShape[d];
        index[d] = 0;
      }
    }
  });
}

/// The scalar `value` as torch wraps it against a tensor of `dtype`: rounded
/// to that dtype (float32 and 16-bit floats through float, as c10 converts).
double valueInDType(DType dtype, double value) {
  alignas(8) unsigned char element[8];
  storeFromDouble(dtype, element, 0, value);
  return loadAsDouble(dtype, element, 0);
}

/// One element of x (any dtype) into element i of y (any dtype).
void castElement(DType from, const void *x, int64_t i, DType to, void *y) {
  if (from == DType::I64) {
    const int64_t v = static_cast<const int64_t *>(x)[i];
    switch (to) {
    case DType::I64: static_cast<int64_t *>(y)[i] = v; return;
    case DType::F64: static_cast<double *>(y)[i] = static_cast<double>(v); return;
    default:  // int64 -> float (one rounding), then to 16-bit storage as c10 does
      storeFromDouble(to, y, i, static_cast<double>(static_cast<float>(v)));
      return;
    }
  }
  const double v = loadAsDouble(from, x, i);  // exact: every float dtype widens to double
  if (to == DType::I64)
    static_cast<int64_t *>(y)[i] = values::truncateToInt64(v);
  else
    storeFromDouble(to, y, i, v);
}

/// The running sum of one line: n elements `stride` apart (negative for a
/// reverse scan), accumulated in Acc (torch's CPU accumulation type), each
/// result rounded once.
template <typename Acc>
void scanLine(DType dtype, const void *x, void *y, int64_t first, int64_t n, int64_t stride) {
  Acc acc = 0;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t at = first + j * stride;
    acc += static_cast<Acc>(loadAsDouble(dtype, x, at));
    storeFromDouble(dtype, y, at, static_cast<double>(acc));
  }
}

void scanLineInt64(const int64_t *x, int64_t *y, int64_t first, int64_t n, int64_t stride) {
  uint64_t acc = 0;  // unsigned: wraps as torch's int64 sum does, without UB
  for (int64_t j = 0; j < n; ++j) {
    acc += static_cast<uint64_t>(x[first + j * stride]);
    y[first + j * stride] = static_cast<int64_t>(acc);
  }
}

}  // namespace

void compareKernel(CompareOp op, const KTensor &a, const KTensor *b, double value,
                   const KTensor &y, int threads) {
  checks::compare(op, a, b, y);
  int64_t *out = static_cast<int64_t *>(y.data);
  if (y.numel() == 0) return;
  if (!b) {
    const int64_t total = a.numel();
    if (a.dtype == DType::I64 && values::isInt64Value(value)) {
      const int64_t *x = static_cast<const int64_t *>(a.data);
      const int64_t v = static_cast<int64_t>(value);
      cpu::parallelTasks((total + kChunk - 1) / kChunk, threads, total, [&](int64_t task) {
        for (int64_t i = task * kChunk, end = std::min(total, i + kChunk); i < end; ++i)
          out[i] = values::compare(op, x[i], v);
      });
      return;
    }
    // int64 against a fraction: both in float32, torch's promotion (its
    // default dtype); a float tensor against the value rounded to its dtype
    // (its own elements are exact as doubles already).
    const bool intAsFloat = a.dtype == DType::I64;
    const double v = valueInDType(intAsFloat ? DType::F32 : a.dtype, value);
    if (a.dtype == DType::F32) {
      // The same comparison in float (both sides widen to double exactly),
      // the op chosen once: the masks of activation gradients (hardswish's
      // three per layer) spent their time in the per-element dispatch.
      const float *x = static_cast<const float *>(a.data);
      const float bound = static_cast<float>(v);
      auto each = [&](auto constantOp) {
        cpu::parallelTasks((total + kChunk - 1) / kChunk, threads, total, [&](int64_t task) {
          for (int64_t i = task * kChunk, end = std::min(total, i + kChunk); i < end; ++i)
            out[i] = values::compare(decltype(constantOp)::value, x[i], bound);
        });
      };
      using C = CompareOp;
      switch (op) {
      case C::Eq: return each(std::integral_constant<C, C::Eq>{});
      case C::Ne: return each(std::integral_constant<C, C::Ne>{});
      case C::Lt: return each(std::integral_constant<C, C::Lt>{});
      case C::Le: return each(std::integral_constant<C, C::Le>{});
      case C::Gt: return each(std::integral_constant<C, C::Gt>{});
      case C::Ge: return each(std::integral_constant<C, C::Ge>{});
      }
    }
    cpu::parallelTasks((total + kChunk - 1) / kChunk, threads, total, [&](int64_t task) {
      for (int64_t i = task * kChunk, end = std::min(total, i + kChunk); i < end; ++i) {
        const double x = loadAsDouble(a.dtype, a.data, i);
        out[i] = values::compare(op, intAsFloat ? valueInDType(DType::F32, x) : x, v);
      }
    });
    return;
  }
  if (a.dtype == DType::I64) {
    const int64_t *x = static_cast<const int64_t *>(a.data);
    const int64_t *z = static_cast<const int64_t *>(b->data);
    forEachBroadcast<2>(y.shape, {&a.shape, &b->shape}, threads,
                        [&](int64_t i, const std::array<int64_t, 2> &at) {
                          out[i] = values::compare(op, x[at[0]], z[at[1]]);
                        });
    return;
  }
  forEachBroadcast<2>(y.shape, {&a.shape, &b->shape}, threads,
                      [&](int64_t i, const std::array<int64_t, 2> &at) {
                        out[i] = values::compare(op, loadAsDouble(a.dtype, a.data, at[0]),
                                              loadAsDouble(b->dtype, b->data, at[1]));
                      });
}

void whereKernel(const KTensor &cond, const KTensor &a, const KTensor &b, const KTensor &y,
                 int threads) {
  checks::where(cond, a, b, y);
  if (y.numel() == 0) return;
  const int64_t *c = static_cast<const int64_t *>(cond.data);
  // Elements moved as unsigned integers of their size: bits, not values.
  auto select = [&](auto bits) {
    using T = decltype(bits);
    const T *pa = static_cast<const T *>(a.data), *pb = static_cast<const T *>(b.data);
    T *out = static_cast<T *>(y.data);
    forEachBroadcast<3>(y.shape, {&cond.shape, &a.shape, &b.shape}, threads,
                        [&](int64_t i, const std::array<int64_t, 3> &at) {
                          out[i] = c[at[0]] != 0 ? pa[at[1]] : pb[at[2]];
                        });
  };
  switch (plan::dtypeSize(y.dtype)) {
  case 2: return select(uint16_t{});
  case 4: return select(uint32_t{});
  default: return select(uint64_t{});
  }
}

/// float32 <-> bfloat16 / float16 in plain loops the compiler vectorizes
/// (master weights convert every parameter read this way): the same bits as
/// castElement, whose double in between is exact for these. False for
/// other pairs.
static bool castBetweenFloat32And16(const KTensor &x, const KTensor &y, int64_t total,
                                    int threads) {
  auto run = [&](auto convert) {
    cpu::parallelTasks((total + kChunk - 1) / kChunk, threads, total, [&](int64_t task) {
      convert(task * kChunk, std::min(total, task * kChunk + kChunk));
    });
    return true;
  };
  const float *f32In = static_cast<const float *>(x.data);
  const uint16_t *u16In = static_cast<const uint16_t *>(x.data);
  float *f32Out = static_cast<float *>(y.data);
  uint16_t *u16Out = static_cast<uint16_t *>(y.data);
  if (x.dtype == DType::F32 && y.dtype == DType::BF16)
    return run([&](int64_t i, int64_t end) {
      for (; i < end; ++i) u16Out[i] = floatToBFloat16Bits(f32In[i]);
    });
  if (x.dtype == DType::BF16 && y.dtype == DType::F32)
    return run([&](int64_t i, int64_t end) {
      for (; i < end; ++i) f32Out[i] = bfloat16BitsToFloat(u16In[i]);
    });
  if (x.dtype == DType::F32 && y.dtype == DType::F16)
    return run([&](int64_t i, int64_t end) {
      for (; i < end; ++i) u16Out[i] = floatToHalfBits(f32In[i]);
    });
  if (x.dtype == DType::F16 && y.dtype == DType::F32)
    return run([&](int64_t i, int64_t end) {
      for (; i < end; ++i) f32Out[i] = halfBitsToFloat(u16In[i]);
    });
  return false;
}

void castKernel(const KTensor &x, const KTensor &y, int threads) {
  checks::cast(x, y);
  const int64_t total = x.numel();
  if (x.dtype == y.dtype) {
    if (total > 0) std::memcpy(y.data, x.data, static_cast<size_t>(total * plan::dtypeSize(x.dtype)));
    return;
  }
  if (x.dtype == DType::I64 && y.dtype == DType::F32) {
    // castElement's int64 -> float (one rounding) without its per-element
    // dispatch: comparison masks cast for the arithmetic of a gradient.
    const int64_t *from = static_cast<const int64_t *>(x.data);
    float *to = static_cast<float *>(y.data);
    cpu::parallelTasks((total + kChunk - 1) / kChunk, threads, total, [&](int64_t task) {
      for (int64_t i = task * kChunk, end = std::min(total, i + kChunk); i < end; ++i)
        to[i] = static_cast<float>(from[i]);
    });
    return;
  }
  if (castBetweenFloat32And16(x, y, total, threads)) return;
  cpu::parallelTasks((total + kChunk - 1) / kChunk, threads, total, [&](int64_t task) {
    for (int64_t i = task * kChunk, end = std::min(total, i + kChunk); i < end; ++i)
      castElement(x.dtype, x.data, i, y.dtype, y.data);
  });
}

void cumsumKernel(const ScanParams &p, const KTensor &x, const KTensor &y, int threads) {
  checks::cumsum(p, x, y);
  if (x.numel() == 0) return;
  const values::ScanLines lines = values::scanLines(x.shape, p.dim, p.reverse);
  const int64_t n = lines.n, step = lines.step();
  cpu::parallelTasks(lines.count(), threads, x.numel(), [&](int64_t line) {
    const int64_t first = lines.start(line);
    switch (x.dtype) {
    case DType::I64:
      return scanLineInt64(static_cast<const int64_t *>(x.data), static_cast<int64_t *>(y.data),
                           first, n, step);
    case DType::F32:
    case DType::F64: return scanLine<double>(x.dtype, x.data, y.data, first, n, step);
    case DType::BF16:
    case DType::F16: return scanLine<float>(x.dtype, x.data, y.data, first, n, step);
    }
  });
}

}  // namespace shardc::runtime
