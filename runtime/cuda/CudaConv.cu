// conv (CudaFamilies.h): torch's aten.convolution for 1, 2 and 3 spatial
// dims, runtime/cpu/ConvKernels.cpp's semantics (1-d and 2-d are 3-d with a
// depth of 1).
//   - General path: per (sample, group, block of output pixels), im2col of
//     the block into the device's kernel scratch (at most 1 MiB, in the
//     storage dtype: a copy, no rounding), then one cublasGemmEx
//     W_g [Cout/g, K] x col [K, P] onto the output, which a first kernel set
//     to the bias (beta = 1; compute type CUBLAS_COMPUTE_32F, no TF32; a
//     16-bit output is rounded once, as linear's).
//   - Depthwise (one input channel per group, 1-d or 2-d) and transposed
//     (1-d, 2-d or 3-d) convolutions:
//     one thread per output element sums its taps in float (direct; the
//     transposed one gathers the input pixels that land on it).
//   - conv_weight_grad: float32 per (sample, group, block of output
//     pixels) im2col and cublasGemmEx onto dw (zeroed first); 16-bit
//     dtypes one thread per dw element, summed in float and rounded once.
// cuDNN is not used: the toolkit here has it, but it would be one more
// library the GPU bundle must find on the GPU machine (docs/gpu.md).
#include "runtime/cuda/CudaFamilies.h"

#include "runtime/ConvGeometry.h"
#include "runtime/ForwardChecks.h"
#include "runtime/Kernels.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/DeviceStorage.cuh"

#include <climits>
#include <type_traits>

namespace shardc::runtime::cuda {
using plan::DType;

namespace {
using namespace dev;

/// The 3-d view of a convolution (runtime/ConvGeometry.h).
using Geometry = ConvGeometry;

/// y[n, co, pixel] = b[co] or 0, before the GEMMs accumulate onto it.
template <typename T>
__global__ void biasKernel(const typename T::S *b, typename T::S *y, int64_t Cout, int64_t PIX,
                           int64_t count) {
  SHARDC_GRID_LOOP(i, count) { y[i] = b ? b[(i / PIX) % Cout] : T::store(0.0f); }
}

/// col[r, p - p0] for rows r = ((ci * kd + kz) * kh + ki) * kw + kj of the
/// group's input channels and output pixels [p0, p0 + P) (p = (od * OH +
/// oh) * OW + ow); 0 where the tap reads padding. Elements are copied in
/// their storage type.
template <typename E>
__global__ void im2colKernel(Geometry g, const E *x, int64_t plane0, int64_t p0, int64_t P,
                             E *col, int64_t count) {
  SHARDC_GRID_LOOP(i, count) {
    const int64_t r = i / P, p = p0 + i % P;
    const int64_t ci = r / g.taps(), kz = (r / (g.kh * g.kw)) % g.kd;
    const int64_t ki = (r / g.kw) % g.kh, kj = r % g.kw;
    const int64_t id = (p / (g.OW * g.OH)) * g.sd - g.pd + kz * g.dd;
    const int64_t ih = ((p / g.OW) % g.OH) * g.sh - g.ph + ki * g.dh;
    const int64_t iw = (p % g.OW) * g.sw - g.pw + kj * g.dw;
    col[i] = (id >= 0 && id < g.D && ih >= 0 && ih < g.H && iw >= 0 && iw < g.W)
                 ? x[plane0 + ci * g.inPlane() + (id * g.H + ih) * g.W + iw]
                 : E{0};
  }
}

/// Depthwise: output channel co reads input channel co / (Cout / groups).
template <typename T>
__global__ void depthwiseKernel(Geometry g, const typename T::S *x, const typename T::S *w,
                                const typename T::S *b, typename T::S *y, int64_t count) {
  SHARDC_GRID_LOOP(i, count) {
    const int64_t ow = i % g.OW, oh = (i / g.OW) % g.OH, co = (i / g.pixels()) % g.Cout;
    const int64_t n = i / (g.pixels() * g.Cout), ci = co / g.coutG();
    const typename T::S *plane = x + (n * g.Cin + ci) * g.H * g.W;
    const typename T::S *taps = w + co * g.kh * g.kw;
    float acc = b ? T::load(b[co]) : 0.0f;
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      const int64_t ih = oh * g.sh - g.ph + ki * g.dh;
      if (ih < 0 || ih >= g.H) continue;
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        const int64_t iw = ow * g.sw - g.pw + kj * g.dw;
        if (iw >= 0 && iw < g.W) acc += T::load(plane[ih * g.W + iw]) * T::load(taps[ki * g.kw + kj]);
      }
    }
    y[i] = T::store(acc);
  }
}

