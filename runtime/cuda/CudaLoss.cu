// crossEntropy (CudaForward.h): runtime/ForwardKernels.cpp's
// crossEntropyKernel on the device. A block per row computes
// max + log(sum exp(x - max)) - x[t] in double (the CPU's formula; the max
// keeps std::max's NaN rule: a NaN logit is skipped by the max and makes
// the sum NaN), the threads striding the classes so a row is read
// coalesced, and writes (loss, 1) to its slot in the kernel scratch, (0, 0)
// for an ignored row. Why not one block for all rows, as first written: a
// thread per row read GPT-2's 50257 logits per row with scattered loads on
// one SM. The rows go through the scratch in chunks; a second kernel adds
// each chunk's slots through a fixed tree (blockSum) to a running total, so
// the result is deterministic, and the mean is rounded to the loss dtype
// once. A target out of range (and not ignore_index) is reported as the
// CPU reports it: the first such index, after the kernels (the host waits
// for that index, and for the target when there is one).
#include "runtime/cuda/CudaForward.h"

#include "runtime/ForwardChecks.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/DeviceStorage.cuh"

#include <algorithm>
#include <cmath>
#include <string>

namespace shardc::runtime::cuda {
using plan::DType;

namespace {
using namespace dev;

/// The scratch's layout: the first bad row, the running (total, counted),
/// then one (loss, counted) slot per row of a chunk.
constexpr size_t kRunningOffset = 16, kRowsOffset = 64;
constexpr int64_t kChunkRows =
    static_cast<int64_t>((CudaDevice::kMaxScratchBytes - kRowsOffset) / sizeof(double2));

__global__ void crossEntropyRowsKernel(const void *logits, DType dtype, const int64_t *targets,
                                       int64_t ignoreIndex, int64_t first, int64_t C,
                                       double2 *slots, unsigned long long *firstBad) {
  __shared__ double shared[kThreads];
  const int64_t n = first + blockIdx.x;
  const int64_t target = targets[n];
  if (target == ignoreIndex || target < 0 || target >= C) {  // the same for the whole block
    if (threadIdx.x != 0) return;
    slots[blockIdx.x] = make_double2(0, 0);
    if (target != ignoreIndex) atomicMin(firstBad, static_cast<unsigned long long>(n));
    return;
  }
  const int64_t row = n * C;
  double mx = -INFINITY;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const double v = loadAnyFloat(dtype, logits, row + c);
    mx = mx < v ? v : mx;  // std::max(mx, v): a NaN never enters
  }
  shared[threadIdx.x] = mx;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) {
      const double a = shared[threadIdx.x], b = shared[threadIdx.x + width];
      shared[threadIdx.x] = a < b ? b : a;
    }
    __syncthreads();
  }
  mx = shared[0];
  __syncthreads();
  double sum = 0;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
    sum += exp(loadAnyFloat(dtype, logits, row + c) - mx);
  sum = blockSum(sum, shared);
  if (threadIdx.x == 0)
    slots[blockIdx.x] = make_double2(mx + log(sum) - loadAnyFloat(dtype, logits, row + target), 1);
}

/// Adds a chunk's slots to the running (total, counted); with `last`, also
/// writes the mean in the loss dtype.
__global__ void crossEntropySumKernel(const double2 *slots, int64_t count, double2 *running,
                                      bool last, void *loss, DType lossType) {
  __shared__ double shared[kThreads];
  double total = 0, counted = 0;
  for (int64_t r = threadIdx.x; r < count; r += blockDim.x) {
    total += slots[r].x;
    counted += slots[r].y;
  }
  total = blockSum(total, shared);
  counted = blockSum(counted, shared);
  if (threadIdx.x != 0) return;
  running->x += total;
  running->y += counted;
  if (!last) return;
  const float value = static_cast<float>(running->x / running->y);
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
  auto *scratch = static_cast<char *>(device.scratch(CudaDevice::kMaxScratchBytes));
  auto *firstBad = reinterpret_cast<unsigned long long *>(scratch);
  auto *running = reinterpret_cast<double2 *>(scratch + kRunningOffset);
  auto *slots = reinterpret_cast<double2 *>(scratch + kRowsOffset);
  device.makeCurrent();
  // 0xff.. for "no bad row", then (0, 0) for the running total.
  checkCuda(cudaMemsetAsync(scratch, 0xff, 8, device.stream()), "cross_entropy: cudaMemsetAsync");
  checkCuda(cudaMemsetAsync(running, 0, sizeof(double2), device.stream()),
            "cross_entropy: cudaMemsetAsync");
  const auto *targetData = static_cast<const int64_t *>(targets.data);
  int64_t first = 0;
  do {  // at least once: N = 0 still writes the mean (0 / 0, NaN as on the CPU)
    const int64_t rows = std::min<int64_t>(kChunkRows, N - first);
    if (rows > 0)
      crossEntropyRowsKernel<<<static_cast<unsigned>(rows), kThreads, 0, device.stream()>>>(
          logits.data, logits.dtype, targetData, ignoreIndex, first, C, slots, firstBad);
    first += rows;
    crossEntropySumKernel<<<1, kThreads, 0, device.stream()>>>(slots, rows, running, first == N,
                                                               loss.data, loss.dtype);
    checkLaunch("cross_entropy kernel launch");
  } while (first < N);
  unsigned long long bad = 0;
  copyToHost(device, &bad, firstBad, sizeof bad);
  if (bad == ~0ull) return;
  int64_t target = 0;
  copyToHost(device, &target, targetData + bad, sizeof target);
  checks::fail(op, "target " + std::to_string(target) + " at index " + std::to_string(bad) +
                       " is out of range for C = " + std::to_string(C) +
                   " classes and is not ignore_index (" + std::to_string(ignoreIndex) + ")");
}

}  // namespace shardc::runtime::cuda
