// convKernel (runtime/cpu/FamilyKernels.h): torch's aten.convolution on the
// CPU for 1, 2 and 3 spatial dims.
//   - 1-d and 2-d are 3-d with a depth of 1 (runtime/ConvGeometry.h).
//   - Depthwise (one input channel per group, 1-d or 2-d) runs directly: per
//     output plane, from a zero-padded copy of the input plane split into
//     column phases of the stride, kernel taps in a fixed order, float
//     accumulators.
//   - The others (and every 3-d one): per (sample, group, block of output
//     pixels), im2col of the block ([Cin/groups * kd * kh * kw, P] floats,
//     about 1 MiB) then one sgemm W_g [Cout/groups, K] x col into the
//     output, started from the bias. A 1x1(x1), stride 1, unpadded
//     convolution needs no im2col: sgemm reads the input planes directly.
//     16-bit storage converts weights and columns in K blocks of 256 and
//     accumulates in a float tile.
//   - Transposed (1-d, 2-d and 3-d): per (sample, group, block of output
//     channels), sgemm W_g^T x x_g into columns, then col2im adds them into
//     the output planes (volumes).
// Tasks never share an output element and their boundaries depend only on
// the shapes of one sample, so a sample's bytes do not depend on the batch
// size or the thread count.
#include "runtime/cpu/FamilyKernels.h"

#include "runtime/ConvGeometry.h"
#include "runtime/ForwardChecks.h"
#include "runtime/cpu/Gemm.h"
#include "runtime/cpu/Im2col.h"
#include "runtime/cpu/KernelSupport.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

