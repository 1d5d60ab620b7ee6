// moe_experts (runtime/OpFamilies.h) on a CUDA device, the grouping of
// runtime/cpu/MoeKernels.cpp: the routing (index) is read on the host and
// checked there with the CPU's words, tokens are grouped by expert in
// token order, and each block of an expert's rows is two cuBLAS GEMMs
// (CUBLAS_COMPUTE_32F, float32 results) around the gate; token t's sum
// runs over its experts in ascending order, each product and sum rounded
// in float (__fmul_rn, __fadd_rn: never an fma), as on the CPU.
//
// Where the numbers differ from the CPU's: cuBLAS's summation order, CUDA's
// expf/erff/tanhf, and for bfloat16/float16 the gated activations, which
// are rounded to the storage dtype before the down GEMM (cuBLAS multiplies
// operands of one type; torch's eager bfloat16 rounds them too), where the
// CPU keeps them in float32. Within the backend suite's tolerances.
//
// Working memory is the op's workspace, moeExpertsWorkBytes (the memory
// model's), in the CPU's layout: per block of R = min(kMoeBlockRows, T k)
// rows the rows of x (here in the storage dtype, in the room of R x H
// floats), the float32 gate/up rows [R, 2I] (16-bit storage: the rounded
// gated values are packed into each row's up half once it is used), the
// float32 output rows [R, H]; then y's float32 accumulator unless y is
// float32. The block's token and slot lists are staged in the device's
// kernel scratch.
#include "runtime/cuda/CudaFamilies.h"

#include "runtime/ForwardChecks.h"
#include "runtime/RuntimeError.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/DeviceStorage.cuh"

#include <climits>
#include <string>
#include <utility>
#include <vector>

namespace shardc::runtime::cuda {
using plan::DType;

namespace {
using namespace dev;

/// xBlock[r, :] = x[tokens[r], :] (storage dtype, copied).
template <typename E>
__global__ void gatherRowsKernel(const E *x, const int64_t *tokens, E *xBlock, int64_t rows,
                                 int64_t H) {
  SHARDC_GRID_LOOP(i, rows * H) { xBlock[i] = x[tokens[i / H] * H + i % H]; }
}

__device__ float gateActivation(GateActivation act, float v) {
  switch (act) {
  case GateActivation::Silu: return v / (1.0f + expf(-v));
  case GateActivation::Gelu: return v * 0.5f * (1.0f + erff(v * 0.70710678118654752f));
  case GateActivation::GeluTanh: {
    const float inner = 0.7978845608028654f * (v + 0.044715f * v * v * v);
    return 0.5f * v * (1.0f + tanhf(inner));
  }
  case GateActivation::Relu: return v > 0.0f || v != v ? v : 0.0f;
  }
  return v;
}

/// h[r, i] = act(h[r, i]) * h[r, I + i], in place in the gate half.
__global__ void gateKernel(GateActivation act, float *h, int64_t rows, int64_t I) {
  SHARDC_GRID_LOOP(e, rows * I) {
    const int64_t r = e / I, i = e % I;
    h[r * 2 * I + i] = __fmul_rn(gateActivation(act, h[r * 2 * I + i]), h[r * 2 * I + I + i]);
  }
}

/// 16-bit storage: the gated row r, rounded, into the (dead) up half of
/// h's row r (I floats hold I 16-bit values): reads only gate halves,
/// writes only up halves.
template <typename T>
__global__ void packGatedKernel(float *h, int64_t rows, int64_t I) {
  SHARDC_GRID_LOOP(e, rows * I) {
    const int64_t r = e / I, i = e % I;
    auto *packed = reinterpret_cast<typename T::S *>(h + r * 2 * I + I);
    packed[i] = T::store(h[r * 2 * I + i]);
  }
}

/// acc[tokens[r], j] += weight(slots[r]) * yBlock[r, j], rows in order: one
/// thread per column, so a token routed twice to one expert adds in order.
__global__ void accumulateKernel(const float *yBlock, const int64_t *tokens,
                                 const int64_t *slots, DType weightType, const void *weights,
                                 float *acc, int64_t rows, int64_t H) {
  SHARDC_GRID_LOOP(j, H) {
    for (int64_t r = 0; r < rows; ++r) {
      const float w = static_cast<float>(loadAnyFloat(weightType, weights, slots[r]));
      float *dst = acc + tokens[r] * H + j;
      *dst = __fadd_rn(*dst, __fmul_rn(yBlock[r * H + j], w));
    }
  }
}

template <typename T>
__global__ void storeKernel(const float *acc, typename T::S *y, int64_t count) {
  SHARDC_GRID_LOOP(i, count) { y[i] = T::store(acc[i]); }
}

/// Row-major C[M, N] (float32, ldc N) = A[M, K] (lda) * B[N, K]^T, A and B
/// of `type`: cuBLAS's column-major C^T = B A^T.
void gemmNT(CudaDevice &device, cudaDataType_t type, int64_t M, int64_t N, int64_t K,
            const void *a, int64_t lda, const void *b, float *c) {
  if (M > INT_MAX || N > INT_MAX || K > INT_MAX || lda > INT_MAX)
    throw RuntimeError("moe_experts: a GEMM dimension exceeds 2^31 - 1");
  const float alpha = 1.0f, beta = 0.0f;
  checkCublas(cublasGemmEx(device.blas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N),
                           static_cast<int>(M), static_cast<int>(K), &alpha, b, type,
                           static_cast<int>(K), a, type, static_cast<int>(lda), &beta, c,
                           CUDA_R_32F, static_cast<int>(N), CUBLAS_COMPUTE_32F,
                           CUBLAS_GEMM_DEFAULT),
              "moe_experts: cublasGemmEx");
}

}  // namespace