/// Transposed: w [Cin, Cout/g, kd, kh, kw]; input pixel (id, ih, iw) of
/// channel ci lands on (id*sd - pd + kz*dd, ih*sh - ph + ki*dh, iw*sw - pw +
/// kj*dw) of every output channel of its group (1-d and 2-d: one depth).
template <typename T>
__global__ void transposedKernel(Geometry g, const typename T::S *x, const typename T::S *w,
                                 const typename T::S *b, typename T::S *y, int64_t count) {
  SHARDC_GRID_LOOP(i, count) {
    const int64_t ow = i % g.OW, oh = (i / g.OW) % g.OH, od = (i / (g.OW * g.OH)) % g.OD;
    const int64_t co = (i / g.pixels()) % g.Cout;
    const int64_t n = i / (g.pixels() * g.Cout), M = g.coutG(), grp = co / M;
    const int64_t cinG = g.Cin / g.groups;
    float acc = b ? T::load(b[co]) : 0.0f;
    for (int64_t c = 0; c < cinG; ++c) {
      const int64_t ci = grp * cinG + c;
      const typename T::S *volume = x + (n * g.Cin + ci) * g.inPlane();
      const typename T::S *taps = w + (ci * M + co % M) * g.taps();
      for (int64_t kz = 0; kz < g.kd; ++kz) {
        const int64_t td = od + g.pd - kz * g.dd;
        if (td < 0 || td % g.sd != 0 || td / g.sd >= g.D) continue;
        const typename T::S *plane = volume + (td / g.sd) * g.H * g.W;
        for (int64_t ki = 0; ki < g.kh; ++ki) {
          const int64_t th = oh + g.ph - ki * g.dh;
          if (th < 0 || th % g.sh != 0 || th / g.sh >= g.H) continue;
          for (int64_t kj = 0; kj < g.kw; ++kj) {
            const int64_t tw = ow + g.pw - kj * g.dw;
            if (tw < 0 || tw % g.sw != 0 || tw / g.sw >= g.W) continue;
            acc += T::load(plane[(th / g.sh) * g.W + tw / g.sw]) *
                   T::load(taps[(kz * g.kh + ki) * g.kw + kj]);
          }
        }
      }
    }
    y[i] = T::store(acc);
  }
}

/// conv_weight_grad, direct: one thread per dw element [co, ci, taps] sums
/// grad * x over the samples and output pixels in float, rounded once (the
/// 16-bit dtypes; float32 takes the im2col + cuBLAS path).
template <typename T>
__global__ void weightGradKernel(Geometry g, const typename T::S *x, const typename T::S *grad,
                                 typename T::S *dw, int64_t count) {
  SHARDC_GRID_LOOP(i, count) {
    const int64_t K = g.K(), r = i % K, co = i / K, grp = co / g.coutG();
    const int64_t ci = grp * g.cinG() + r / g.taps();
    const int64_t kz = (r / (g.kh * g.kw)) % g.kd, ki = (r / g.kw) % g.kh, kj = r % g.kw;
    float acc = 0.0f;
    for (int64_t n = 0; n < g.N; ++n) {
      const typename T::S *plane = x + (n * g.Cin + ci) * g.inPlane();
      const typename T::S *gp = grad + (n * g.Cout + co) * g.pixels();
      for (int64_t od = 0; od < g.OD; ++od) {
        const int64_t id = od * g.sd - g.pd + kz * g.dd;
        if (id < 0 || id >= g.D) continue;
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          const int64_t ih = oh * g.sh - g.ph + ki * g.dh;
          if (ih < 0 || ih >= g.H) continue;
          for (int64_t ow = 0; ow < g.OW; ++ow) {
            const int64_t iw = ow * g.sw - g.pw + kj * g.dw;
            if (iw >= 0 && iw < g.W)
              acc += T::load(gp[(od * g.OH + oh) * g.OW + ow]) *
                     T::load(plane[(id * g.H + ih) * g.W + iw]);
          }
        }
      }
    }
    dw[i] = T::store(acc);
  }
}

