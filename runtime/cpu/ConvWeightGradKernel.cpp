// convWeightGradKernel (runtime/cpu/FamilyKernels.h): conv_weight_grad on
// the CPU, the gradient of a convolution's weight:
//   dw_g [M, K] = sum over samples n and output pixels p of
//                 grad_n,g [M, p] * col_n,g [K, p]
// with col the forward's im2col (K = Cin/groups * taps rows). The samples'
// pixels are taken as one long axis of N * pixels columns, cut into chunks
// of equal width that may span samples, so a layer with few output pixels
// (a late stage of a convnet: 7 x 7 or 2 x 2) still feeds sgemm a real
// inner dimension.
//
// Why not the convolution kernel on permuted operands (what the gradient
// rule used to emit): that convolution has one "sample" per input channel
// and the batch as its input channels, so each sample is a thin sgemm with
// as many columns as the kernel has taps (9), whose packing of the whole
// gradient dominates; and the two permuted copies cost an activation each.
//
// Tasks are (group, block of M rows, block of K columns), tiles of at most
// 128 x 128 (512 x 512 when there are few columns in all): each owns its
// tile of dw, accumulates it in float over the chunks in a fixed order and
// rounds it once. Block sizes depend only on the shapes, so the bytes do not
// depend on the thread count.
//
// One input channel per group, several groups (depthwise), sums each tap
// directly instead (depthwiseWeightGrad), one task per output channel.
#include "runtime/cpu/FamilyKernels.h"

#include "runtime/ConvGeometry.h"
#include "runtime/ForwardChecks.h"
#include "runtime/cpu/Im2col.h"
#include "runtime/cpu/KernelSupport.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <vector>

