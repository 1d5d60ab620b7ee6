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
        scratch.assign(static_cast<size_t>(m * k + (m + k) * chunk), 0.0f);
        float *acc = scratch.data(), *gb = acc + m * k, *col = gb + m * chunk;
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