void convGemm(CudaDevice &device, const char *op, const Geometry &g, const KTensor &x,
              const KTensor &w, const KTensor &y) {
  const int64_t K = g.K(), M = g.coutG(), PIX = g.pixels();
  const int64_t size = plan::dtypeSize(x.dtype);
  const int64_t scratchElements = static_cast<int64_t>(CudaDevice::kMaxScratchBytes) / size;
  if (K > scratchElements)
    checks::fail(op, "an im2col row of " + std::to_string(K) +
                         " taps exceeds the cuda backend's kernel scratch (" +
                         std::to_string(scratchElements) + " elements)");
  // Pixel blocks of equal size whose columns fit the scratch.
  const int64_t most = scratchElements / std::max<int64_t>(K, 1);
  const int64_t blocks = (PIX + most - 1) / most, P = (PIX + blocks - 1) / blocks;
  const int64_t ySample = g.Cout * PIX, xSample = g.Cin * g.inPlane();
  const cudaDataType_t type = blasType(x.dtype);
  const float alpha = 1.0f, beta = 1.0f;
  void *col = device.scratch(static_cast<size_t>(K * P * size));
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t grp = 0; grp < g.groups; ++grp)
      for (int64_t p0 = 0; p0 < PIX; p0 += P) {
        const int64_t pb = std::min(P, PIX - p0);
        const int64_t plane0 = n * xSample + grp * g.cinG() * g.inPlane();
        bySize(size, [&](auto *tag) {
          using E = std::remove_pointer_t<decltype(tag)>;
          im2colKernel<E><<<gridFor(K * pb), kThreads, 0, device.stream()>>>(
              g, static_cast<const E *>(x.data), plane0, p0, pb, static_cast<E *>(col), K * pb);
        });
        checkLaunch(std::string(op) + " im2col kernel launch");
        // Row-major y_g[M, pb] (ld PIX) += W_g[M, K] col[K, pb], as
        // column-major y_g^T = col^T W_g^T.
        const std::byte *wg = static_cast<const std::byte *>(w.data) + grp * M * K * size;
        std::byte *yg = static_cast<std::byte *>(y.data) + (n * ySample + grp * M * PIX + p0) * size;
        checkCublas(cublasGemmEx(device.blas(), CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(pb),
                                 static_cast<int>(M), static_cast<int>(K), &alpha, col, type,
                                 static_cast<int>(pb), wg, type, static_cast<int>(K), &beta, yg,
                                 type, static_cast<int>(PIX), CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT),
                    "cublasGemmEx (conv)");
      }
}

}  // namespace

void conv(CudaDevice &device, const ConvParams &p, const KTensor &x, const KTensor &w,
          const KTensor *b, const KTensor &y) {
  const char *op = p.transposed ? "conv_transpose" : "convolution";
  checks::conv(p, x, w, b, y);
  const Geometry g = convGeometryOf(p, x.shape, w.shape, y.shape);
  const int64_t count = y.numel();
  if (count == 0) return;
  // cuBLAS takes int sizes and leading dims.
  for (int64_t v : {g.K(), g.coutG(), g.pixels()})
    if (v > INT_MAX)
      checks::fail(op, "a matrix size of " + std::to_string(v) +
                           " exceeds the cuBLAS int range (input " + shapeToString(x.shape) +
                           ", weight " + shapeToString(w.shape) + ")");
  device.makeCurrent();
  // Plain 3-d convolutions take the im2col path (the depthwise kernel is
  // 1-d or 2-d; the transposed one takes every rank).
  const bool direct = p.transposed || (g.cinG() == 1 && g.flat());
  dispatchFloat(op, x.dtype, false, [&](auto tag) {
    using T = decltype(tag);
    using S = typename T::S;
    const S *xs = static_cast<const S *>(x.data), *ws = static_cast<const S *>(w.data);
    const S *bs = b ? static_cast<const S *>(b->data) : nullptr;
    S *ys = static_cast<S *>(y.data);
    if (p.transposed)
      transposedKernel<T><<<gridFor(count), kThreads, 0, device.stream()>>>(g, xs, ws, bs, ys, count);
    else if (direct)
      depthwiseKernel<T><<<gridFor(count), kThreads, 0, device.stream()>>>(g, xs, ws, bs, ys, count);
    else
      biasKernel<T><<<gridFor(count), kThreads, 0, device.stream()>>>(bs, ys, g.Cout, g.pixels(), count);
  });
  checkLaunch(std::string(op) + " kernel launch");
  if (!direct && g.K() > 0) convGemm(device, op, g, x, w, y);
}