namespace shardc::runtime {
using plan::DType;

namespace {

constexpr int64_t kScratchFloats = int64_t(1) << 18;  // 1 MiB per worker
constexpr int64_t kTileK16 = 256;   // K block of the 16-bit path
constexpr int64_t kTileM16 = 128;   // output-channel block of the 16-bit path

/// The 3-d view of a convolution (shared with the CUDA kernels).
using Geometry = ConvGeometry;

float loadOne(DType dtype, const void *base, int64_t i) {
  float v = 0;
  cpu::loadFloats(dtype, base, i, 1, &v);
  return v;
}

/// acc rows [m, P) (leading dim ldAcc) start from the bias of channels co0...
void initRows(const KTensor *b, int64_t co0, int64_t m, int64_t P, float *acc, int64_t ldAcc) {
  for (int64_t i = 0; i < m; ++i) {
    const float v = b ? loadOne(b->dtype, b->data, co0 + i) : 0.0f;
    std::fill(acc + i * ldAcc, acc + i * ldAcc + P, v);
  }
}

int asInt(int64_t v) { return static_cast<int>(v); }

/// Pixels per im2col block: the block of `rowsPerBlock` rows fits the
/// scratch budget; blocks of equal size (no sliver of a last block).
int64_t pixelBlock(const Geometry &g, int64_t rowsPerBlock, int64_t fixedFloats) {
  const int64_t budget = std::max<int64_t>(kScratchFloats - fixedFloats, kScratchFloats / 4);
  const int64_t most = std::max<int64_t>(16, budget / std::max<int64_t>(rowsPerBlock, 1));
  const int64_t pixels = std::max<int64_t>(g.pixels(), 1);
  const int64_t blocks = (pixels + most - 1) / most;
  return (pixels + blocks - 1) / blocks;
}

// ------------------------------------------------------- few pixels path --

/// Output pixels per sample up to which convFewPixels runs.
constexpr int64_t kFewPixels = 16;

/// A convolution with few output pixels per sample (a late stage of a
/// convnet on small images: 2 x 2 or 4 x 4) as a linear over pixel rows:
/// per group, the pixels of as many samples as fit 4 MiB of columns are the
/// rows of one shardc GEMM (runtime/cpu/Gemm.h) by the group's weight, from
/// the bias. Per sample, sgemm would get a matrix of 4 columns, which it
/// runs at a third of its speed. shardc's GEMM computes every element as
/// one fma chain that depends only on its own row and column, so a sample's
/// bytes do not depend on which samples share its call (the batch size, a
/// data-parallel rank's rows) nor on the thread count.
void convFewPixels(const Geometry &g, const KTensor &x, const KTensor &w, const KTensor *b,
                   const KTensor &y, int threads) {
  const int64_t K = g.K(), M = g.coutG(), PIX = g.pixels();
  // Samples per call: their columns (K per pixel) and outputs (M per
  // pixel) within about 4 MiB each.
  const int64_t samples = std::clamp<int64_t>(4 * kScratchFloats / (std::max(K, M) * PIX), 1, g.N);
  const int64_t xSample = g.Cin * g.inPlane(), ySample = g.Cout * PIX;
  const int64_t size = plan::dtypeSize(y.dtype);
  // Kept per thread between calls (as the other paths' scratch): a fresh
  // 4 MiB block per call would be zeroed and first-touched every forward.
  thread_local std::vector<float> col, rows;
  thread_local std::vector<std::byte> out;
  col.resize(static_cast<size_t>(K * PIX));
  rows.resize(static_cast<size_t>(samples * PIX * K));
  out.resize(static_cast<size_t>(samples * PIX * M * size));
  for (int64_t grp = 0; grp < g.groups; ++grp)
    for (int64_t n0 = 0; n0 < g.N; n0 += samples) {
      const int64_t ns = std::min(samples, g.N - n0);
      // rows[(s, p), r] = col_s[r, p]: im2col of each sample, transposed.
      for (int64_t s = 0; s < ns; ++s) {
        cpu::im2col(g, x.dtype, x.data, (n0 + s) * xSample + grp * g.cinG() * g.inPlane(), 0, PIX,
                    0, K, col.data(), PIX);
        float *dst = rows.data() + s * PIX * K;
        for (int64_t r = 0; r < K; ++r)
          for (int64_t p = 0; p < PIX; ++p) dst[p * K + r] = col[r * PIX + p];
      }
      // out[(s, p), co] = bias[co] + rows[(s, p)] . w_g[co], in y's dtype.
      cpu::gemm({ns * PIX,
                 M,
                 K,
                 {plan::DType::F32, rows.data(), 0, K},
                 {w.dtype, w.data, grp * M * K, K},
                 /*transB=*/true,
                 b ? b->data : nullptr,
                 b ? b->dtype : w.dtype,
                 grp * M,
                 out.data(),
                 y.dtype,
                 0,
                 M},
                threads);
      // y[n, grp * M + co, p] = out[(s, p), co]: already rounded, copied.
      std::byte *yb = static_cast<std::byte *>(y.data);
      for (int64_t s = 0; s < ns; ++s)
        for (int64_t p = 0; p < PIX; ++p)
          for (int64_t co = 0; co < M; ++co)
            std::memcpy(yb + ((n0 + s) * ySample + (grp * M + co) * PIX + p) * size,
                        out.data() + ((s * PIX + p) * M + co) * size, static_cast<size_t>(size));
    }
}

// ------------------------------------------------------------- general path --

void convGemm(const Geometry &g, const KTensor &x, const KTensor &w, const KTensor *b,
              const KTensor &y, int threads) {
  const int64_t K = g.K(), M = g.coutG(), PIX = g.pixels();
  const bool f32 = x.dtype == DType::F32;
  const bool pointwise = g.taps() == 1 && g.sd == 1 && g.sh == 1 && g.sw == 1 && g.pd == 0 &&
                         g.ph == 0 && g.pw == 0 && g.D == g.OD && g.H == g.OH && g.W == g.OW;
  // f32: the whole K per block. 16-bit: K blocks of kTileK16, weight blocks
  // of kTileM16 rows, a float accumulator.
  const int64_t kb16 = std::min(K, kTileK16), mb16 = std::min(M, kTileM16);
  const int64_t P = f32 ? (pointwise ? std::min<int64_t>(PIX, 1024) : pixelBlock(g, K, 0))
                        : pixelBlock(g, M + kb16, mb16 * kb16);
  const int64_t blocks = (PIX + P - 1) / P;
  const int64_t xSample = g.Cin * g.inPlane(), ySample = g.Cout * PIX;
  cpu::singleThreadedBlas();
  cpu::parallelTasks(g.N * g.groups * blocks, threads, g.N * g.Cout * PIX * K, [&](int64_t task) {
    thread_local std::vector<float> scratch;
    const int64_t n = task / (g.groups * blocks), grp = (task / blocks) % g.groups;
    const int64_t p0 = (task % blocks) * P, pb = std::min(P, PIX - p0);
    const int64_t plane0 = n * xSample + grp * g.cinG() * g.inPlane();
    const int64_t yOff = n * ySample + grp * M * PIX + p0;  // (co = grp*M, pixel p0)
    const int64_t wOff = grp * M * K;
    if (f32) {
      float *yp = static_cast<float *>(y.data) + yOff;
      const float *wp = static_cast<const float *>(w.data) + wOff;
      initRows(b, grp * M, M, pb, yp, PIX);
      if (K == 0) return;
      const float *colp;
      int64_t ldCol;
      if (pointwise) {
        colp = static_cast<const float *>(x.data) + plane0 + p0;
        ldCol = PIX;
      } else {
        scratch.resize(static_cast<size_t>(K * pb));
        cpu::im2col(g, x.dtype, x.data, plane0, p0, pb, 0, K, scratch.data(), pb);
        colp = scratch.data();
        ldCol = pb;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, asInt(M), asInt(pb), asInt(K), 1.0f,
                  wp, asInt(K), colp, asInt(ldCol), 1.0f, yp, asInt(PIX));
      return;
    }
    // 16-bit storage: a float accumulator for all M rows, each K block's
    // columns built once, weights converted in [mb, kb] blocks; one rounding
    // per output element.
    scratch.resize(static_cast<size_t>(M * pb + kb16 * pb + mb16 * kb16));
    float *acc = scratch.data(), *col = acc + M * pb, *wb = col + kb16 * pb;
    initRows(b, grp * M, M, pb, acc, pb);
    for (int64_t k0 = 0; k0 < K; k0 += kb16) {
      const int64_t kb = std::min(kb16, K - k0);
      cpu::im2col(g, x.dtype, x.data, plane0, p0, pb, k0, k0 + kb, col, pb);
      for (int64_t m0 = 0; m0 < M; m0 += mb16) {
        const int64_t mb = std::min(mb16, M - m0);
        for (int64_t i = 0; i < mb; ++i)
          cpu::loadFloats(w.dtype, w.data, wOff + (m0 + i) * K + k0, kb, wb + i * kb);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, asInt(mb), asInt(pb), asInt(kb),
                    1.0f, wb, asInt(kb), col, asInt(pb), 1.0f, acc + m0 * pb, asInt(pb));
      }
    }
    for (int64_t i = 0; i < M; ++i)
      cpu::storeFloats(y.dtype, acc + i * pb, pb, y.data, yOff + i * PIX);
  });
}


// ------------------------------------------------------------ depthwise path --

/// One output plane from one zero-padded input plane whose rows are split
/// into `sw` column phases (column c of a padded row at (c % sw) * Wq + c / sw),
/// so every tap reads consecutive elements for consecutive outputs whatever
/// the stride. Per output row, the kernel rows in order; within a kernel row
/// of 3 taps the three products are summed left to right and then added
/// (other widths add tap by tap). Built for AVX-512, AVX2 and the baseline
/// (the build targets the baseline ISA), without fused multiply-adds: every
/// clone rounds each product and sum separately in the same order, so the
/// bytes do not depend on which clone the CPU runs.
#if defined(__clang__)
#define SHARDC_NO_FMA_ATTR
#define SHARDC_NO_FMA_BODY _Pragma("clang fp contract(off)")
#else
#define SHARDC_NO_FMA_ATTR __attribute__((optimize("fp-contract=off")))
#define SHARDC_NO_FMA_BODY
#endif
__attribute__((target_clones("avx512f", "avx2", "default"))) SHARDC_NO_FMA_ATTR void
depthwisePlane(const Geometry &g, const float *taps, float bias, const float *__restrict padded,
               int64_t rowLen, int64_t Wq, float *__restrict out) {
  SHARDC_NO_FMA_BODY
  const int64_t OW = g.OW, sw = g.sw, dw = g.dw;
  auto tap = [&](const float *line, int64_t kj) {
    const int64_t c = kj * dw;
    return line + (c % sw) * Wq + c / sw;
  };
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    float *__restrict o = out + oh * OW;
    for (int64_t ow = 0; ow < OW; ++ow) o[ow] = bias;
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      const float *line = padded + (oh * g.sh + ki * g.dh) * rowLen;
      const float *t = taps + ki * g.kw;
      if (g.kw == 3) {
        const float w0 = t[0], w1 = t[1], w2 = t[2];
        const float *__restrict l0 = tap(line, 0), *__restrict l1 = tap(line, 1),
                                *__restrict l2 = tap(line, 2);
        for (int64_t ow = 0; ow < OW; ++ow) o[ow] += w0 * l0[ow] + w1 * l1[ow] + w2 * l2[ow];
        continue;
      }
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        const float wv = t[kj];
        const float *__restrict l = tap(line, kj);
        for (int64_t ow = 0; ow < OW; ++ow) o[ow] += wv * l[ow];
      }
    }
  }
}

