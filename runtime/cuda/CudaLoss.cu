// crossEntropy (CudaForward.h): runtime/ForwardKernels.cpp's
// crossEntropyKernel on the device. One block: each thread takes rows
// n = tid, tid + kThreads, ... and adds max + log(sum exp(x - max)) - x[t]
// in double (the CPU's formula; the row max keeps std::max's NaN rule: a
// NaN logit is skipped by the max and makes the sum NaN); the per-thread
// totals and counts meet in a fixed tree (blockSum), so the result is
// deterministic; the mean is rounded to the loss dtype once. A target out
// of range (and not ignore_index) is reported as the CPU reports it: the
// first such index, after the kernel (the host waits for two words).
#include "runtime/cuda/CudaForward.h"

#include "runtime/ForwardChecks.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/DeviceStorage.cuh"

#include <cmath>
#include <string>

namespace shardc::runtime::cuda {
using plan::DType;

namespace {
using namespace dev;

__global__ void crossEntropyKernel(const void *logits, DType dtype, const int64_t *targets,
                                   int64_t ignoreIndex, int64_t N, int64_t C, void *loss,
                                   DType lossType, unsigned long long *firstBad) {
  __shared__ double shared[kThreads];
  double total = 0, counted = 0;
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x) {
    const int64_t t = targets[n];
    if (t == ignoreIndex) continue;
    if (t < 0 || t >= C) {
      atomicMin(firstBad, static_cast<unsigned long long>(n));
      continue;
    }
    double mx = -INFINITY;
    for (int64_t c = 0; c < C; ++c) {
      const double v = loadAnyFloat(dtype, logits, n * C + c);
      mx = mx < v ? v : mx;  // std::max(mx, v)
    }
    double sum = 0;
    for (int64_t c = 0; c < C; ++c) sum += exp(loadAnyFloat(dtype, logits, n * C + c) - mx);
    total += mx + log(sum) - loadAnyFloat(dtype, logits, n * C + t);
    counted += 1;
  }
  total = blockSum(total, shared);
  counted = blockSum(counted, shared);
  if (threadIdx.x != 0) return;
  const float value = static_cast<float>(total / counted);
  switch (lossType) {
  case DType::BF16: *static_cast<uint16_t *>(loss) = floatToBFloat16BitsHD(value); break;
  case DType::F16: *static_cast<uint16_t *>(loss) = floatToHalfBitsHD(value); break;
  default: *static_cast<float *>(loss) = value; break;
  }
}

}  // namespace

void crossEntropy(CudaDevice &device, const KTensor &logits, const KTensor &targets,
                  int64_t ignoreIndex, const KTensor &loss) {
  const char *op = "cross_entropy";
  checks::crossEntropy(logits, targets, loss);
  const int64_t N = logits.shape[0], C = logits.shape[1];
  auto *firstBad = static_cast<unsigned long long *>(device.scratch(8));
  device.makeCurrent();
  checkCuda(cudaMemsetAsync(firstBad, 0xff, 8, device.stream()), "cross_entropy: cudaMemsetAsync");
  crossEntropyKernel<<<1, kThreads, 0, device.stream()>>>(logits.data, logits.dtype,
                                                           static_cast<const int64_t *>(targets.data),
                                                           ignoreIndex, N, C, loss.data,
                                                           loss.dtype, firstBad);
  checkLaunch("cross_entropy kernel launch");
  unsigned long long bad = 0;
  copyToHost(device, &bad, firstBad, sizeof bad);
  if (bad == ~0ull) return;
  int64_t target = 0;
  copyToHost(device, &target, static_cast<const int64_t *>(targets.data) + bad, sizeof target);
  checks::fail(op, "target " + std::to_string(target) + " at index " + std::to_string(bad) +
                       " is out of range for C = " + std::to_string(C) + " classes");
}

}  // namespace shardc::runtime::cuda