void convWeightGrad(CudaDevice &device, const ConvParams &p, const KTensor &x,
                    const KTensor &grad, const std::vector<int64_t> &kernel, const KTensor &dw) {
  const char *op = "conv_weight_grad";
  checks::convWeightGrad(p, x, grad, kernel, dw);
  const Geometry g = convGeometryOf(p, x.shape, dw.shape, grad.shape);
  const int64_t count = dw.numel();
  if (count == 0) return;
  device.makeCurrent();
  if (x.dtype != DType::F32) {
    dispatchFloat(op, x.dtype, false, [&](auto tag) {
      using T = decltype(tag);
      using S = typename T::S;
      weightGradKernel<T><<<gridFor(count), kThreads, 0, device.stream()>>>(
          g, static_cast<const S *>(x.data), static_cast<const S *>(grad.data),
          static_cast<S *>(dw.data), count);
    });
    checkLaunch(std::string(op) + " kernel launch");
    return;
  }
  // float32: dw = 0, then per (sample, group, block of output pixels) the
  // forward's im2col and one cublasGemmEx dw_g [M, K] += grad_g [M, pb]
  // col [K, pb]^T, in column-major terms dw_g^T = col^T grad_g^T.
  const int64_t K = g.K(), M = g.coutG(), PIX = g.pixels();
  for (int64_t v : {K, M, PIX})
    if (v > INT_MAX)
      checks::fail(op, "a matrix size of " + std::to_string(v) +
                           " exceeds the cuBLAS int range (input " + shapeToString(x.shape) +
                           ", gradient " + shapeToString(grad.shape) + ")");
  checkCuda(cudaMemsetAsync(dw.data, 0, static_cast<size_t>(count) * sizeof(float),
                            device.stream()),
            "conv_weight_grad: cudaMemsetAsync");
  const int64_t scratchElements = static_cast<int64_t>(CudaDevice::kMaxScratchBytes) /
                                  static_cast<int64_t>(sizeof(float));
  if (K > scratchElements)
    checks::fail(op, "an im2col row of " + std::to_string(K) +
                         " taps exceeds the cuda backend's kernel scratch (" +
                         std::to_string(scratchElements) + " elements)");
  const int64_t most = scratchElements / K;
  const int64_t blocks = (PIX + most - 1) / most, P = (PIX + blocks - 1) / blocks;
  const int64_t xSample = g.Cin * g.inPlane(), gSample = g.Cout * PIX;
  const float alpha = 1.0f, beta = 1.0f;
  float *col = static_cast<float *>(device.scratch(static_cast<size_t>(K * P) * sizeof(float)));
  const float *xs = static_cast<const float *>(x.data), *gs = static_cast<const float *>(grad.data);
  float *dws = static_cast<float *>(dw.data);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t grp = 0; grp < g.groups; ++grp)
      for (int64_t p0 = 0; p0 < PIX; p0 += P) {
        const int64_t pb = std::min(P, PIX - p0);
        im2colKernel<float><<<gridFor(K * pb), kThreads, 0, device.stream()>>>(
            g, xs, n * xSample + grp * g.cinG() * g.inPlane(), p0, pb, col, K * pb);
        checkLaunch(std::string(op) + " im2col kernel launch");
        // Column-major: col is [pb, K] (ld pb), grad_g [PIX, M] (ld PIX),
        // dw_g [K, M] (ld K).
        checkCublas(cublasGemmEx(device.blas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(K),
                                 static_cast<int>(M), static_cast<int>(pb), &alpha, col,
                                 CUDA_R_32F, static_cast<int>(pb),
                                 gs + n * gSample + grp * M * PIX + p0, CUDA_R_32F,
                                 static_cast<int>(PIX), &beta, dws + grp * M * K, CUDA_R_32F,
                                 static_cast<int>(K), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                    "cublasGemmEx (conv_weight_grad)");
      }
}

}  // namespace shardc::runtime::cuda