/// One input channel per group: per (sample, output channel), the input
/// plane is copied into a zero-padded, column-phase-split float plane (so
/// every tap is in range and contiguous) and depthwisePlane accumulates the
/// output plane in float.
void convDepthwise(const Geometry &g, const KTensor &x, const KTensor &w, const KTensor *b,
                   const KTensor &y, int threads) {
  const int64_t HW = g.H * g.W, PIX = g.pixels(), taps = g.kh * g.kw, M = g.coutG();
  // Rows and columns the windows reach: the output size formula keeps every
  // tap inside the input plus its padding on both sides.
  const int64_t Hp = g.H + 2 * g.ph, Wp = g.W + 2 * g.pw;
  const int64_t Wq = (Wp + g.sw - 1) / g.sw, rowLen = Wq * g.sw;
  const bool f32 = x.dtype == DType::F32;
  // Output channels reading one input channel (M > 1: a channel multiplier
  // or a single-channel input) share its padded plane, in blocks of 16.
  constexpr int64_t kPerPlane = 16;
  const int64_t blocks = (M + kPerPlane - 1) / kPerPlane;
  cpu::parallelTasks(g.N * g.Cin * blocks, threads, g.N * g.Cout * PIX * taps, [&](int64_t task) {
    thread_local std::vector<float> scratch;
    const int64_t n = task / (g.Cin * blocks), ci = (task / blocks) % g.Cin;
    const int64_t m0 = (task % blocks) * kPerPlane, mn = std::min(kPerPlane, M - m0);
    const int64_t xOff = (n * g.Cin + ci) * HW;
    scratch.assign(static_cast<size_t>(Hp * rowLen + g.W + taps + (f32 ? 0 : PIX)), 0.0f);
    float *padded = scratch.data(), *row = padded + Hp * rowLen, *tapv = row + g.W;
    for (int64_t ih = 0; ih < g.H; ++ih) {
      float *dst = padded + (ih + g.ph) * rowLen;
      if (g.sw == 1) {
        cpu::loadFloats(x.dtype, x.data, xOff + ih * g.W, g.W, dst + g.pw);
        continue;
      }
      cpu::loadFloats(x.dtype, x.data, xOff + ih * g.W, g.W, row);
      // Padded column c = iw + pw goes to phase c % sw, slot c / sw.
      for (int64_t r = 0; r < g.sw; ++r) {
        float *phase = dst + r * Wq;
        for (int64_t c = r, slot = 0; c < Wp; c += g.sw, ++slot)
          if (c >= g.pw && c < g.pw + g.W) phase[slot] = row[c - g.pw];
      }
    }
    for (int64_t co = ci * M + m0; co < ci * M + m0 + mn; ++co) {
      const int64_t yOff = (n * g.Cout + co) * PIX;
      float *acc = f32 ? static_cast<float *>(y.data) + yOff : tapv + taps;
      cpu::loadFloats(w.dtype, w.data, co * taps, taps, tapv);
      depthwisePlane(g, tapv, b ? loadOne(b->dtype, b->data, co) : 0.0f, padded, rowLen, Wq, acc);
      if (!f32) cpu::storeFloats(y.dtype, acc, PIX, y.data, yOff);
    }
  });
}

