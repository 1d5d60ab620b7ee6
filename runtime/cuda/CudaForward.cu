#include "runtime/cuda/CudaForward.h"

#include "runtime/ForwardChecks.h"

#include "runtime/RopeFrequencies.h"
#include "runtime/RuntimeError.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/DeviceFloat.h"
#include "runtime/cuda/DeviceStorage.cuh"

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>

namespace shardc::runtime::cuda {
using plan::DType;

namespace {

using namespace dev;  // storage types, dispatchFloat, kThreads (DeviceStorage.cuh)

// Shape and dtype rules are the backends' shared ones (ForwardChecks.h);
// only this backend's own limits (rank <= kMaxRank, 2^31 grid rows, sdpa
// keys) are checked here.
using checks::fail;

// ---- elementwise ----------------------------------------------------------

template <typename T>
__global__ void binaryKernel(BinaryOp op, Broadcast bc, const typename T::S *a,
                             const typename T::S *b, typename T::S *out, int64_t count) {
  SHARDC_GRID_LOOP(i, count) {
    int64_t ai, bi;
    bc.offsets(i, ai, bi);
    const typename T::C x = T::load(a[ai]), y = T::load(b[bi]);
    typename T::C r;
    switch (op) {
    case BinaryOp::Add: r = x + y; break;
    case BinaryOp::Sub: r = x - y; break;
    case BinaryOp::Mul: r = x * y; break;
    default: r = x / y; break;
    }
    out[i] = T::store(r);
  }
}

template <typename T>
__global__ void activationKernel(Activation kind, const typename T::S *x, typename T::S *y,
                                 int64_t count) {
  constexpr float kSqrtHalf = 0.70710678118654752440f;
  constexpr float kBeta = 0.79788456080286535588f;
  SHARDC_GRID_LOOP(i, count) {
    const float v = T::load(x[i]);
    float r;
    switch (kind) {
    case Activation::GeluErf: r = v * 0.5f * (1.0f + erff(v * kSqrtHalf)); break;
    case Activation::GeluTanh: {
      const float inner = kBeta * (v + 0.044715f * v * v * v);
      r = 0.5f * v * (1.0f + tanhf(inner));
      break;
    }
    case Activation::Silu: r = v / (1.0f + expf(-v)); break;
    default: r = (v > 0.0f || v != v) ? v : 0.0f; break;
    }
    y[i] = T::store(r);
  }
}

// ---- reductions over rows ---------------------------------------------------

__device__ float blockMax(float value, float *shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) shared[threadIdx.x] = maxPropagatingNaN(shared[threadIdx.x], shared[threadIdx.x + width]);
    __syncthreads();
  }
  const float total = shared[0];
  __syncthreads();
  return total;
}

template <typename T>
__global__ void layerNormKernel(const typename T::S *x, const typename T::S *w,
                                const typename T::S *b, double eps, typename T::S *y,
                                int64_t D) {
  __shared__ double shared[kThreads];
  const typename T::S *row = x + blockIdx.x * D;
  typename T::S *out = y + blockIdx.x * D;
  double sum = 0;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) sum += T::load(row[i]);
  const double mean = blockSum(sum, shared) / static_cast<double>(D);
  double sq = 0;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    const double d = T::load(row[i]) - mean;
    sq += d * d;
  }
  const double rstd = 1.0 / sqrt(blockSum(sq, shared) / static_cast<double>(D) + eps);
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    float n = static_cast<float>((T::load(row[i]) - mean) * rstd);
    if (w) n *= T::load(w[i]);
    if (b) n += T::load(b[i]);
    out[i] = T::store(n);
  }
}

template <typename T>
__global__ void rmsNormKernel(const typename T::S *x, const typename T::S *w, double eps,
                              typename T::S *y, int64_t D) {
  __shared__ double shared[kThreads];
  const typename T::S *row = x + blockIdx.x * D;
  typename T::S *out = y + blockIdx.x * D;
  double sq = 0;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    const double v = T::load(row[i]);
    sq += v * v;
  }
  const float rstd = static_cast<float>(1.0 / sqrt(blockSum(sq, shared) / static_cast<double>(D) + eps));
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    float n = T::load(row[i]) * rstd;
    if (w) n *= T::load(w[i]);
    out[i] = T::store(n);
  }
}

