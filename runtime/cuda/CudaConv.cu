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
//     (1-d or 2-d) convolutions:
//     one thread per output element sums its taps in float (direct; the
//     transposed one gathers the input pixels that land on it).
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

/// Transposed: w [Cin, Cout/g, kh, kw]; input pixel (ih, iw) of channel ci
/// lands on (ih*sh - ph + ki*dh, iw*sw - pw + kj*dw) of every output
/// channel of its group.
template <typename T>
__global__ void transposedKernel(Geometry g, const typename T::S *x, const typename T::S *w,
                                 const typename T::S *b, typename T::S *y, int64_t count) {
  SHARDC_GRID_LOOP(i, count) {
    const int64_t ow = i % g.OW, oh = (i / g.OW) % g.OH, co = (i / g.pixels()) % g.Cout;
    const int64_t n = i / (g.pixels() * g.Cout), M = g.coutG(), grp = co / M;
    const int64_t cinG = g.Cin / g.groups;
    float acc = b ? T::load(b[co]) : 0.0f;
    for (int64_t c = 0; c < cinG; ++c) {
      const int64_t ci = grp * cinG + c;
      const typename T::S *plane = x + (n * g.Cin + ci) * g.H * g.W;
      const typename T::S *taps = w + (ci * M + co % M) * g.kh * g.kw;
      for (int64_t ki = 0; ki < g.kh; ++ki) {
        const int64_t th = oh + g.ph - ki * g.dh;
        if (th < 0 || th % g.sh != 0 || th / g.sh >= g.H) continue;
        for (int64_t kj = 0; kj < g.kw; ++kj) {
          const int64_t tw = ow + g.pw - kj * g.dw;
          if (tw < 0 || tw % g.sw != 0 || tw / g.sw >= g.W) continue;
          acc += T::load(plane[(th / g.sh) * g.W + tw / g.sw]) * T::load(taps[ki * g.kw + kj]);
        }
      }
    }
    y[i] = T::store(acc);
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
  // 3-d convolutions take the im2col path (the direct kernels are 2-d;
  // the shape rule refuses a 3-d transposed one).
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

}  // namespace shardc::runtime::cuda