/// Depthwise for narrow planes (rows too short to vectorize along): 16
/// output channels at a time, the input held channels-last ([Hp][Wp][16],
/// zero-padded), so each tap is one 16-lane multiply-add per output pixel.
/// Per element: the bias, then the taps in (ki, kj) order, one rounding per
/// product and per sum (no FMA, as depthwisePlane).
constexpr int64_t kLanes = 16;
__attribute__((target_clones("avx512f", "avx2", "default"))) SHARDC_NO_FMA_ATTR void
depthwiseLanes(const Geometry &g, const float *__restrict wT, const float *__restrict bias,
               const float *__restrict in, int64_t Wp, float *__restrict acc) {
  SHARDC_NO_FMA_BODY
  for (int64_t oh = 0; oh < g.OH; ++oh)
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      float a[kLanes];
      for (int64_t j = 0; j < kLanes; ++j) a[j] = bias[j];
      for (int64_t ki = 0; ki < g.kh; ++ki)
        for (int64_t kj = 0; kj < g.kw; ++kj) {
          const float *src = in + ((oh * g.sh + ki * g.dh) * Wp + ow * g.sw + kj * g.dw) * kLanes;
          const float *wt = wT + (ki * g.kw + kj) * kLanes;
          for (int64_t j = 0; j < kLanes; ++j) a[j] += wt[j] * src[j];
        }
      float *out = acc + (oh * g.OW + ow) * kLanes;
      for (int64_t j = 0; j < kLanes; ++j) out[j] = a[j];
    }
}