/// One block per line of `L` elements spaced `inner` apart.
template <typename T>
__global__ void softmaxKernel(const typename T::S *x, typename T::S *y, int64_t L, int64_t inner) {
  __shared__ double sharedD[kThreads];
  __shared__ float sharedF[kThreads];
  const int64_t line = blockIdx.x, o = line / inner, in = line % inner;
  const int64_t base = o * L * inner + in;
  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < L; i += blockDim.x) mx = maxPropagatingNaN(mx, T::load(x[base + i * inner]));
  mx = blockMax(mx, sharedF);
  if (isinf(mx) && mx < 0) mx = 0;
  double sum = 0;
  for (int64_t i = threadIdx.x; i < L; i += blockDim.x) sum += expf(T::load(x[base + i * inner]) - mx);
  const double inv = 1.0 / blockSum(sum, sharedD);
  for (int64_t i = threadIdx.x; i < L; i += blockDim.x)
    y[base + i * inner] = T::store(static_cast<float>(expf(T::load(x[base + i * inner]) - mx) * inv));
}

/// One block per (b, h, t) query row; scores in dynamic shared memory.
///
/// Why warps: a key's dot product is one warp's work, lanes over d, so each
/// key row is read in coalesced pieces; with one thread per key the 32
/// lanes of a warp read 32 rows at once, a transaction per lane, and on
/// GPT-2's 1024 keys that was most of the kernel. The weighted sum of values
/// splits the keys into blockDim / Dv parts (lanes over d, coalesced rows of
/// v) summed in part order, so every thread has work when Dv is small (64
/// on GPT-2: three quarters of the block idled). Both orders differ from the
/// CPU's sequential sums only by float rounding (the backend suite's sdpa
/// tolerance).
/// The additive mask of an sdpa by value: its elements and strides over
/// the scores [B, H, T, S] (0 where it broadcasts); data null without one.
template <typename Storage>
struct SdpaMask {
  const Storage *data;
  int64_t H;
  int64_t stride[4];
};

/// The mask is added to each scaled score in float, as on the CPU; a row
/// whose every score is -inf gives zeros (torch's safe softmax).
template <typename T>
__global__ void sdpaKernel(const typename T::S *q, const typename T::S *k, const typename T::S *v,
                           SdpaMask<typename T::S> mask, typename T::S *o, int64_t T_, int64_t S,
                           int64_t D, int64_t Dv, int64_t group, bool causal, float scale) {
  extern __shared__ float scores[];
  __shared__ double sharedD[kThreads];
  __shared__ float sharedF[kThreads];
  const int64_t row = blockIdx.x;        // (b*H + h) * T + t
  const int64_t bh = row / T_, t = row % T_;
  const typename T::S *qr = q + row * D;
  // Query heads h of a group read key / value head h / group (grouped-query
  // attention; group 1 without): (b*H + h) / group = b*Hkv + h / group.
  const typename T::S *kb = k + (bh / group) * S * D;
  const typename T::S *vb = v + (bh / group) * S * Dv;
  const int64_t visible = causal ? (t + 1 < S ? t + 1 : S) : S;
  constexpr int kWarp = 32;  // blockDim.x == kThreads, a multiple of the warp
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  // Every lane of a warp runs the same iterations: the shuffles need all 32.
  for (int64_t s = warp; s < visible; s += warps) {
    float dot = 0;
    for (int64_t d = lane; d < D; d += kWarp) dot += T::load(qr[d]) * T::load(kb[s * D + d]);
    // A butterfly: every lane ends with the same sum (each step adds the
    // same two values in either order).
    for (int offset = kWarp / 2; offset > 0; offset /= 2)
      dot += __shfl_xor_sync(0xffffffffu, dot, offset);
    if (lane == 0) {
      float score = dot * scale;
      if (mask.data)
        score += T::load(mask.data[(bh / mask.H) * mask.stride[0] + (bh % mask.H) * mask.stride[1] +
                                   t * mask.stride[2] + s * mask.stride[3]]);
      scores[s] = score;
    }
  }
  for (int64_t s = visible + threadIdx.x; s < S; s += blockDim.x) scores[s] = -INFINITY;
  __syncthreads();
  float mx = -INFINITY;
  for (int64_t s = threadIdx.x; s < S; s += blockDim.x) mx = maxPropagatingNaN(mx, scores[s]);
  mx = blockMax(mx, sharedF);
  if (isinf(mx) && mx < 0) {  // no key allowed: zeros (every thread saw the same mx)
    for (int64_t d = threadIdx.x; d < Dv; d += blockDim.x) o[row * Dv + d] = T::store(0.0f);
    return;
  }
  double sum = 0;
  for (int64_t s = threadIdx.x; s < S; s += blockDim.x) {
    const float e = expf(scores[s] - mx);
    scores[s] = e;
    sum += e;
  }
  const double inv = 1.0 / blockSum(sum, sharedD);  // also a barrier for scores
  if (Dv * 2 > blockDim.x) {  // too wide to split the keys: one thread per d
    for (int64_t d = threadIdx.x; d < Dv; d += blockDim.x) {
      float acc = 0;
      for (int64_t s = 0; s < visible; ++s) acc += scores[s] * T::load(vb[s * Dv + d]);
      o[row * Dv + d] = T::store(static_cast<float>(acc * inv));
    }
    return;
  }
  // parts * Dv <= blockDim.x: each thread's partial sum has a slot in
  // sharedF (free again: blockMax ended with a barrier).
  const int64_t parts = blockDim.x / Dv, part = threadIdx.x / Dv, d = threadIdx.x % Dv;
  float acc = 0;
  if (part < parts)
    for (int64_t s = part; s < visible; s += parts) acc += scores[s] * T::load(vb[s * Dv + d]);
  sharedF[threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x < Dv) {
    float total = 0;
    for (int64_t p = 0; p < parts; ++p) total += sharedF[p * Dv + threadIdx.x];
    o[row * Dv + threadIdx.x] = T::store(static_cast<float>(total * inv));
  }
}

