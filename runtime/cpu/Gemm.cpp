// The packed-panel GEMM of Gemm.h. Layout of one task (a block of up to
// kBlockM rows x kBlockN columns of C):
//   cTile   float accumulators of the block, started from the bias;
//   pTile   the running group's chains (kGroupK values of k), from +0;
//   for each kBlockK slice of k, in order:
//     bPack   the slice of op(B), as panels of kPanel columns, k-major;
//     aPack   the slice of A, as micro-tiles of up to MR rows, k-major;
//     the micro-kernel adds the slice into cTile (the first group of a
//     call that starts from the bias) or pTile (every other group), one
//     micro-tile x panel at a time, continuing each element's fma chain
//     where the previous slice stored it; at a group's end pTile is added
//     into cTile;
//   then cTile is rounded once into C.
// Padded panel columns hold zeros and are never stored; micro-tiles are
// as tall as the rows they hold (a kernel per height), so no row is padded.
#include "runtime/cpu/Gemm.h"

#include "runtime/cpu/KernelSupport.h"
#include "runtime/init/CpuDispatch.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace shardc::runtime::cpu {
namespace {

using plan::DType;

constexpr int64_t kPanel = 32;    // columns per packed B panel (2 zmm / 4 ymm)
constexpr int64_t kBlockM = 384;  // rows per task: B is packed once per 384 rows
constexpr int64_t kBlockN = 256;  // columns per task
constexpr int64_t kBlockK = 128;  // k per slice: a 16 KiB B panel stays in L1
static_assert(kGroupK % kBlockK == 0, "a group of k is whole slices");
constexpr int kMaxRows = 12;      // tallest micro-tile (the AVX-512 one)

/// Adds a k slice into a micro-tile: c[r][j] = fma(a[k][r], b[k][j], c[r][j])
/// for k = 0..kb-1 in order; a is k-major with `rows` values per k, b one
/// packed panel (kPanel values per k), c rows of kPanel floats, ldc apart.
using MicroKernel = void (*)(const float *a, const float *b, int64_t kb, float *c, int64_t ldc);

// --------------------------------------------------------------- portable --

template <int Rows>
void kernelPortable(const float *a, const float *b, int64_t kb, float *c, int64_t ldc) {
  for (int r = 0; r < Rows; ++r)
    for (int64_t j = 0; j < kPanel; ++j) {
      float s = c[r * ldc + j];
      for (int64_t k = 0; k < kb; ++k) s = std::fma(a[k * Rows + r], b[k * kPanel + j], s);
      c[r * ldc + j] = s;
    }
}

#if defined(__x86_64__)
// ------------------------------------------------------------------- AVX2 --

// Up to 6 rows x 16 columns in 12 ymm accumulators; the 32-column panel is
// done as two halves.
template <int Rows>
__attribute__((target("avx2,fma"))) void kernelAvx2(const float *a, const float *b, int64_t kb,
                                                     float *c, int64_t ldc) {
  for (int64_t half = 0; half < kPanel; half += 16) {
    __m256 acc[Rows][2];
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      acc[r][0] = _mm256_loadu_ps(c + r * ldc + half);
      acc[r][1] = _mm256_loadu_ps(c + r * ldc + half + 8);
    }
    const float *bk = b + half;
    for (int64_t k = 0; k < kb; ++k, bk += kPanel) {
      const __m256 b0 = _mm256_loadu_ps(bk), b1 = _mm256_loadu_ps(bk + 8);
#pragma GCC unroll 8
      for (int r = 0; r < Rows; ++r) {
        const __m256 av = _mm256_broadcast_ss(a + k * Rows + r);
        acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      _mm256_storeu_ps(c + r * ldc + half, acc[r][0]);
      _mm256_storeu_ps(c + r * ldc + half + 8, acc[r][1]);
    }
  }
}

// ---------------------------------------------------------------- AVX-512 --

// Up to 12 rows x 32 columns in 24 zmm accumulators.
template <int Rows>
__attribute__((target("avx512f,fma"))) void kernelAvx512(const float *a, const float *b,
                                                         int64_t kb, float *c, int64_t ldc) {
  __m512 acc[Rows][2];
#pragma GCC unroll 16
  for (int r = 0; r < Rows; ++r) {
    acc[r][0] = _mm512_loadu_ps(c + r * ldc);
    acc[r][1] = _mm512_loadu_ps(c + r * ldc + 16);
  }
  for (int64_t k = 0; k < kb; ++k, b += kPanel) {
    const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 16
    for (int r = 0; r < Rows; ++r) {
      const __m512 av = _mm512_set1_ps(a[k * Rows + r]);
      acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < Rows; ++r) {
    _mm512_storeu_ps(c + r * ldc, acc[r][0]);
    _mm512_storeu_ps(c + r * ldc + 16, acc[r][1]);
  }
}
#endif

/// The micro-kernels of one path, by micro-tile height (1..maxRows).
struct KernelSet {
  int maxRows;
  MicroKernel byRows[kMaxRows + 1];
};

#define SHARDC_KERNELS_6(fn) fn<1>, fn<2>, fn<3>, fn<4>, fn<5>, fn<6>
#define SHARDC_KERNELS_12(fn) SHARDC_KERNELS_6(fn), fn<7>, fn<8>, fn<9>, fn<10>, fn<11>, fn<12>

const KernelSet &kernelsFor(GemmIsa isa) {
  static const KernelSet portable{kMaxRows, {nullptr, SHARDC_KERNELS_12(kernelPortable)}};
#if defined(__x86_64__)
  static const KernelSet avx2{6, {nullptr, SHARDC_KERNELS_6(kernelAvx2)}};
  static const KernelSet avx512{kMaxRows, {nullptr, SHARDC_KERNELS_12(kernelAvx512)}};
  if (isa == GemmIsa::Avx512) return avx512;
  if (isa == GemmIsa::Avx2) return avx2;
#endif
  return portable;
}

#undef SHARDC_KERNELS_12
#undef SHARDC_KERNELS_6

// ---------------------------------------------------------------- packing --

/// Element i of a float32 / bfloat16 / float16 array, widened to float.
template <DType D> float loadAt(const void *base, int64_t i) {
  if constexpr (D == DType::F32) return static_cast<const float *>(base)[i];
  else if constexpr (D == DType::BF16) return bfloat16BitsToFloat(static_cast<const uint16_t *>(base)[i]);
  else return halfBitsToFloat(static_cast<const uint16_t *>(base)[i]);
}

#if defined(__x86_64__)
/// dst[c][r] = src[r][c] for an 8 x 8 float block (rows ld / ldd apart).
__attribute__((target("avx2"), always_inline)) inline void transpose8x8(const float *src,
                                                                        int64_t ld, float *dst,
                                                                        int64_t ldd) {
  __m256 r[8], t[8], s[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * ld);
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 8; i += 4) {
    s[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * ldd, _mm256_permute2f128_ps(s[i], s[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * ldd, _mm256_permute2f128_ps(s[i], s[i + 4], 0x31));
  }
}

/// The 8 x 8 blocks of a float32 panel's transpose: rows [0, cols8) of src
/// (ld apart) x k in [0, kb8), into panel[k][j].
__attribute__((target("avx2"))) void transposeBlocks(const float *src, int64_t ld, int64_t cols8,
                                                     int64_t kb8, float *panel) {
  for (int64_t j = 0; j < cols8; j += 8)
    for (int64_t k = 0; k < kb8; k += 8)
      transpose8x8(src + j * ld + k, ld, panel + k * kPanel + j, kPanel);
}

/// An A micro-tile of 8 <= rows <= 12 (rows ld apart) for k in [0, kb8):
/// tile[k * rows + r] = src[r][k], as 8 x 8 blocks for rows [0, 8) and
/// [rows - 8, rows) (the overlap writes the same values twice).
__attribute__((target("avx2"))) void transposeTile(const float *src, int64_t ld, int64_t rows,
                                                   int64_t kb8, float *tile) {
  for (int64_t k = 0; k < kb8; k += 8) {
    transpose8x8(src + k, ld, tile + k * rows, rows);
    if (rows > 8) transpose8x8(src + (rows - 8) * ld + k, ld, tile + k * rows + rows - 8, rows);
  }
}
#endif

/// packB for op(B) stored as N rows of K (a linear's weight): a transpose,
/// in 8 x 8 AVX blocks for float32 where the CPU has AVX2 (moving data
/// only, so the bits do not depend on it), else element by element. The
/// scalar loop reads kPanel rows side by side; rows a multiple of 1 KiB
/// apart share few L1 sets, which makes it several times slower.
template <DType D>
void packTransposedB(const GemmOperand &B, int64_t k0, int64_t kb, int64_t n0, int64_t nb,
                     float *out) {
  for (int64_t j0 = 0; j0 < nb; j0 += kPanel) {
    const int64_t cols = std::min(kPanel, nb - j0);
    float *panel = out + (j0 / kPanel) * kb * kPanel;
    const int64_t first = B.offset + (n0 + j0) * B.ld + k0;
    int64_t kDone = 0, colsDone = 0;
#if defined(__x86_64__)
    if constexpr (D == DType::F32)
      if (init::cpuHasAvx2Fma()) {
        kDone = kb / 8 * 8;
        colsDone = cols / 8 * 8;
        transposeBlocks(static_cast<const float *>(B.data) + first, B.ld, colsDone, kDone, panel);
      }
#endif
    for (int64_t k = 0; k < kb; ++k)
      for (int64_t j = k < kDone ? colsDone : 0; j < kPanel; ++j)
        panel[k * kPanel + j] = j < cols ? loadAt<D>(B.data, first + j * B.ld + k) : 0.0f;
  }
}

/// The kb x nb slice of op(B) at (k0, n0) as panels of kPanel columns:
/// panel p holds column n0 + p * kPanel + j of row k at [p][k][j]; columns
/// past nb are zero.
void packB(const GemmArgs &g, int64_t k0, int64_t kb, int64_t n0, int64_t nb, float *out) {
  if (g.transB) {
    switch (g.B.dtype) {
    case DType::BF16: return packTransposedB<DType::BF16>(g.B, k0, kb, n0, nb, out);
    case DType::F16: return packTransposedB<DType::F16>(g.B, k0, kb, n0, nb, out);
    default: return packTransposedB<DType::F32>(g.B, k0, kb, n0, nb, out);
    }
  }
  const int64_t panels = (nb + kPanel - 1) / kPanel;
  if (nb % kPanel) std::fill_n(out + (panels - 1) * kb * kPanel, kb * kPanel, 0.0f);
  const bool f32 = g.B.dtype == DType::F32;
  for (int64_t k = 0; k < kb; ++k) {
    const int64_t first = g.B.offset + (k0 + k) * g.B.ld + n0;
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t cols = std::min(kPanel, nb - p * kPanel);
      float *dst = out + (p * kb + k) * kPanel;
      if (f32 && cols == kPanel)  // a fixed-size copy the compiler inlines
        std::memcpy(dst, static_cast<const float *>(g.B.data) + first + p * kPanel,
                    kPanel * sizeof(float));
      else loadFloats(g.B.dtype, g.B.data, first + p * kPanel, cols, dst);
    }
  }
}

/// Height of micro-tile rows [r0, ..) of an mb-row block: the rows are cut
/// into ceil(mb / maxRows) tiles of near-equal height (64 rows = 11 x 4 +
/// 10 x 2 rather than 12 x 5 + 4), since short tiles run the FMA units
/// below capacity. Heights change no bits: each row is its own chain.
int64_t tileRows(int64_t mb, int64_t r0, int maxRows) {
  const int64_t tiles = (mb + maxRows - 1) / maxRows, base = mb / tiles, tall = mb % tiles;
  // The first `tall` tiles hold base + 1 rows, the others base.
  return r0 < tall * (base + 1) ? base + 1 : base;
}

/// The mb x kb slice of A at (m0, k0) as micro-tiles (tileRows): the tile
/// starting at row r0 holds A[r0 + r][k] at [r0 * kb + k * rows + r], rows
/// being the tile's height.
template <DType D>
void packATyped(const GemmOperand &A, int64_t m0, int64_t mb, int64_t k0, int64_t kb,
                int maxRows, float *out) {
  for (int64_t r0 = 0; r0 < mb;) {
    const int64_t rows = tileRows(mb, r0, maxRows);
    float *tile = out + r0 * kb;
    const int64_t first = A.offset + (m0 + r0) * A.ld + k0;
    int64_t kDone = 0;
#if defined(__x86_64__)
    // A tile of 8 to 12 rows in 8 x 8 AVX blocks (transposeTile), the k
    // tail element by element. It was all a scalar loop storing `rows`
    // floats apart: an eighth of a transformer's forward.
    if constexpr (D == DType::F32)
      if (rows >= 8 && init::cpuHasAvx2Fma()) {
        kDone = kb / 8 * 8;
        transposeTile(static_cast<const float *>(A.data) + first, A.ld, rows, kDone, tile);
      }
#endif
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = kDone; k < kb; ++k)
        tile[k * rows + r] = loadAt<D>(A.data, first + r * A.ld + k);
    r0 += rows;
  }
}

/// packA for A stored as K rows of M (transA): a tile's `rows` values of
/// one k lie next to each other, so packing is a copy.
void packTransposedA(const GemmOperand &A, int64_t m0, int64_t mb, int64_t k0, int64_t kb,
                     int maxRows, float *out) {
  for (int64_t r0 = 0; r0 < mb;) {
    const int64_t rows = tileRows(mb, r0, maxRows);
    float *tile = out + r0 * kb;
    for (int64_t k = 0; k < kb; ++k)
      loadFloats(A.dtype, A.data, A.offset + (k0 + k) * A.ld + m0 + r0, rows, tile + k * rows);
    r0 += rows;
  }
}

void packA(const GemmArgs &g, int64_t m0, int64_t mb, int64_t k0, int64_t kb, int maxRows,
           float *out) {
  if (g.transA) return packTransposedA(g.A, m0, mb, k0, kb, maxRows, out);
  switch (g.A.dtype) {
  case DType::BF16: return packATyped<DType::BF16>(g.A, m0, mb, k0, kb, maxRows, out);
  case DType::F16: return packATyped<DType::F16>(g.A, m0, mb, k0, kb, maxRows, out);
  default: return packATyped<DType::F32>(g.A, m0, mb, k0, kb, maxRows, out);
  }
}

}  // namespace