void convDepthwiseLanes(const Geometry &g, const KTensor &x, const KTensor &w, const KTensor *b,
                        const KTensor &y, int threads) {
  const int64_t HW = g.H * g.W, PIX = g.pixels(), taps = g.kh * g.kw, M = g.coutG();
  const int64_t Hp = g.H + 2 * g.ph, Wp = g.W + 2 * g.pw;
  const int64_t blocks = (g.Cout + kLanes - 1) / kLanes;
  cpu::parallelTasks(g.N * blocks, threads, g.N * g.Cout * PIX * taps, [&](int64_t task) {
    thread_local std::vector<float> scratch;
    const int64_t n = task / blocks, c0 = (task % blocks) * kLanes;
    const int64_t cn = std::min(kLanes, g.Cout - c0);
    const size_t inFloats = static_cast<size_t>(Hp * Wp * kLanes);
    scratch.resize(inFloats + static_cast<size_t>((PIX + taps + 1) * kLanes + kLanes * std::max(HW, PIX)));
    std::fill(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(inFloats), 0.0f);
    float *in = scratch.data(), *acc = in + inFloats, *wT = acc + PIX * kLanes;
    float *bias = wT + taps * kLanes, *planes = bias + kLanes;  // planes: [kLanes][HW]
    std::fill(wT, wT + (taps + 1) * kLanes, 0.0f);
    for (int64_t j = 0; j < cn; ++j) {
      const int64_t co = c0 + j;
      cpu::loadFloats(x.dtype, x.data, (n * g.Cin + co / M) * HW, HW, planes + j * HW);
      for (int64_t t = 0; t < taps; ++t) wT[t * kLanes + j] = loadOne(w.dtype, w.data, co * taps + t);
      bias[j] = b ? loadOne(b->dtype, b->data, co) : 0.0f;
    }
    // Channels-last: pixel outer, the block's channels inner (contiguous writes).
    for (int64_t ih = 0; ih < g.H; ++ih)
      for (int64_t iw = 0; iw < g.W; ++iw) {
        float *dst = in + ((ih + g.ph) * Wp + iw + g.pw) * kLanes;
        const float *src = planes + ih * g.W + iw;
        for (int64_t j = 0; j < cn; ++j) dst[j] = src[j * HW];
      }
    depthwiseLanes(g, wT, bias, in, Wp, acc);
    for (int64_t j = 0; j < cn; ++j) {
      float *plane = planes + j * PIX;
      for (int64_t p = 0; p < PIX; ++p) plane[p] = acc[p * kLanes + j];
    }
    cpu::storeFloats(y.dtype, planes, cn * PIX, y.data, (n * g.Cout + c0) * PIX);
  });
}