/// rope's inverse frequencies by value (the kernel parameter space holds
/// them; no device buffer or copy): ropeInverseFrequencies on the host.
constexpr int64_t kMaxRopeHalf = 512;
struct RopeTable {
  float invFreq[kMaxRopeHalf];
};

template <typename T>
__global__ void ropeKernel(const typename T::S *x, typename T::S *y, int64_t rows, int64_t T_,
                           int64_t D, RopeTable table) {
  const int64_t half = D / 2, count = rows * half;
  SHARDC_GRID_LOOP(i, count) {
    const int64_t row = i / half, j = i % half, t = row % T_;
    const float angle = static_cast<float>(t) * table.invFreq[j];
    const float c = cosf(angle), s = sinf(angle);
    const float a = T::load(x[row * D + j]), b = T::load(x[row * D + j + half]);
    y[row * D + j] = T::store(a * c - b * s);
    y[row * D + j + half] = T::store(b * c + a * s);
  }
}

// ---- data movement (any dtype, by element size) ------------------------------

template <typename E>
__global__ void stridedCopyKernel(const E *x, E *y, Broadcast layout, int64_t offset,
                                  int64_t count) {
  SHARDC_GRID_LOOP(i, count) {
    int64_t rest = i, src = offset;
    for (int d = layout.rank - 1; d >= 0; --d) {
      src += (rest % layout.shape[d]) * layout.aStride[d];
      rest /= layout.shape[d];
    }
    y[i] = x[src];
  }
}

/// An id out of range records its flat index in `firstBad` (the smallest
/// wins), so the host reports the CPU's first bad id in the CPU's words.
/// Each id takes max(D, 1) threads' turns, so ids are checked even when
/// rows are empty (D = 0), as the CPU checks them.
template <typename E>
__global__ void embeddingKernel(const E *weight, const int64_t *ids, E *out, int64_t count,
                                int64_t V, int64_t D, unsigned long long *firstBad) {
  const int64_t perId = D > 0 ? D : 1;
  SHARDC_GRID_LOOP(i, count) {
    const int64_t n = i / perId, d = i % perId, id = ids[n];
    if (id < 0 || id >= V) {
      if (d == 0) atomicMin(firstBad, static_cast<unsigned long long>(n));
      continue;
    }
    if (D > 0) out[i] = weight[id * D + d];
  }
}