// -------------------------------------------------------------- dispatch --

GemmIsa bestGemmIsa() {
  if (init::useAvx512()) return GemmIsa::Avx512;
  if (init::useAvx2()) return GemmIsa::Avx2;
  return GemmIsa::Portable;
}

bool gemmIsaSupported(GemmIsa isa) {
  switch (isa) {
  case GemmIsa::Avx512: return init::cpuHasAvx512();
  case GemmIsa::Avx2: return init::cpuHasAvx2Fma();
  case GemmIsa::Portable: return true;
  }
  return false;
}

namespace detail {

int64_t gemmTasks(const GemmArgs &g) {
  return ((g.M + kBlockM - 1) / kBlockM) * ((g.N + kBlockN - 1) / kBlockN);
}

void gemmTask(const GemmArgs &g, int64_t task, GemmIsa isa) {
  const KernelSet &kernels = kernelsFor(isa);
  const int64_t colBlocks = (g.N + kBlockN - 1) / kBlockN;
  const int64_t m0 = (task / colBlocks) * kBlockM, n0 = (task % colBlocks) * kBlockN;
  const int64_t mb = std::min(kBlockM, g.M - m0), nb = std::min(kBlockN, g.N - n0);
  const int64_t panels = (nb + kPanel - 1) / kPanel, ldTile = panels * kPanel;
  thread_local std::vector<float> cTile, pTile, aPack, bPack;
  cTile.resize(static_cast<size_t>(mb * ldTile));
  // Groups after the first (all of them under accumulate) run their chains
  // in pTile from +0 and are added into cTile at their end (Gemm.h).
  if (g.K > kGroupK || g.accumulate) pTile.resize(static_cast<size_t>(mb * ldTile));
  // Each element's chain starts from its bias (torch's addmm, beta = 1),
  // or where a previous call over earlier k left it.
  for (int64_t r = 0; r < mb; ++r) {
    float *c = cTile.data() + r * ldTile;
    if (g.accumulate)
      loadFloats(DType::F32, g.C, g.cOffset + (m0 + r) * g.ldc + n0, nb, c);
    else if (g.bias)
      loadFloats(g.biasDtype, g.bias, g.biasOffset + n0, nb, c);
    else std::fill_n(c, nb, 0.0f);
    std::fill(c + nb, c + ldTile, 0.0f);
  }
  for (int64_t k0 = 0; k0 < g.K; k0 += kBlockK) {
    const int64_t kb = std::min(kBlockK, g.K - k0);
    const bool intoC = k0 < kGroupK && !g.accumulate;
    if (!intoC && k0 % kGroupK == 0) std::fill(pTile.begin(), pTile.end(), 0.0f);
    float *target = intoC ? cTile.data() : pTile.data();
    bPack.resize(static_cast<size_t>(panels * kb * kPanel));
    aPack.resize(static_cast<size_t>(mb * kb));
    packB(g, k0, kb, n0, nb, bPack.data());
    packA(g, m0, mb, k0, kb, kernels.maxRows, aPack.data());
    for (int64_t p = 0; p < panels; ++p)
      for (int64_t r0 = 0, rows; r0 < mb; r0 += rows) {
        rows = tileRows(mb, r0, kernels.maxRows);
        kernels.byRows[rows](aPack.data() + r0 * kb, bPack.data() + p * kb * kPanel, kb,
                             target + r0 * ldTile + p * kPanel, ldTile);
      }
    const bool groupEnds = k0 + kb == g.K || (k0 + kb) % kGroupK == 0;
    if (!intoC && groupEnds)
      for (int64_t i = 0; i < mb * ldTile; ++i) cTile[i] += pTile[i];
  }
  for (int64_t r = 0; r < mb; ++r)
    storeFloats(g.cDtype, cTile.data() + r * ldTile, nb, g.C, g.cOffset + (m0 + r) * g.ldc + n0);
}

void gemmRun(int64_t tasks, int threads, int64_t work, void (*fn)(const void *, int64_t),
             const void *context) {
  parallelTasks(tasks, threads, work / 8, [&](int64_t t) { fn(context, t); });
}

}  // namespace detail

void gemmWithIsa(const GemmArgs &args, int threads, GemmIsa isa) {
  if (args.M <= 0 || args.N <= 0) return;
  struct Context {
    const GemmArgs *args;
    GemmIsa isa;
  } context{&args, isa};
  detail::gemmRun(detail::gemmTasks(args), threads,
                  args.M * args.N * std::max<int64_t>(args.K, 1),
                  [](const void *c, int64_t t) {
                    const Context &ctx = *static_cast<const Context *>(c);
                    detail::gemmTask(*ctx.args, t, ctx.isa);
                  },
                  &context);
}

void gemm(const GemmArgs &args, int threads) { gemmWithIsa(args, threads, bestGemmIsa()); }

}  // namespace shardc::runtime::cpu