// ----------------------------------------------------------- transposed path --

/// Adds column row r = (c, kz, ki, kj) of the input pixels [q0, q0 + qb)
/// into output volume `plane`: input pixel (id, ih, iw) lands on (id * sd -
/// pd + kz * dd, ih * sh - ph + ki * dh, iw * sw - pw + kj * dw) when that
/// lies inside. A run of one input row at a time, its valid columns found
/// once (no test per element); the additions happen in pixel order, as a
/// loop over the pixels would. A 1-d or 2-d convolution has one depth (id =
/// od = 0).
void col2imRow(const Geometry &g, int64_t kz, int64_t ki, int64_t kj, const float *src, int64_t q0,
               int64_t qb, float *plane) {
  const int64_t shift = kj * g.dw - g.pw;  // ow = iw * sw + shift
  // iw in [lo, hi) lands inside [0, OW).
  const int64_t lo = shift >= 0 ? 0 : (-shift + g.sw - 1) / g.sw;
  const int64_t hi = g.OW - shift <= 0 ? 0 : (g.OW - shift + g.sw - 1) / g.sw;
  const int64_t HW = g.H * g.W;
  for (int64_t q = q0; q < q0 + qb;) {
    const int64_t id = q / HW, ih = (q / g.W) % g.H, iw0 = q % g.W;
    const int64_t iw1 = std::min(g.W, iw0 + (q0 + qb - q));
    const int64_t od = id * g.sd - g.pd + kz * g.dd, oh = ih * g.sh - g.ph + ki * g.dh;
    const int64_t a = std::max(iw0, lo), b = std::min(iw1, hi);
    if (od >= 0 && od < g.OD && oh >= 0 && oh < g.OH && a < b) {
      // The output column of iw = a, and its column entry.
      float *out = plane + (od * g.OH + oh) * g.OW + (a * g.sw + shift);
      const float *in = src + (q - q0) + (a - iw0);
      if (g.sw == 1) {
        for (int64_t i = 0; i < b - a; ++i) out[i] += in[i];
      } else {
        for (int64_t i = 0; i < b - a; ++i) out[i * g.sw] += in[i];
      }
    }
    q += iw1 - iw0;
  }
}