void moeExperts(CudaDevice &device, const MoeParams &p, const KTensor &x, const KTensor &index,
                const KTensor &weights, const KTensor &gateUp, const KTensor &down,
                const KTensor &y, std::byte *workspace) {
  const char *op = "moe_experts";
  checks::moeExperts(x, index, weights, gateUp, down, y);
  const int64_t T = x.shape[0], H = x.shape[1], k = index.shape[1];
  const int64_t E = gateUp.shape[0], I = gateUp.shape[1] / 2;
  const bool f32 = x.dtype == DType::F32;
  const int64_t size = plan::dtypeSize(x.dtype);

  // The routing is data: read on the host, checked before any work, grouped
  // by expert in token order.
  std::vector<int64_t> ids(static_cast<size_t>(T * k));
  if (!ids.empty()) copyToHost(device, ids.data(), index.data, ids.size() * sizeof(int64_t));
  std::vector<std::vector<std::pair<int64_t, int64_t>>> routed(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t s = 0; s < k; ++s) {
      const int64_t e = ids[t * k + s];
      if (e < 0 || e >= E)
        checks::fail(op, "expert index " + std::to_string(e) + " of token " + std::to_string(t) +
                             " (slot " + std::to_string(s) + ") is out of range for " +
                             std::to_string(E) + " experts");
      routed[static_cast<size_t>(e)].push_back({t, t * k + s});
    }

  if (H == 0) return;  // y has no elements (the routing was still checked, as on the CPU)

  // The workspace's layout, the CPU's (file comment): R rows per block.
  const int64_t R = std::min(kMoeBlockRows, T * k);
  std::byte *xBlock = workspace;  // R x H of the storage dtype in R x H floats' room
  float *hBlock = reinterpret_cast<float *>(workspace + R * H * 4);
  float *yBlock = hBlock + R * 2 * I;
  float *acc = f32 ? static_cast<float *>(y.data) : yBlock + R * H;

  device.makeCurrent();
  if (T * H > 0)
    checkCuda(cudaMemsetAsync(acc, 0, static_cast<size_t>(T * H) * 4, device.stream()),
              "moe_experts: cudaMemsetAsync");
  // Each block's token and slot lists: staged in the kernel scratch, copied
  // on the stream (ordered after the previous block's kernels, which read
  // the same slots). One host array holds every block's lists (T k routed
  // rows in all, two int64 each) and lives until the final synchronize.
  auto *list = static_cast<int64_t *>(device.scratch(static_cast<size_t>(2 * R) * 8));
  std::vector<int64_t> hostLists(static_cast<size_t>(2 * T * k));
  int64_t *next = hostLists.data();
  const cudaDataType_t type = blasType(x.dtype);
  for (int64_t e = 0; e < E; ++e) {
    const auto &rows = routed[static_cast<size_t>(e)];
    for (size_t first = 0; first < rows.size(); first += static_cast<size_t>(R)) {
      const int64_t n = std::min<int64_t>(R, static_cast<int64_t>(rows.size() - first));
      int64_t *host = next;
      next += 2 * n;
      for (int64_t r = 0; r < n; ++r) {
        host[r] = rows[first + r].first;
        host[n + r] = rows[first + r].second;
      }
      checkCuda(cudaMemcpyAsync(list, host, static_cast<size_t>(2 * n) * 8,
                                cudaMemcpyHostToDevice, device.stream()),
                "moe_experts: cudaMemcpyAsync");
      const int64_t *tokens = list, *slots = list + n;
      bySize(size, [&](auto *tag) {
        using S = std::remove_pointer_t<decltype(tag)>;
        gatherRowsKernel<S><<<gridFor(n * H), kThreads, 0, device.stream()>>>(
            static_cast<const S *>(x.data), tokens, reinterpret_cast<S *>(xBlock), n, H);
      });
      checkLaunch("moe_experts: row gather launch");
      if (I == 0) {  // no hidden units: each routed row adds weight x 0, as on the CPU
        checkCuda(cudaMemsetAsync(yBlock, 0, static_cast<size_t>(n * H) * 4, device.stream()),
                  "moe_experts: cudaMemsetAsync");
        accumulateKernel<<<gridFor(H), kThreads, 0, device.stream()>>>(
            yBlock, tokens, slots, weights.dtype, weights.data, acc, n, H);
        checkLaunch("moe_experts: accumulate launch");
        continue;
      }
      // [gate; up] = x gateUp[e]^T: 2I rows of H.
      gemmNT(device, type, n, 2 * I, H, xBlock, H,
             static_cast<const std::byte *>(gateUp.data) + e * 2 * I * H * size, hBlock);
      gateKernel<<<gridFor(n * I), kThreads, 0, device.stream()>>>(p.activation, hBlock, n, I);
      checkLaunch("moe_experts: gate launch");
      if (!f32)
        dispatchFloat(op, x.dtype, false, [&](auto tag) {
          packGatedKernel<decltype(tag)><<<gridFor(n * I), kThreads, 0, device.stream()>>>(
              hBlock, n, I);
        });
      checkLaunch("moe_experts: gated rows launch");
      // y = gated down[e]^T: H rows of I. The gated rows: h's gate halves
      // (float32, row stride 2I floats) or its packed up halves (16-bit,
      // row stride 8I bytes = 4I elements).
      gemmNT(device, type, n, H, I,
             f32 ? static_cast<const void *>(hBlock) : static_cast<const void *>(hBlock + I),
             f32 ? 2 * I : 4 * I, static_cast<const std::byte *>(down.data) + e * H * I * size,
             yBlock);
      accumulateKernel<<<gridFor(H), kThreads, 0, device.stream()>>>(
          yBlock, tokens, slots, weights.dtype, weights.data, acc, n, H);
      checkLaunch("moe_experts: accumulate launch");
    }
  }
  if (!f32 && T * H > 0)
    dispatchFloat(op, y.dtype, false, [&](auto tag) {
      using Tag = decltype(tag);
      storeKernel<Tag><<<gridFor(T * H), kThreads, 0, device.stream()>>>(
          acc, static_cast<typename Tag::S *>(y.data), T * H);
    });
  checkLaunch("moe_experts: store launch");
  device.synchronize("moe_experts");
}

}  // namespace shardc::runtime::cuda
