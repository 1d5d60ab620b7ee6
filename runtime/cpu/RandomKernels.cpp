// CPU kernel of the random family (runtime/OpFamilies.h): dropout. The keep
// mask is runtime/DropoutMask.h's, a pure function of the element's index in
// the whole tensor, so the work is cut into fixed chunks and neither the
// thread count nor the rank's rows change a bit.
#include "runtime/cpu/FamilyKernels.h"

#include "runtime/DropoutMask.h"
#include "runtime/ForwardChecks.h"
#include "runtime/HalfFloat.h"
#include "runtime/RuntimeError.h"
#include "runtime/cpu/KernelSupport.h"

#include <cmath>
#include <cstdint>
#include <string>

namespace shardc::runtime {
using plan::DType;

namespace {

constexpr int64_t kChunk = 1 << 14;  // a multiple of 4: chunks start on a Philox block

/// The step counter's value as the mask's counter word: a whole number in
/// [0, 2^32) (a float32 counts exactly to 2^24 steps).
uint32_t stepWord(const KTensor &step) {
  const float value = *static_cast<const float *>(step.data);
  if (!(value >= 0.0f) || value >= 4294967296.0f || value != std::floor(value))
    throw RuntimeError("dropout: the step counter holds " + std::to_string(value) +
                       ", not a whole number in [0, 2^32)");
  return static_cast<uint32_t>(value);
}

template <typename T, typename Load, typename Store>
void dropoutLoop(const DropoutParams &p, uint64_t seed, uint32_t step, uint64_t offset,
                 int64_t count, int threads, Load load, Store store) {
  const uint32_t threshold = dropout::keepThreshold(p.p);
  // torch's scale 1 / (1 - p) in the math type; p = 1 keeps nothing
  const T scale = p.p < 1.0 ? static_cast<T>(1.0 / (1.0 - p.p)) : T(0);
  cpu::parallelTasks((count + kChunk - 1) / kChunk, threads, count, [&](int64_t task) {
    const int64_t begin = task * kChunk, end = std::min(count, begin + kChunk);
    uint64_t block = ~uint64_t{0};
    philox::Counter words{};
    for (int64_t i = begin; i < end; ++i) {
      const uint64_t g = offset + static_cast<uint64_t>(i);
      if (g / 4 != block) {
        block = g / 4;
        words = dropout::maskWords(seed, p.stream, step, block);
      }
      const bool kept = (words.v[g % 4] >> 8) >= threshold;
      store(i, kept ? load(i) * scale : T(0));
    }
  });
}

/// float32 and float64: stored as they are computed.
template <typename T>
void plainDropout(const DropoutParams &p, uint64_t seed, uint32_t step, uint64_t offset,
                  int64_t count, int threads, const KTensor &x, const KTensor &y) {
  const T *in = static_cast<const T *>(x.data);
  T *out = static_cast<T *>(y.data);
  dropoutLoop<T>(
      p, seed, step, offset, count, threads, [&](int64_t i) { return in[i]; },
      [&](int64_t i, T v) { out[i] = v; });
}

}  // namespace

void dropoutKernel(const DropoutParams &p, uint64_t seed, uint64_t offset, const KTensor &x,
                   const KTensor &step, const KTensor &y, int threads) {
  checks::dropout(p, x, step, y);
  const int64_t count = x.numel();
  if (count == 0) return;
  const uint32_t counter = stepWord(step);
  switch (x.dtype) {
  case DType::F64: return plainDropout<double>(p, seed, counter, offset, count, threads, x, y);
  case DType::F32: return plainDropout<float>(p, seed, counter, offset, count, threads, x, y);
  case DType::BF16:
  case DType::F16: {
    const bool bf16 = x.dtype == DType::BF16;
    const uint16_t *in = static_cast<const uint16_t *>(x.data);
    uint16_t *out = static_cast<uint16_t *>(y.data);
    dropoutLoop<float>(
        p, seed, counter, offset, count, threads,
        [&](int64_t i) { return bf16 ? bfloat16BitsToFloat(in[i]) : halfBitsToFloat(in[i]); },
        [&](int64_t i, float v) { out[i] = bf16 ? floatToBFloat16Bits(v) : floatToHalfBits(v); });
    return;
  }
  default: throw RuntimeError("dropout: x must be a float tensor");
  }
}

}  // namespace shardc::runtime
