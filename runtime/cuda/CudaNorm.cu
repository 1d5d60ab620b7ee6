// batchNorm and groupNorm (CudaFamilies.h), runtime/cpu/NormKernels.cpp's
// formulas:
//   batch_norm (eval): per channel, in double, alpha = w / sqrt(var + eps),
//     beta = b - mean * alpha; y = x * alpha + beta in float32. Each thread
//     folds its element's channel itself (a few double operations instead
//     of a scratch table and a second launch); statistics and affine
//     parameters may have their own float storage, as on the CPU.
//   group_norm: one block per (sample, group): mean, then biased variance
//     over the group's C/G * inner elements in double (a fixed tree,
//     blockSum), y = x * scale + shift with scale = rstd * w[c] and
//     shift = b[c] - mean * rstd * w[c] folded in double.
#include "runtime/cuda/CudaFamilies.h"

#include "runtime/ForwardChecks.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/DeviceStorage.cuh"

#include <climits>
#include <cmath>

namespace shardc::runtime::cuda {
using plan::DType;

namespace {
using namespace dev;

/// A per-channel parameter: its data and storage, or absent (nullptr).
struct Channel {
  const void *data = nullptr;
  DType dtype = DType::F32;
  __device__ double at(int64_t c, double none) const {
    return data ? loadAnyFloat(dtype, data, c) : none;
  }
};

Channel channelOf(const KTensor *t) { return t ? Channel{t->data, t->dtype} : Channel{}; }

int64_t innerSize(const Shape &x) {
  int64_t inner = 1;
  for (size_t d = 2; d < x.size(); ++d) inner *= x[d];
  return inner;
}


template <typename T>
__global__ void batchNormKernel(const typename T::S *x, Channel mean, Channel var, Channel w,
                                Channel b, double eps, typename T::S *y, int64_t C,
                                int64_t inner, int64_t count) {
  SHARDC_GRID_LOOP(i, count) {
    const int64_t c = (i / inner) % C;
    const double a = w.at(c, 1) / sqrt(var.at(c, 0) + eps);
    const float alpha = static_cast<float>(a);
    const float beta = static_cast<float>(b.at(c, 0) - mean.at(c, 0) * a);
    y[i] = T::store(T::load(x[i]) * alpha + beta);
  }
}

template <typename T>
__global__ void groupNormKernel(const typename T::S *x, Channel w, Channel b, double eps,
                                typename T::S *y, int64_t groups, int64_t perGroup,
                                int64_t inner) {
  __shared__ double shared[kThreads];
  const int64_t task = blockIdx.x, count = perGroup * inner;
  const int64_t base = task * count, c0 = (task % groups) * perGroup;
  double sum = 0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) sum += T::load(x[base + i]);
  const double mean = count ? blockSum(sum, shared) / static_cast<double>(count) : 0;
  double sq = 0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    const double d = T::load(x[base + i]) - mean;
    sq += d * d;
  }
  const double total = blockSum(sq, shared);
  const double rstd = 1.0 / sqrt((count ? total / static_cast<double>(count) : 0) + eps);
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    const int64_t c = c0 + i / inner;
    const double wc = w.at(c, 1);
    const float scale = static_cast<float>(rstd * wc);
    const float shift = static_cast<float>(b.at(c, 0) - mean * rstd * wc);
    y[base + i] = T::store(T::load(x[base + i]) * scale + shift);
  }
}

}  // namespace

void batchNorm(CudaDevice &device, const KTensor &x, const KTensor &mean, const KTensor &var,
               const KTensor *w, const KTensor *b, double eps, const KTensor &y) {
  const char *op = "batch_norm";
  checks::batchNorm(x, mean, var, w, b, y);
  const int64_t count = x.numel();
  if (count == 0) return;
  const int64_t C = x.shape[1], inner = innerSize(x.shape);
  device.makeCurrent();
  dispatchFloat(op, x.dtype, false, [&](auto tag) {
    using T = decltype(tag);
    batchNormKernel<T><<<gridFor(count), kThreads, 0, device.stream()>>>(
        static_cast<const typename T::S *>(x.data), channelOf(&mean), channelOf(&var),
        channelOf(w), channelOf(b), eps, static_cast<typename T::S *>(y.data), C, inner, count);
  });
  checkLaunch("batch_norm kernel launch");
}

void groupNorm(CudaDevice &device, const KTensor &x, int64_t groups, const KTensor *w,
               const KTensor *b, double eps, const KTensor &y) {
  const char *op = "group_norm";
  checks::groupNorm(x, groups, w, b, y);
  const int64_t N = x.shape[0], C = x.shape[1], inner = innerSize(x.shape);
  const int64_t tasks = N * groups;
  if (tasks == 0 || x.numel() == 0) return;
  if (tasks > INT_MAX) checks::fail(op, "more than 2^31 - 1 (sample, group) pairs");
  device.makeCurrent();
  dispatchFloat(op, x.dtype, false, [&](auto tag) {
    using T = decltype(tag);
    groupNormKernel<T><<<static_cast<unsigned>(tasks), kThreads, 0, device.stream()>>>(
        static_cast<const typename T::S *>(x.data), channelOf(w), channelOf(b), eps,
        static_cast<typename T::S *>(y.data), groups, C / groups, inner);
  });
  checkLaunch("group_norm kernel launch");
}

}  // namespace shardc::runtime::cuda