template <typename T>
__global__ void rowBroadcastKernel(const typename T::S *bias, typename T::S *y, int64_t rows,
                                   int64_t N) {
  SHARDC_GRID_LOOP(i, rows * N) { y[i] = bias[i % N]; }
}

/// Row-major C[M, N] (+)= op(A) op(B), A stored [M, K] or (aTransposed)
/// [K, M], B [K, N] or (bTransposed) [N, K]: column-major C^T = op(B)^T op(A)^T.
void gemm(CudaDevice &device, DType dtype, bool bTransposed, int64_t M, int64_t N, int64_t K,
          const void *a, const void *b, void *c, float beta, bool aTransposed = false) {
  if (M > INT_MAX || N > INT_MAX || K > INT_MAX)
    throw RuntimeError("cuBLAS GEMM: a dimension exceeds 2^31 - 1 (M = " + std::to_string(M) +
                       ", N = " + std::to_string(N) + ", K = " + std::to_string(K) + ")");
  if (M == 0 || N == 0) return;
  const float alpha = 1.0f;
  const cudaDataType_t type = blasType(dtype);
  checkCublas(cublasGemmEx(device.blas(), bTransposed ? CUBLAS_OP_T : CUBLAS_OP_N,
                           aTransposed ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(N),
                           static_cast<int>(M), static_cast<int>(K), &alpha, b, type,
                           static_cast<int>(bTransposed ? K : N), a, type,
                           static_cast<int>(aTransposed ? M : K), &beta, c, type,
                           static_cast<int>(N),
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              "cublasGemmEx");
}

void requireRank(const char *op, const KTensor &t, size_t rank, const char *what) {
  if (t.shape.size() > kMaxRank || t.shape.size() < rank)
    fail(op, std::string(what) + " has rank " + std::to_string(t.shape.size()) +
                 " (supported: " + std::to_string(rank) + ".." + std::to_string(kMaxRank) + ")");
}

}  // namespace

void binary(CudaDevice &device, BinaryOp op, const KTensor &a, const KTensor &b,
            const KTensor &out) {
  const char *name = binaryOpName(op);
  checks::binary(op, a, b, out);
  requireRank(name, out, 0, "output");
  const Broadcast bc = broadcastFor(out.shape, a.shape, b.shape);
  const int64_t count = out.numel();
  if (count == 0) return;
  device.makeCurrent();
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    using S = typename T::S;
    binaryKernel<T><<<gridFor(count), kThreads, 0, device.stream()>>>(
        op, bc, static_cast<const S *>(a.data), static_cast<const S *>(b.data),
        static_cast<S *>(out.data), count);
  };
  if (a.dtype == DType::I64)
    launch(I64{});
  else
    dispatchFloat(name, a.dtype, true, launch);
  checkLaunch(std::string(name) + " kernel launch");
}

void activation(CudaDevice &device, Activation kind, const KTensor &x, const KTensor &y) {
  const char *name = "activation";
  checks::activation(x, y);
  const int64_t count = x.numel();
  if (count == 0) return;
  device.makeCurrent();
  dispatchFloat(name, x.dtype, false, [&](auto tag) {
    using T = decltype(tag);
    using S = typename T::S;
    activationKernel<T><<<gridFor(count), kThreads, 0, device.stream()>>>(
        kind, static_cast<const S *>(x.data), static_cast<S *>(y.data), count);
  });
  checkLaunch("activation kernel launch");
}

namespace {
void normCommon(const char *op, const KTensor &x, const KTensor *w, const KTensor *b,
                const KTensor &y, int64_t &rows, int64_t &D) {
  const checks::NormDims dims = checks::norm(op, x, w, b, y);
  rows = dims.rows;
  D = dims.D;
  if (rows > INT_MAX) fail(op, "more than 2^31 - 1 rows");
}
}  // namespace