namespace shardc::runtime {

namespace {

constexpr int64_t kScratchFloats = int64_t(1) << 18;  // 1 MiB per worker for a chunk
// The most dw rows (output channels) and columns (input channel x tap) per
// task. Few (sample, pixel) columns in all (a late stage: 8 samples of 2 x 2
// pixels) make each sgemm a thin update of the tile, so its cost is the
// tile's traffic and sgemm's packing: big tiles (3.5 ms instead of 8.5 for
// resnet18's [8, 512, 2, 2] layer, bench/conv_bench.sh). Many columns
// amortize that anyway: smaller tiles, more tasks for the threads.
constexpr int64_t kMostTileSmallTotal = 512, kMostTile = 128;
constexpr int64_t kSmallTotal = 1024;

/// n split into equal blocks of at most `most`: the block size.
int64_t equalBlock(int64_t n, int64_t most) {
  const int64_t blocks = (n + most - 1) / most;
  return (n + blocks - 1) / blocks;
}

int asInt(int64_t v) { return static_cast<int>(v); }

/// Sum of a[i] * b[i * stride] for i < n in float, element i into partial
/// sum i % 8, the eight combined pairwise: vectorizes, and the result
/// depends only on the values and n.
float dotLanes(const float *a, const float *b, int64_t stride, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  if (stride == 1) {
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  } else {
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[(i + j) * stride];
  }
  for (int j = 0; i < n; ++i, ++j) acc[j] += a[i] * b[i * stride];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/// Depthwise (one input channel per group): per output channel, each tap's
/// sum of grad * x directly, one output row at a time (the row's valid
/// columns found once), rows added in double in a fixed order (samples,
/// then rows); no im2col, which for one input channel copies a float per
/// tap and pixel to feed a 1-row sgemm (5x torch's time on mobilenet's
/// 3 x 3 layer). Tasks are output channels; 16-bit planes are converted one
/// sample at a time.
void depthwiseWeightGrad(const ConvGeometry &g, const KTensor &x, const KTensor &grad,
                         const KTensor &dw, int threads) {
  const int64_t PIX = g.pixels(), taps = g.taps(), HW = g.H * g.W;
  const bool f32 = x.dtype == plan::DType::F32;
  cpu::parallelTasks(g.Cout, threads, g.Cout * taps * g.N * PIX, [&](int64_t co) {
    thread_local std::vector<float> planes;
    std::vector<double> sums(static_cast<size_t>(taps), 0.0);
    const int64_t ci = co / g.coutG();
    for (int64_t n = 0; n < g.N; ++n) {
      const int64_t gOff = (n * g.Cout + co) * PIX, xOff = (n * g.Cin + ci) * g.inPlane();
      const float *gp, *xp;
      if (f32) {
        gp = static_cast<const float *>(grad.data) + gOff;
        xp = static_cast<const float *>(x.data) + xOff;
      } else {
        planes.resize(static_cast<size_t>(PIX + g.inPlane()));
        cpu::loadFloats(grad.dtype, grad.data, gOff, PIX, planes.data());
        cpu::loadFloats(x.dtype, x.data, xOff, g.inPlane(), planes.data() + PIX);
        gp = planes.data();
        xp = planes.data() + PIX;
      }
      for (int64_t t = 0; t < taps; ++t) {
        const int64_t kz = t / (g.kh * g.kw), ki = (t / g.kw) % g.kh, kj = t % g.kw;
        const int64_t shift = kj * g.dw - g.pw;  // iw = ow * sw + shift
        const int64_t lo = shift >= 0 ? 0 : std::min(g.OW, (-shift + g.sw - 1) / g.sw);
        const int64_t hi = g.W - shift <= 0 ? 0 : std::min(g.OW, (g.W - shift + g.sw - 1) / g.sw);
        if (lo >= hi) continue;
        double sum = 0;
        for (int64_t od = 0; od < g.OD; ++od) {
          const int64_t id = od * g.sd - g.pd + kz * g.dd;
          if (id < 0 || id >= g.D) continue;
          for (int64_t oh = 0; oh < g.OH; ++oh) {
            const int64_t ih = oh * g.sh - g.ph + ki * g.dh;
            if (ih < 0 || ih >= g.H) continue;
            sum += dotLanes(gp + (od * g.OH + oh) * g.OW + lo,
                            xp + id * HW + ih * g.W + lo * g.sw + shift, g.sw, hi - lo);
          }
        }
        sums[static_cast<size_t>(t)] += sum;
      }
    }
    std::vector<float> rounded(sums.begin(), sums.end());
    cpu::storeFloats(dw.dtype, rounded.data(), taps, dw.data, co * taps);
  });
}

}  // namespace

void convWeightGradKernel(const ConvParams &p, const KTensor &x, const KTensor &grad,
                          const std::vector<int64_t> &kernel, const KTensor &dw, int threads) {
  const char *op = "conv_weight_grad";
  checks::convWeightGrad(p, x, grad, kernel, dw);
  if (dw.numel() == 0) return;
  const ConvGeometry g = convGeometryOf(p, x.shape, dw.shape, grad.shape);
  const int64_t M = g.coutG(), K = g.K(), PIX = g.pixels();
  const int64_t total = g.N * PIX;  // the long axis: (sample, pixel)
  for (int64_t v : {M, K, g.Cout * K})
    if (v > INT_MAX)
      checks::fail(op, "a matrix size of " + std::to_string(v) +
                           " exceeds the BLAS int range (input " + shapeToString(x.shape) +
                           ", gradient " + shapeToString(grad.shape) + ")");
  // One input channel and several groups: depthwise. (A single input
  // channel with many outputs, wav2vec2's first conv, is a real matrix
  // product: 1.0 ms through sgemm, 6 ms tap by tap.)
  // A 16-bit sample's planes are converted whole: up to about 4 MiB of
  // floats; bigger ones take the chunked path, which computes the same sums.
  if (g.cinG() == 1 && g.groups > 1 && g.pixels() + g.inPlane() <= 4 * kScratchFloats)
    return depthwiseWeightGrad(g, x, grad, dw, threads);
  const int64_t most = total < kSmallTotal ? kMostTileSmallTotal : kMostTile;
  const int64_t mb = equalBlock(M, most), kb = equalBlock(K, most);
  const int64_t mBlocks = (M + mb - 1) / mb, kBlocks = (K + kb - 1) / kb;
  const int64_t chunk = std::clamp<int64_t>(kScratchFloats / (mb + kb), 64, 4096);
  const int64_t xSample = g.Cin * g.inPlane(), gSample = g.Cout * PIX;
  cpu::singleThreadedBlas();
  cpu::parallelTasks(
      g.groups * mBlocks * kBlocks, threads, g.groups * M * K * std::max<int64_t>(total, 1),
      [&](int64_t task) {
        thread_local std::vector<float> scratch;
        const int64_t grp = task / (mBlocks * kBlocks);
        const int64_t m0 = (task / kBlocks) % mBlocks * mb, m = std::min(mb, M - m0);
        const int64_t r0 = task % kBlocks * kb, k = std::min(kb, K - r0);
        // Only the tile starts from zero: each chunk's columns of gb and col
        // are written before sgemm reads them.
        scratch.resize(static_cast<size_t>(m * k + (m + k) * chunk));
        float *acc = scratch.data(), *gb = acc + m * k, *col = gb + m * chunk;
        std::fill(acc, acc + m * k, 0.0f);
        for (int64_t q0 = 0; q0 < total; q0 += chunk) {
          const int64_t width = std::min(chunk, total - q0);
          // The chunk's columns, one segment per sample it touches.
          for (int64_t q = q0; q < q0 + width;) {
            const int64_t n = q / PIX, p0 = q % PIX;
            const int64_t len = std::min(PIX - p0, q0 + width - q), off = q - q0;
            cpu::im2col(g, x.dtype, x.data, n * xSample + grp * g.cinG() * g.inPlane(), p0, len, r0,
                        r0 + k, col + off, chunk);
            for (int64_t i = 0; i < m; ++i)
              cpu::loadFloats(grad.dtype, grad.data, n * gSample + (grp * M + m0 + i) * PIX + p0,
                              len, gb + i * chunk + off);
            q += len;
          }
          // acc [m, k] += gb [m, width] col [k, width]^T
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, asInt(m), asInt(k), asInt(width),
                      1.0f, gb, asInt(chunk), col, asInt(chunk), 1.0f, acc, asInt(k));
        }
        for (int64_t i = 0; i < m; ++i)
          cpu::storeFloats(dw.dtype, acc + i * k, k, dw.data, (grp * M + m0 + i) * K + r0);
      });
}

}  // namespace shardc::runtime