/// x [N, Cin, (D,) H, W], w [Cin, Cout/g, (kd,) kh, kw], y [N, Cout, (OD,)
/// OH, OW]: per (sample, group, block of output channels), sgemm W_g^T x_g
/// block into columns [cb * taps, Q] and col2im adds them into the output
/// planes, in a fixed order (input pixel blocks, then rows).
void convTransposed(const Geometry &g, const KTensor &x, const KTensor &w, const KTensor *b,
                    const KTensor &y, int threads) {
  // HW: the input pixels of one channel (a volume's, in 3-d).
  const int64_t HW = g.inPlane(), PIX = g.pixels(), taps = g.taps();
  const int64_t cinG = g.Cin / g.groups, M = g.coutG();
  const bool f32 = x.dtype == DType::F32;
  // Output channels per task: a 16-bit task keeps its planes in float.
  const int64_t cb = std::min<int64_t>(M, f32 ? 16 : std::max<int64_t>(1, (kScratchFloats / 4) / std::max<int64_t>(PIX, 1)));
  const int64_t cBlocks = (M + cb - 1) / cb;
  const int64_t R = cb * taps;
  const int64_t Q = std::min(std::max<int64_t>(HW, 1),
                             std::max<int64_t>(16, kScratchFloats / (R + (f32 ? 0 : cinG))));
  cpu::singleThreadedBlas();
  cpu::parallelTasks(g.N * g.groups * cBlocks, threads, g.N * g.Cout * HW * taps * cinG,
                     [&](int64_t task) {
    thread_local std::vector<float> scratch;
    const int64_t n = task / (g.groups * cBlocks), grp = (task / cBlocks) % g.groups;
    const int64_t c0 = (task % cBlocks) * cb, cn = std::min(cb, M - c0), rows = cn * taps;
    const int64_t xOff = (n * g.Cin + grp * cinG) * HW;
    const int64_t yOff = (n * g.Cout + grp * M + c0) * PIX;
    const int64_t wOff = grp * cinG * M * taps + c0 * taps, ldw = M * taps;
    scratch.resize(static_cast<size_t>(rows * Q + (f32 ? 0 : cn * PIX + cinG * (rows + Q))));
    float *cols = scratch.data();
    float *acc = f32 ? static_cast<float *>(y.data) + yOff : cols + rows * Q;
    float *wb = acc + (f32 ? 0 : cn * PIX), *xb = wb + cinG * rows;
    for (int64_t c = 0; c < cn; ++c)
      std::fill(acc + c * PIX, acc + (c + 1) * PIX,
                b ? loadOne(b->dtype, b->data, grp * M + c0 + c) : 0.0f);
    const float *wp = f32 ? static_cast<const float *>(w.data) + wOff : wb;
    if (!f32)
      for (int64_t i = 0; i < cinG; ++i)
        cpu::loadFloats(w.dtype, w.data, wOff + i * ldw, rows, wb + i * rows);
    for (int64_t q0 = 0; q0 < HW && cinG > 0; q0 += Q) {
      const int64_t qb = std::min(Q, HW - q0);
      const float *xp;
      int64_t ldx;
      if (f32) {
        xp = static_cast<const float *>(x.data) + xOff + q0;
        ldx = HW;
      } else {
        for (int64_t i = 0; i < cinG; ++i)
          cpu::loadFloats(x.dtype, x.data, xOff + i * HW + q0, qb, xb + i * qb);
        xp = xb;
        ldx = qb;
      }
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, asInt(rows), asInt(qb), asInt(cinG),
                  1.0f, wp, asInt(f32 ? ldw : rows), xp, asInt(ldx), 0.0f, cols, asInt(qb));
      for (int64_t r = 0; r < rows; ++r)
        col2imRow(g, (r / (g.kh * g.kw)) % g.kd, (r / g.kw) % g.kh, r % g.kw, cols + r * qb, q0, qb,
                  acc + (r / taps) * PIX);
    }
    if (!f32)
      for (int64_t c = 0; c < cn; ++c)
        cpu::storeFloats(y.dtype, acc + c * PIX, PIX, y.data, yOff + c * PIX);
  });
}

}  // namespace

void convKernel(const ConvParams &p, const KTensor &x, const KTensor &w, const KTensor *b,
                const KTensor &y, int threads) {
  const char *op = p.transposed ? "conv_transpose" : "convolution";
  checks::conv(p, x, w, b, y);
  const Geometry g = convGeometryOf(p, x.shape, w.shape, y.shape);
  if (y.numel() == 0) return;
  // sgemm takes int sizes and leading dims.
  for (int64_t v : {g.K(), g.coutG() * g.taps(), g.pixels(), g.inPlane(), g.Cin})
    if (v > INT_MAX)
      checks::fail(op, "a matrix size of " + std::to_string(v) +
                           " exceeds the BLAS int range (input " + shapeToString(x.shape) +
                           ", weight " + shapeToString(w.shape) + ")");
  if (p.transposed) return convTransposed(g, x, w, b, y, threads);
  // Depthwise holds one padded input plane per worker: planes beyond about
  // 4 MiB take the im2col path (bounded blocks), which computes the same sums.
  const int64_t paddedPlane = (g.H + 2 * g.ph) * (g.W + 2 * g.pw + g.sw) + g.pixels();
  // Many output channels per input channel (a single-channel input such as
  // audio's first conv) is a real matrix product: sgemm beats the tap loops.
  if (g.flat() && g.cinG() == 1 && g.coutG() < 16 && paddedPlane <= 4 * kScratchFloats) {
    // Rows shorter than 32 outputs vectorize poorly: 16 channels at a time.
    if (g.OW < 32 && paddedPlane * kLanes <= 4 * kScratchFloats)
      return convDepthwiseLanes(g, x, w, b, y, threads);
    return convDepthwise(g, x, w, b, y, threads);
  }
  if (g.pixels() <= kFewPixels && g.K() > 0) return convFewPixels(g, x, w, b, y, threads);
  convGemm(g, x, w, b, y, threads);
}

}  // namespace shardc::runtime
