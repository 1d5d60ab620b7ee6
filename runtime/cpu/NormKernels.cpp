// batchNormKernel and groupNormKernel (runtime/cpu/FamilyKernels.h).
//   batch_norm (eval): per channel, in double, alpha = w / sqrt(var + eps)
//     and beta = b - mean * alpha (torch's CPU kernel folds them the same
//     way); y = x * alpha + beta in float32. Statistics and affine
//     parameters may have their own float storage (float32 running stats
//     beside a bfloat16 model, as torch's autocast leaves them).
//   group_norm: per (sample, group), mean and biased variance over the
//     group's C/G * inner elements in double (two passes; chunks of 4096 in
//     eight partial sums, cpu::sumLanes), y = (x - mean) *
//     rstd * w[c] + b[c].
// One task per (sample, channel) or (sample, group): no task depends on
// another sample, nor on the split.
#include "runtime/cpu/FamilyKernels.h"

#include "runtime/ForwardChecks.h"
#include "runtime/cpu/KernelSupport.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace shardc::runtime {
using plan::DType;

namespace {

constexpr int64_t kChunk = 4096;  // floats converted at a time

/// Element count of the dims after the channel dim.
int64_t innerSize(const Shape &x) {
  int64_t inner = 1;
  for (size_t d = 2; d < x.size(); ++d) inner *= x[d];
  return inner;
}

/// A per-channel vector (any float storage) as doubles, or `fill` when absent.
std::vector<double> channelValues(const KTensor *t, int64_t C, double fill) {
  std::vector<double> v(static_cast<size_t>(C), fill);
  if (!t) return v;
  std::vector<float> f(static_cast<size_t>(C));
  cpu::loadFloats(t->dtype, t->data, 0, C, f.data());
  for (int64_t c = 0; c < C; ++c) v[c] = f[c];
  return v;
}


}  // namespace

void batchNormKernel(const KTensor &x, const KTensor &mean, const KTensor &var,
                     const KTensor *w, const KTensor *b, double eps, const KTensor &y,
                     int threads) {
  checks::batchNorm(x, mean, var, w, b, y);
  const int64_t N = x.shape[0], C = x.shape[1], inner = innerSize(x.shape);
  const std::vector<double> m = channelValues(&mean, C, 0), v = channelValues(&var, C, 0),
                            wv = channelValues(w, C, 1), bv = channelValues(b, C, 0);
  std::vector<float> alpha(static_cast<size_t>(C)), beta(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    const double a = wv[c] / std::sqrt(v[c] + eps);
    alpha[c] = static_cast<float>(a);
    beta[c] = static_cast<float>(bv[c] - m[c] * a);
  }
  // Tasks of whole (sample, channel) planes, enough of them for kChunk
  // elements: a token layout's [T, C] (LeViT's linear + batch norm) has
  // planes of one element, and a task per element cost 30 ns each.
  const int64_t planes = N * C;
  const int64_t perTask = std::max<int64_t>(1, kChunk / std::max<int64_t>(inner, 1));
  const bool f32 = x.dtype == DType::F32 && y.dtype == DType::F32;
  cpu::parallelTasks((planes + perTask - 1) / perTask, threads, x.numel() * 2, [&](int64_t task) {
    thread_local std::vector<float> buf;
    if (!f32) buf.resize(static_cast<size_t>(std::min(inner, kChunk)));
    for (int64_t plane = task * perTask, last = std::min(planes, plane + perTask); plane < last;
         ++plane) {
      const int64_t c = plane % C, base = plane * inner;
      if (f32) {  // in place of the copies: the same float arithmetic
        const float *in = static_cast<const float *>(x.data) + base;
        float *out = static_cast<float *>(y.data) + base;
        for (int64_t i = 0; i < inner; ++i) out[i] = in[i] * alpha[c] + beta[c];
        continue;
      }
      for (int64_t i0 = 0; i0 < inner; i0 += kChunk) {
        const int64_t n = std::min(kChunk, inner - i0);
        cpu::loadFloats(x.dtype, x.data, base + i0, n, buf.data());
        for (int64_t i = 0; i < n; ++i) buf[i] = buf[i] * alpha[c] + beta[c];
        cpu::storeFloats(y.dtype, buf.data(), n, y.data, base + i0);
      }
    }
  });
}

void groupNormKernel(const KTensor &x, int64_t groups, const KTensor *w, const KTensor *b,
                     double eps, const KTensor &y, int threads) {
  checks::groupNorm(x, groups, w, b, y);
  const int64_t N = x.shape[0], C = x.shape[1], inner = innerSize(x.shape);
  const int64_t perGroup = C / groups, count = perGroup * inner;
  const std::vector<double> wv = channelValues(w, C, 1), bv = channelValues(b, C, 0);
  cpu::parallelTasks(N * groups, threads, x.numel() * 4, [&](int64_t task) {
    thread_local std::vector<float> buf;
    buf.resize(static_cast<size_t>(std::min(std::max<int64_t>(count, 1), kChunk)));
    const int64_t base = task * count, c0 = (task % groups) * perGroup;
    double sum = 0;
    for (int64_t i0 = 0; i0 < count; i0 += kChunk) {
      const int64_t n = std::min(kChunk, count - i0);
      cpu::loadFloats(x.dtype, x.data, base + i0, n, buf.data());
      sum += cpu::sumLanes(buf.data(), n);
    }
    const double mean = count ? sum / static_cast<double>(count) : 0;
    double sq = 0;
    for (int64_t i0 = 0; i0 < count; i0 += kChunk) {
      const int64_t n = std::min(kChunk, count - i0);
      cpu::loadFloats(x.dtype, x.data, base + i0, n, buf.data());
      sq += cpu::sumSquaredDeviationsLanes(buf.data(), n, mean);
    }
    const double rstd = 1.0 / std::sqrt((count ? sq / static_cast<double>(count) : 0) + eps);
    // Per channel of the group: y = x * scale + shift, folded in double.
    for (int64_t c = 0; c < perGroup; ++c) {
      const float scale = static_cast<float>(rstd * wv[c0 + c]);
      const float shift = static_cast<float>(bv[c0 + c] - mean * rstd * wv[c0 + c]);
      for (int64_t i0 = 0; i0 < inner; i0 += kChunk) {
        const int64_t n = std::min(kChunk, inner - i0), at = base + c * inner + i0;
        cpu::loadFloats(x.dtype, x.data, at, n, buf.data());
        for (int64_t i = 0; i < n; ++i) buf[i] = buf[i] * scale + shift;
        cpu::storeFloats(y.dtype, buf.data(), n, y.data, at);
      }
    }
  });
}

}  // namespace shardc::runtime