void layerNorm(CudaDevice &device, const KTensor &x, const KTensor *weight, const KTensor *bias,
               double eps, const KTensor &y) {
  int64_t rows = 0, D = 0;
  normCommon("layer_norm", x, weight, bias, y, rows, D);
  if (rows == 0) return;
  device.makeCurrent();
  dispatchFloat("layer_norm", x.dtype, false, [&](auto tag) {
    using T = decltype(tag);
    using S = typename T::S;
    layerNormKernel<T><<<static_cast<unsigned>(rows), kThreads, 0, device.stream()>>>(
        static_cast<const S *>(x.data), weight ? static_cast<const S *>(weight->data) : nullptr,
        bias ? static_cast<const S *>(bias->data) : nullptr, eps, static_cast<S *>(y.data), D);
  });
  checkLaunch("layer_norm kernel launch");
}

void rmsNorm(CudaDevice &device, const KTensor &x, const KTensor *weight, double eps,
             const KTensor &y) {
  int64_t rows = 0, D = 0;
  normCommon("rms_norm", x, weight, nullptr, y, rows, D);
  if (rows == 0) return;
  device.makeCurrent();
  dispatchFloat("rms_norm", x.dtype, false, [&](auto tag) {
    using T = decltype(tag);
    using S = typename T::S;
    rmsNormKernel<T><<<static_cast<unsigned>(rows), kThreads, 0, device.stream()>>>(
        static_cast<const S *>(x.data), weight ? static_cast<const S *>(weight->data) : nullptr,
        eps, static_cast<S *>(y.data), D);
  });
  checkLaunch("rms_norm kernel launch");
}

void softmax(CudaDevice &device, const KTensor &x, int64_t dim, const KTensor &y) {
  const char *op = "softmax";
  checks::softmax(x, dim, y);
  const int64_t L = x.shape[dim];
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(dim) + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  if (L == 0 || x.numel() == 0) return;
  const int64_t lines = x.numel() / L;
  if (lines > INT_MAX) fail(op, "more than 2^31 - 1 lines");
  device.makeCurrent();
  dispatchFloat(op, x.dtype, false, [&](auto tag) {
    using T = decltype(tag);
    using S = typename T::S;
    softmaxKernel<T><<<static_cast<unsigned>(lines), kThreads, 0, device.stream()>>>(
        static_cast<const S *>(x.data), static_cast<S *>(y.data), L, inner);
  });
  checkLaunch("softmax kernel launch");
}

void sdpa(CudaDevice &device, const KTensor &q, const KTensor &k, const KTensor &v,
          const KTensor *mask, const KTensor &o, bool causal, double scale) {
  const char *op = "sdpa";
  const checks::SdpaDims dims = checks::sdpa(q, k, v, mask, o);
  const int64_t B = dims.B, H = dims.H, T_ = dims.T, D = dims.D, S = dims.S, Dv = dims.Dv;
  if (S > kMaxSdpaKeys)
    fail(op, std::to_string(S) + " keys; the CUDA kernel supports at most " +
                 std::to_string(kMaxSdpaKeys));
  const int64_t rows = B * H * T_;
  if (rows == 0 || Dv == 0) return;
  if (rows > INT_MAX) fail(op, "more than 2^31 - 1 query rows");
  device.makeCurrent();
  if (S == 0) {  // no keys: zeros, as on the CPU and in torch (the kernel would give 0/0)
    checkCuda(cudaMemsetAsync(o.data, 0, static_cast<size_t>(rows * Dv * plan::dtypeSize(o.dtype)),
                              device.stream()),
              "sdpa: cudaMemsetAsync");
    return;
  }
  dispatchFloat(op, q.dtype, false, [&](auto tag) {
    using T = decltype(tag);
    using Sx = typename T::S;
    SdpaMask<Sx> m{mask ? static_cast<const Sx *>(mask->data) : nullptr, H,
                   {dims.maskStride[0], dims.maskStride[1], dims.maskStride[2],
                    dims.maskStride[3]}};
    sdpaKernel<T><<<static_cast<unsigned>(rows), kThreads, static_cast<size_t>(std::max<int64_t>(S, 1)) * sizeof(float),
                    device.stream()>>>(
        static_cast<const Sx *>(q.data), static_cast<const Sx *>(k.data),
        static_cast<const Sx *>(v.data), m, static_cast<Sx *>(o.data), T_, S, D, Dv,
        dims.Hkv ? H / dims.Hkv : 1, causal, static_cast<float>(scale));
  });
  checkLaunch("sdpa kernel launch");
}

