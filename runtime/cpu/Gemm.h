// shardc's own float32 GEMM: C = A * op(B) (+ bias), the kernel behind
// linear and matmul (runtime/ForwardKernels.cpp).
//
// Why not OpenBLAS's sgemm: its rounding of a row depends on M (its
// kernels for a tail of rows sum in another order), and a row's result must
// not depend on how many rows share its call, so that a data-parallel
// micro-batch computes its rows bit for bit as the global batch does
// (docs/cli.md, --data-parallel). Working around that meant zero-padding
// every partial row tile to 64 rows (4x the work for 16 token rows) and
// repacking the weight in every tile call.
//
// The invariant this kernel keeps instead: k is cut into groups of kGroupK
// (256) values; within a group every output element is one fma chain
//   chain_g = fma(A[i][k1-1], B[k1-1][j], ... fma(A[i][k0], B[k0][j], start))
// in float32, k in order, and the groups are summed in order:
//   C[i][j] = ((chain_0 + chain_1) + chain_2) + ...
// where chain_0 starts from the bias (or +0) and every later group's chain
// from +0. Its bits depend only on row i of A and column j of op(B): never
// on M, on the tile or block sizes, on the thread count, on which rows
// share a call or on the instruction set (the AVX-512, AVX2+FMA and
// portable std::fma paths give the same bits; test/unit/GemmTest.cpp
// checks all of it).
//
// Why groups: a single chain's rounding error grows with K (its bound is K
// ulps of the terms' magnitudes), which a weight gradient summed over 25,088
// tokens (MViT's first block) made 17x torch's; a BLAS kernel sums a block
// of k in registers from zero and then adds it to C, which is what the
// groups do. The error bound is (kGroupK + K / kGroupK) ulps instead of K.
#pragma once

#include "runtime/Plan.h"

#include <cstdint>

namespace shardc::runtime::cpu {

/// Values of k per chain (the header comment): a GEMM split along K into
/// `accumulate` calls at multiples of it gives one call's bits.
constexpr int64_t kGroupK = 256;

/// A row-major matrix operand: element (i, j) at data[offset + i * ld + j],
/// stored as float32, bfloat16 or float16 (16-bit values are widened to
/// float when packed; the math is float32 either way).
struct GemmOperand {
  plan::DType dtype;
  const void *data;
  int64_t offset, ld;
};

/// One GEMM call. A is M x K (transA: stored as K x M). transB: B holds op(B)^T, N rows of K (a
/// linear's weight); else B is K rows of N. bias (optional, may be null) is
/// N values of biasDtype from element biasOffset. C is M x N of cDtype at
/// element cOffset with leading dimension ldc; each element is rounded to
/// cDtype once.
struct GemmArgs {
  int64_t M, N, K;
  GemmOperand A, B;
  bool transB;
  const void *bias = nullptr;
  plan::DType biasDtype = plan::DType::F32;
  int64_t biasOffset = 0;
  void *C;
  plan::DType cDtype;
  int64_t cOffset, ldc;
  /// Add into C's current value instead of starting from the bias (C
  /// float32; bias ignored): every group's chain, the first too, starts
  /// from +0 and is added to C, so a GEMM split along K into calls made in
  /// order, each but the last a multiple of kGroupK long, gives the bits of
  /// one call over all of K (a weight gradient summed block of rows by
  /// block of rows).
  bool accumulate = false;
  /// A holds op(A)^T: K rows of M (a transposed activation read in place,
  /// as a weight gradient's x^T g reads x). The bits are A's, either way.
  bool transA = false;
};

/// The micro-kernel's instruction set. All give the same bits.
enum class GemmIsa { Portable, Avx2, Avx512 };

/// The fastest path this CPU allows (honours SHARDC_NO_AVX2 / _AVX512 and
/// the runtime/init/CpuDispatch.h switches).
GemmIsa bestGemmIsa();

/// Whether this CPU can run `isa`.
bool gemmIsaSupported(GemmIsa isa);

/// C = A * op(B) (+ bias) on up to `threads` threads (bestGemmIsa()).
void gemm(const GemmArgs &args, int threads);

/// Several GEMMs of the same shape (a batched matmul), split into tasks
/// together. args(b) gives call b.
template <typename ArgsFor> void gemmBatched(int64_t batches, int threads, const ArgsFor &args);

/// gemm on a chosen path (tests; `isa` must be supported).
void gemmWithIsa(const GemmArgs &args, int threads, GemmIsa isa);

namespace detail {
/// Tasks of one call: row blocks x column blocks.
int64_t gemmTasks(const GemmArgs &args);
/// Runs task t of gemmTasks(args) on `isa`.
void gemmTask(const GemmArgs &args, int64_t task, GemmIsa isa);
/// Splits `tasks` tasks of `work` fma's over the threads (parallelTasks).
void gemmRun(int64_t tasks, int threads, int64_t work, void (*fn)(const void *, int64_t),
             const void *context);
}  // namespace detail

template <typename ArgsFor> void gemmBatched(int64_t batches, int threads, const ArgsFor &args) {
  if (batches <= 0) return;
  const GemmArgs first = args(0);
  const int64_t perBatch = detail::gemmTasks(first);
  const GemmIsa isa = bestGemmIsa();
  struct Context {
    const ArgsFor *args;
    int64_t perBatch;
    GemmIsa isa;
  } context{&args, perBatch, isa};
  const int64_t work = batches * first.M * first.N * (first.K > 0 ? first.K : 1);
  detail::gemmRun(batches * perBatch, threads, work,
                  [](const void *c, int64_t t) {
                    const Context &ctx = *static_cast<const Context *>(c);
                    detail::gemmTask((*ctx.args)(t / ctx.perBatch), t % ctx.perBatch, ctx.isa);
                  },
                  &context);
}

}  // namespace shardc::runtime::cpu
