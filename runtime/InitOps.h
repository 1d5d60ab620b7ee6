// Index arithmetic and dense linear algebra behind the init instructions the
// executor runs (docs/plan.md: `generate` with an `index_map`, `orthogonal`).
// Errors are RuntimeError with the reason only; the executor prefixes the
// instruction's place.
#pragma once

#include "runtime/IndexMapProgram.h"
#include "runtime/Plan.h"
#include "runtime/init/Generators.h"

#include <cstdint>
#include <vector>

namespace shardc::runtime {

/// A compiled `index_map`: maps a multi-index p of the output's full shape to
/// a multi-index s of the generated (source) tensor.
///
/// Encoding (an int list): [numResults, then per result: L, then L tokens],
/// each result a postfix program over int64. Tokens: `0 k` pushes p[k],
/// `1 c` pushes the constant c, `2` add, `3` mul, `4` floordiv, `5` mod,
/// `6` ceildiv (each pops b, pops a, pushes a OP b). floordiv rounds toward
/// negative infinity, ceildiv toward positive infinity, mod is a - b *
/// floordiv(a, b) (so in [0, b) for b > 0), as MLIR's affine maps define them.
/// L counts list entries (`0 k` and `1 c` are two each).
class IndexMap {
public:
  /// Validates the encoding once: numResults == sourceRank, every program
  /// well-formed (no stack underflow, exactly one value left, dims < inputRank,
  /// no trailing entries). Throws RuntimeError describing the first problem.
  static IndexMap parse(const std::vector<int64_t> &encoding, size_t inputRank,
                        size_t sourceRank);
  /// s = p.
  static IndexMap identity(size_t rank);

  size_t numResults() const { return results_.size(); }
  /// Deepest stack any result needs (for the caller's scratch).
  size_t maxStack() const { return maxStack_; }

  /// s[i] = result i at p. `stack` holds maxStack() entries. Throws on
  /// division or modulo by zero and on int64 overflow.
  void evaluate(const int64_t *p, int64_t *s, int64_t *stack) const;

  /// This map between `fullShape` (the output's) and `sourceShape` as one
  /// fixed-size value a kernel can take (runtime/IndexMapProgram.h), into
  /// `program`; false when the shapes' ranks, the tokens or the stack depth
  /// exceed IndexMapProgram's room (the core then maps on the host).
  bool toProgram(const std::vector<int64_t> &fullShape, const std::vector<int64_t> &sourceShape,
                 IndexMapProgram &program) const;

private:
  struct Token {
    int64_t kind;
    int64_t operand;
  };
  std::vector<std::vector<Token>> results_;
  size_t maxStack_ = 1;
};

/// For the full flat indices [begin, begin + count) of a tensor of shape
/// `fullShape`, out[k] = the row-major flat index in `sourceShape` of
/// map(p(begin + k)). Throws when a mapped index is outside sourceShape.
/// `p` holds fullShape.size() entries and carries the multi-index between
/// consecutive blocks: pass `fresh = true` for the first block.
void mapFlatIndices(const IndexMap &map, const std::vector<int64_t> &fullShape,
                    const std::vector<int64_t> &sourceShape, int64_t begin, int64_t count,
                    int64_t *out, std::vector<int64_t> &p, bool fresh);

/// Bytes of the `<buffer>.qr` working allocation `orthogonal` makes for an
/// output of `shape` and `dtype` (rows = shape[0], cols = product of
/// shape[1:], m = max(rows, cols), n = min): 3n doubles of QR scalars
/// (Householder scalars, R's diagonal, one row of partial products). float32
/// and float64 outputs are factored in place, in their own storage; float16
/// and bfloat16 ones in an m x n float32 matrix, which adds m * n * 4 bytes.
/// -1 when the shape has fewer than 2 dims or the size overflows. Executor
/// and MemoryModel both use it, so the accounting agrees.
int64_t orthogonalWorkBytes(const std::vector<int64_t> &shape, plan::DType dtype);

/// torch's orthogonal_ on the host: `out` (rows x cols of `dtype`, host
/// memory) gets `normal`'s values, factored by householderSignedQ (the
/// transpose when rows < cols) and scaled by `gain`; `work` holds
/// orthogonalWorkBytes({rows, cols}, dtype). The CPU backend's kernel, and
/// the CUDA backend's (on the host, then copied to the GPU).
void orthogonalOnHost(const init::GeneratorSpec &normal, double gain, plan::DType dtype,
                      int64_t rows, int64_t cols, void *out, void *work, int threads);

/// In place: `a` holds an m x n matrix, element (i, j) at a[i * rowStride +
/// j * colStride], m >= n >= 0 (either stride may be 1: a row-major matrix or
/// the transpose of one). On return it holds the thin Q of a Householder QR
/// (LAPACK dgeqr2/dorg2r conventions; products and norms accumulate in
/// double, the matrix stays in T), each column j multiplied by
/// sign(R[j][j]) (sign 0 taken as 1), which makes Q unique as torch's
/// orthogonal_ does. `work` holds 3n doubles. A reflector's update of the
/// columns right of it splits over up to `threads` threads by columns; each
/// column's sums keep their order, so the result is bit-identical for any
/// thread count.
template <class T>
void householderSignedQ(T *a, int64_t m, int64_t n, int64_t rowStride, int64_t colStride,
                        double *work, int threads = 1);
/// A row-major m x n matrix.
template <class T>
void householderSignedQ(T *a, int64_t m, int64_t n, double *work, int threads = 1) {
  householderSignedQ(a, m, n, n, int64_t(1), work, threads);
}

/// Element i of a buffer of `dtype`, as a double (exact).
double loadAsDouble(plan::DType dtype, const void *data, int64_t i);
/// Stores `value` rounded to `dtype` (float16/bfloat16 via float, round to
/// nearest even).
void storeFromDouble(plan::DType dtype, void *data, int64_t i, double value);

}  // namespace shardc::runtime