void rope(CudaDevice &device, const KTensor &x, double theta, const KTensor &y) {
  const char *op = "rope";
  checks::rope(x, theta, y);
  const int64_t D = x.shape[3], rows = D == 0 ? 0 : x.numel() / D;
  if (rows == 0 || D == 0) return;
  if (D / 2 > kMaxRopeHalf)
    fail(op, "head dimension " + std::to_string(D) + " is over the cuda backend's limit of " +
                 std::to_string(2 * kMaxRopeHalf));
  RopeTable table{};
  const std::vector<float> invFreq = ropeInverseFrequencies(theta, D);
  std::copy(invFreq.begin(), invFreq.end(), table.invFreq);
  device.makeCurrent();
  dispatchFloat(op, x.dtype, false, [&](auto tag) {
    using T = decltype(tag);
    using S = typename T::S;
    ropeKernel<T><<<gridFor(rows * D / 2), kThreads, 0, device.stream()>>>(
        static_cast<const S *>(x.data), static_cast<S *>(y.data), rows, x.shape[2], D, table);
  });
  checkLaunch("rope kernel launch");
}

void stridedCopy(CudaDevice &device, const KTensor &x, const std::vector<int64_t> &strides,
                 int64_t offset, const KTensor &y) {
  const char *op = "strided_copy";
  checks::stridedCopy(x, strides, offset, y);
  requireRank(op, y, 0, "output");
  const int64_t count = y.numel();
  if (count == 0) return;
  Broadcast layout{};
  layout.rank = static_cast<int>(y.shape.size());
  for (int d = 0; d < layout.rank; ++d) {
    layout.shape[d] = y.shape[d];
    layout.aStride[d] = strides[d];
  }
  device.makeCurrent();
  bySize(plan::dtypeSize(x.dtype), [&](auto *tag) {
    using E = std::remove_pointer_t<decltype(tag)>;
    stridedCopyKernel<E><<<gridFor(count), kThreads, 0, device.stream()>>>(
        static_cast<const E *>(x.data), static_cast<E *>(y.data), layout, offset, count);
  });
  checkLaunch("strided_copy kernel launch");
}

void cat(CudaDevice &device, const std::vector<KTensor> &inputs, int64_t dim, const KTensor &y) {
  checks::cat(inputs, dim, y);
  // Each input is a 2-d block copy: outer rows of (its dim * inner) elements.
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= y.shape[d];
  for (size_t d = static_cast<size_t>(dim) + 1; d < y.shape.size(); ++d) inner *= y.shape[d];
  const int64_t size = plan::dtypeSize(y.dtype);
  const int64_t yRow = y.shape[dim] * inner * size;
  int64_t at = 0;
  device.makeCurrent();
  for (const KTensor &t : inputs) {
    const int64_t row = t.shape[dim] * inner * size;
    if (row > 0 && outer > 0)
      checkCuda(cudaMemcpy2DAsync(static_cast<std::byte *>(y.data) + at, static_cast<size_t>(yRow),
                                  t.data, static_cast<size_t>(row), static_cast<size_t>(row),
                                  static_cast<size_t>(outer), cudaMemcpyDeviceToDevice,
                                  device.stream()),
                "cat: cudaMemcpy2DAsync");
    at += row;
  }
}

void embedding(CudaDevice &device, const KTensor &weight, const KTensor &ids, const KTensor &out) {
  const char *op = "embedding";
  checks::embedding(weight, ids, out);
  const int64_t V = weight.shape[0], D = weight.shape[1];
  const int64_t count = ids.numel() * std::max<int64_t>(D, 1);  // see embeddingKernel
  if (count == 0) return;
  auto *firstBad = static_cast<unsigned long long *>(device.scratch(8));
  const auto *idData = static_cast<const int64_t *>(ids.data);
  device.makeCurrent();
  checkCuda(cudaMemsetAsync(firstBad, 0xff, 8, device.stream()), "embedding: cudaMemsetAsync");
  bySize(plan::dtypeSize(weight.dtype), [&](auto *tag) {
    using E = std::remove_pointer_t<decltype(tag)>;
    embeddingKernel<E><<<gridFor(count), kThreads, 0, device.stream()>>>(
        static_cast<const E *>(weight.data), idData, static_cast<E *>(out.data), count, V, D,
        firstBad);
  });
  checkLaunch("embedding kernel launch");
  unsigned long long bad = 0;
  copyToHost(device, &bad, firstBad, sizeof bad);
  if (bad == ~0ull) return;
  int64_t id = 0;
  copyToHost(device, &id, idData + bad, sizeof id);
  fail(op, "id " + std::to_string(id) + " at flat index " + std::to_string(bad) +
               " is out of range for a vocabulary of V = " + std::to_string(V));
}

void linear(CudaDevice &device, const KTensor &x, const KTensor &w, const KTensor *b,
            const KTensor &y) {
  const char *op = "linear";
  const checks::LinearDims dims = checks::linear(x, w, b, y);
  const int64_t M = dims.rows, N = dims.N, K = dims.K;
  dispatchFloat(op, x.dtype, false, [&](auto) {});
  device.makeCurrent();
  if (b && M * N > 0) {
    dispatchFloat(op, x.dtype, false, [&](auto tag) {
      using T = decltype(tag);
      using S = typename T::S;
      rowBroadcastKernel<T><<<gridFor(M * N), kThreads, 0, device.stream()>>>(
          static_cast<const S *>(b->data), static_cast<S *>(y.data), M, N);
    });
    checkLaunch("linear bias kernel launch");
  }
  if (K == 0) {  // y = b, or 0
    if (!b)
      checkCuda(cudaMemsetAsync(y.data, 0, static_cast<size_t>(y.numel() * plan::dtypeSize(y.dtype)),
                                device.stream()),
                "linear: cudaMemsetAsync");
    return;
  }
  gemm(device, x.dtype, true, M, N, K, x.data, w.data, y.data, b ? 1.0f : 0.0f);
}

void matmul(CudaDevice &device, const KTensor &a, const KTensor &b, const KTensor &c,
            MatmulLayout layout) {
  const char *op = "matmul";
  const checks::MatmulDims dims = checks::matmul(a, b, c, layout);
  dispatchFloat(op, a.dtype, false, [&](auto) {});
  const Shape &aBatch = dims.aBatch, &bBatch = dims.bBatch;
  const Shape *batch = &dims.batch;
  const int64_t M = dims.M, N = dims.N, K = dims.K;
  const int64_t size = plan::dtypeSize(a.dtype);
  const int64_t batches = plan::numElements(*batch);
  device.makeCurrent();
  if (K == 0) {
    checkCuda(cudaMemsetAsync(c.data, 0, static_cast<size_t>(c.numel() * size), device.stream()),
              "matmul: cudaMemsetAsync");
    return;
  }
  for (int64_t i = 0; i < batches; ++i) {
    // Batch index -> offsets of a and b (broadcast dims repeat).
    int64_t rest = i, aIndex = 0, bIndex = 0, aScale = 1, bScale = 1;
    for (int64_t d = static_cast<int64_t>(batch->size()) - 1; d >= 0; --d) {
      const int64_t idx = rest % (*batch)[d];
      rest /= (*batch)[d];
      const int64_t ad = d - static_cast<int64_t>(batch->size() - aBatch.size());
      const int64_t bd = d - static_cast<int64_t>(batch->size() - bBatch.size());
      if (ad >= 0) {
        if (aBatch[ad] != 1) aIndex += idx * aScale;
        aScale *= aBatch[ad];
      }
      if (bd >= 0) {
        if (bBatch[bd] != 1) bIndex += idx * bScale;
        bScale *= bBatch[bd];
      }
    }
    gemm(device, a.dtype, layout.transposeB, M, N, K,
         static_cast<const std::byte *>(a.data) + aIndex * M * K * size,
         static_cast<const std::byte *>(b.data) + bIndex * K * N * size,
         static_cast<std::byte *>(c.data) + i * M * N * size, 0.0f, layout.transposeA);
  }
}

}  // namespace shardc::runtime::cuda
