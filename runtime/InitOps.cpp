#include "runtime/InitOps.h"

#include "runtime/HalfFloat.h"
#include "runtime/Kernels.h"
#include "runtime/RuntimeError.h"
#include "runtime/init/Generators.h"
#include "runtime/init/RoundTeam.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

namespace shardc::runtime {
using plan::DType;

namespace {

enum TokenKind : int64_t { kDim = 0, kConst = 1, kAdd = 2, kMul = 3, kFloorDiv = 4,
                           kMod = 5, kCeilDiv = 6 };
// A kernel's program (IndexMapProgram.h) speaks the same tokens.
static_assert(kDim == IndexMapProgram::kDim && kConst == IndexMapProgram::kConst &&
              kAdd == IndexMapProgram::kAdd && kMul == IndexMapProgram::kMul &&
              kFloorDiv == IndexMapProgram::kFloorDiv && kMod == IndexMapProgram::kMod &&
              kCeilDiv == IndexMapProgram::kCeilDiv);

[[noreturn]] void badMap(size_t entry, const std::string &reason) {
  throw RuntimeError("malformed index_map: entry " + std::to_string(entry) + ": " + reason);
}

[[noreturn]] void overflow(const char *op, int64_t a, int64_t b) {
  throw RuntimeError(std::string("index_map: ") + op + " of " + std::to_string(a) + " and " +
                     std::to_string(b) + " overflows int64");
}

int64_t floorDiv(int64_t a, int64_t b) {
  if (b == 0) throw RuntimeError("index_map: floordiv of " + std::to_string(a) + " by zero");
  if (a == std::numeric_limits<int64_t>::min() && b == -1) overflow("floordiv", a, b);
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t ceilDiv(int64_t a, int64_t b) {
  if (b == 0) throw RuntimeError("index_map: ceildiv of " + std::to_string(a) + " by zero");
  if (a == std::numeric_limits<int64_t>::min() && b == -1) overflow("ceildiv", a, b);
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) == (b < 0))) ++q;
  return q;
}

int64_t mod(int64_t a, int64_t b) {
  if (b == 0) throw RuntimeError("index_map: mod of " + std::to_string(a) + " by zero");
  if (b == -1) return 0;
  int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

}  // namespace

IndexMap IndexMap::parse(const std::vector<int64_t> &encoding, size_t inputRank,
                         size_t sourceRank) {
  if (encoding.empty()) badMap(0, "the list is empty (it starts with the number of results)");
  if (encoding[0] < 0 || static_cast<uint64_t>(encoding[0]) != sourceRank)
    badMap(0, std::to_string(encoding[0]) + " results, but source_shape has rank " +
                  std::to_string(sourceRank));
  IndexMap map;
  size_t pos = 1;
  const size_t size = encoding.size();
  for (size_t r = 0; r < sourceRank; ++r) {
    if (pos >= size)
      badMap(pos, "the list ends before result " + std::to_string(r) + "'s length");
    const int64_t length = encoding[pos];
    if (length < 1 || static_cast<uint64_t>(length) > size - pos - 1)
      badMap(pos, "result " + std::to_string(r) + " has length " + std::to_string(length) +
                      ", but " + std::to_string(size - pos - 1) + " entries follow");
    ++pos;
    const size_t end = pos + static_cast<size_t>(length);
    std::vector<Token> tokens;
    size_t depth = 0;
    while (pos < end) {
      const size_t at = pos;
      const int64_t kind = encoding[pos++];
      switch (kind) {
      case kDim:
      case kConst: {
        if (pos >= end)
          badMap(at, std::string("token ") + (kind == kDim ? "0 (dim)" : "1 (constant)") +
                         " has no operand inside result " + std::to_string(r));
        const int64_t operand = encoding[pos++];
        if (kind == kDim && (operand < 0 || static_cast<uint64_t>(operand) >= inputRank))
          badMap(at + 1, "dim " + std::to_string(operand) + " out of range for an output of rank " +
                             std::to_string(inputRank));
        tokens.push_back({kind, operand});
        map.maxStack_ = std::max(map.maxStack_, ++depth);
        break;
      }
      case kAdd:
      case kMul:
      case kFloorDiv:
      case kMod:
      case kCeilDiv:
        if (depth < 2)
          badMap(at, "operator " + std::to_string(kind) + " needs two operands, the stack has " +
                         std::to_string(depth));
        --depth;
        tokens.push_back({kind, 0});
        break;
      default:
        badMap(at, "unknown token " + std::to_string(kind) +
                       " (0 dim, 1 constant, 2 add, 3 mul, 4 floordiv, 5 mod, 6 ceildiv)");
      }
    }
    if (depth != 1)
      badMap(end - 1, "result " + std::to_string(r) + " leaves " + std::to_string(depth) +
                          " values on the stack (must be exactly 1)");
    map.results_.push_back(std::move(tokens));
  }
  if (pos != size)
    badMap(pos, std::to_string(size - pos) + " trailing entries after the last result");
  return map;
}

IndexMap IndexMap::identity(size_t rank) {
  IndexMap map;
  for (size_t d = 0; d < rank; ++d) map.results_.push_back({{kDim, static_cast<int64_t>(d)}});
  return map;
}

void IndexMap::evaluate(const int64_t *p, int64_t *s, int64_t *stack) const {
  for (size_t r = 0; r < results_.size(); ++r) {
    size_t sp = 0;
    for (const Token &t : results_[r]) {
      if (t.kind == kDim) {
        stack[sp++] = p[t.operand];
        continue;
      }
      if (t.kind == kConst) {
        stack[sp++] = t.operand;
        continue;
      }
      const int64_t b = stack[--sp], a = stack[sp - 1];
      int64_t v = 0;
      switch (t.kind) {
      case kAdd:
        if (__builtin_add_overflow(a, b, &v)) overflow("add", a, b);
        break;
      case kMul:
        if (__builtin_mul_overflow(a, b, &v)) overflow("mul", a, b);
        break;
      case kFloorDiv: v = floorDiv(a, b); break;
      case kMod: v = mod(a, b); break;
      case kCeilDiv: v = ceilDiv(a, b); break;
      }
      stack[sp - 1] = v;
    }
    s[r] = stack[0];
  }
}

bool IndexMap::toProgram(const std::vector<int64_t> &fullShape,
                         const std::vector<int64_t> &sourceShape, IndexMapProgram &program) const {
  if (fullShape.size() > IndexMapProgram::kMaxRank ||
      sourceShape.size() > IndexMapProgram::kMaxRank || sourceShape.size() != results_.size() ||
      maxStack_ > static_cast<size_t>(IndexMapProgram::kMaxStack))
    return false;
  program = IndexMapProgram{};
  program.rank = static_cast<int32_t>(fullShape.size());
  program.sourceRank = static_cast<int32_t>(sourceShape.size());
  std::copy(fullShape.begin(), fullShape.end(), program.fullShape);
  std::copy(sourceShape.begin(), sourceShape.end(), program.sourceShape);
  int32_t token = 0;
  for (size_t r = 0; r < results_.size(); ++r) {
    for (const Token &t : results_[r]) {
      if (token == IndexMapProgram::kMaxTokens) return false;
      if (t.kind == kDim && static_cast<size_t>(t.operand) >= fullShape.size()) return false;
      program.kind[token] = t.kind;
      program.operand[token] = t.operand;
      ++token;
    }
    program.resultEnd[r] = token;
  }
  return true;
}

void mapFlatIndices(const IndexMap &map, const std::vector<int64_t> &fullShape,
                    const std::vector<int64_t> &sourceShape, int64_t begin, int64_t count,
                    int64_t *out, std::vector<int64_t> &p, bool fresh) {
  const size_t rank = fullShape.size(), sourceRank = sourceShape.size();
  if (fresh) {
    p.assign(rank, 0);
    int64_t rest = begin;
    for (size_t d = rank; d-- > 0;) {
      p[d] = fullShape[d] ? rest % fullShape[d] : 0;
      rest = fullShape[d] ? rest / fullShape[d] : 0;
    }
  }
  std::vector<int64_t> stack(map.maxStack()), s(sourceRank);
  for (int64_t k = 0; k < count; ++k) {
    map.evaluate(p.data(), s.data(), stack.data());
    int64_t flat = 0;
    for (size_t d = 0; d < sourceRank; ++d) {
      if (s[d] < 0 || s[d] >= sourceShape[d]) {
        std::string message = "index_map sends output element " + shapeToString(p) +
                              " to " + shapeToString(s) + ", outside source_shape " +
                              shapeToString(sourceShape);
        throw RuntimeError(message);
      }
      flat = flat * sourceShape[d] + s[d];
    }
    out[k] = flat;
    for (size_t d = rank; d-- > 0;) {
      if (++p[d] < fullShape[d]) break;
      p[d] = 0;
    }
  }
}

int64_t orthogonalWorkBytes(const std::vector<int64_t> &shape, DType dtype) {
  if (shape.size() < 2) return -1;
  int64_t cols = 1;
  for (size_t d = 1; d < shape.size(); ++d)
    if (shape[d] < 0 || __builtin_mul_overflow(cols, shape[d], &cols)) return -1;
  const int64_t rows = shape[0];
  if (rows < 0) return -1;
  const int64_t m = std::max(rows, cols), n = std::min(rows, cols);
  int64_t scalars = 0, matrix = 0, total = 0;
  if (__builtin_mul_overflow(n, int64_t(3 * 8), &scalars)) return -1;
  if (dtype == DType::F16 || dtype == DType::BF16)
    if (__builtin_mul_overflow(m, n, &matrix) || __builtin_mul_overflow(matrix, int64_t(4), &matrix))
      return -1;
  if (__builtin_add_overflow(scalars, matrix, &total)) return -1;
  return total;
}

template <class T>
void householderSignedQ(T *a, int64_t m, int64_t n, int64_t rowStride, int64_t colStride,
                        double *work, int threads) {
  double *tau = work, *rdiag = work + n, *w = work + 2 * n;
  auto at = [&](int64_t i, int64_t j) -> T & { return a[i * rowStride + j * colStride]; };
  // Applies H = I - t v v^T (v = (1, a[k+1:m, k])) to the columns [j0, j1)
  // of a[k:m, :], j0 > k. Each w[j] sums over i in increasing order in both
  // loop orders, so neither the order (chosen for contiguous access) nor
  // the split into column ranges ever changes the result.
  auto reflectColumns = [&](int64_t k, double t, int64_t j0, int64_t j1) {
    if (colStride == 1) {  // rows contiguous: sweep row by row
      for (int64_t j = j0; j < j1; ++j) w[j] = at(k, j);
      for (int64_t i = k + 1; i < m; ++i) {
        const double vi = at(i, k);
        const T *row = &at(i, 0);
        for (int64_t j = j0; j < j1; ++j) w[j] += vi * static_cast<double>(row[j]);
      }
      for (int64_t j = j0; j < j1; ++j) {
        w[j] *= t;
        at(k, j) = static_cast<T>(at(k, j) - w[j]);
      }
      for (int64_t i = k + 1; i < m; ++i) {
        const double vi = at(i, k);
        T *row = &at(i, 0);
        for (int64_t j = j0; j < j1; ++j) row[j] = static_cast<T>(row[j] - vi * w[j]);
      }
      return;
    }
    for (int64_t j = j0; j < j1; ++j) {  // columns contiguous: column by column
      double sum = at(k, j);
      for (int64_t i = k + 1; i < m; ++i) sum += static_cast<double>(at(i, k)) * at(i, j);
      const double wj = sum * t;
      at(k, j) = static_cast<T>(at(k, j) - wj);
      for (int64_t i = k + 1; i < m; ++i)
        at(i, j) = static_cast<T>(at(i, j) - static_cast<double>(at(i, k)) * wj);
    }
  };
  // The QR is 2n such updates of up to m x n elements: O(m n^2), most of
  // orthogonal's time. A team of threads (started once, for the whole QR)
  // takes column ranges of every update big enough to beat waking it.
  constexpr int64_t kParallelElements = int64_t(1) << 15;
  std::optional<init::RoundTeam> team;
  if (threads > 1 && m * n >= kParallelElements) team.emplace(threads);
  auto reflect = [&](int64_t k, double t) {
    if (t == 0 || k + 1 >= n) return;
    const int64_t first = k + 1, columns = n - first;
    if (!team || (m - k) * columns < kParallelElements) {
      reflectColumns(k, t, first, n);
      return;
    }
    const int64_t parts = std::min<int64_t>(team->size(), columns);
    auto partBegin = [&](int64_t p) {
      return first + columns / parts * p + std::min(p, columns % parts);
    };
    team->run([&](int part) {
      if (part < parts) reflectColumns(k, t, partBegin(part), partBegin(part + 1));
    });
  };
  // Factor (LAPACK dgeqr2 / dlarfg conventions).
  for (int64_t k = 0; k < n; ++k) {
    const double alpha = at(k, k);
    double scale = 0;
    for (int64_t i = k + 1; i < m; ++i) scale = std::max(scale, std::abs(double(at(i, k))));
    double xnorm = 0;
    if (scale > 0) {
      double sum = 0;
      for (int64_t i = k + 1; i < m; ++i) {
        const double x = at(i, k) / scale;
        sum += x * x;
      }
      xnorm = scale * std::sqrt(sum);
    }
    if (xnorm == 0) {  // H = I
      tau[k] = 0;
      rdiag[k] = alpha;
      continue;
    }
    const double beta = -std::copysign(std::hypot(alpha, xnorm), alpha);
    tau[k] = (beta - alpha) / beta;
    const double inv = 1 / (alpha - beta);
    for (int64_t i = k + 1; i < m; ++i) at(i, k) = static_cast<T>(at(i, k) * inv);
    rdiag[k] = beta;
    reflect(k, tau[k]);
  }
  // Form the thin Q in place (dorg2r), last reflector first.
  for (int64_t k = n; k-- > 0;) {
    reflect(k, tau[k]);
    for (int64_t i = k + 1; i < m; ++i) at(i, k) = static_cast<T>(at(i, k) * -tau[k]);
    at(k, k) = static_cast<T>(1 - tau[k]);
    for (int64_t i = 0; i < k; ++i) at(i, k) = 0;
  }
  // Q * sign(diag(R)), sign 0 -> 1: the unique Q with a positive-diagonal R.
  for (int64_t j = 0; j < n; ++j)
    if (rdiag[j] < 0)
      for (int64_t i = 0; i < m; ++i) at(i, j) = -at(i, j);
}

template void householderSignedQ<float>(float *, int64_t, int64_t, int64_t, int64_t, double *,
                                        int);
template void householderSignedQ<double>(double *, int64_t, int64_t, int64_t, int64_t, double *,
                                         int);

double loadAsDouble(DType dtype, const void *data, int64_t i) {
  switch (dtype) {
  case DType::F32: return static_cast<const float *>(data)[i];
  case DType::F64: return static_cast<const double *>(data)[i];
  case DType::F16: return halfBitsToFloat(static_cast<const uint16_t *>(data)[i]);
  case DType::BF16: return bfloat16BitsToFloat(static_cast<const uint16_t *>(data)[i]);
  case DType::I64: return static_cast<double>(static_cast<const int64_t *>(data)[i]);
  }
  return 0;
}

void storeFromDouble(DType dtype, void *data, int64_t i, double value) {
  switch (dtype) {
  case DType::F32: static_cast<float *>(data)[i] = static_cast<float>(value); return;
  case DType::F64: static_cast<double *>(data)[i] = value; return;
  case DType::F16:
    static_cast<uint16_t *>(data)[i] = floatToHalfBits(static_cast<float>(value));
    return;
  case DType::BF16:
    static_cast<uint16_t *>(data)[i] = floatToBFloat16Bits(static_cast<float>(value));
    return;
  case DType::I64: static_cast<int64_t *>(data)[i] = static_cast<int64_t>(value); return;
  }
}

void orthogonalOnHost(const init::GeneratorSpec &normal, double gain, DType dtype, int64_t rows,
                      int64_t cols, void *outData, void *work, int threads) {
  std::byte *out = static_cast<std::byte *>(outData);
  init::generateRange(normal, dtype, 0, rows * cols, out, threads);
  // torch factors flattened (rows >= cols) or its transpose. The row-major
  // rows x cols buffer read with strides (1, cols) *is* the transpose, so
  // the QR runs in place either way, with no transposed copy.
  const bool transposed = rows < cols;
  const int64_t m = transposed ? cols : rows, n = transposed ? rows : cols;
  const int64_t rowStride = transposed ? 1 : cols, colStride = transposed ? cols : 1;
  double *scalars = static_cast<double *>(work);
  const int64_t count = rows * cols;
  auto factor = [&](auto *q) {
    householderSignedQ(q, m, n, rowStride, colStride, scalars, threads);
    using T = std::remove_pointer_t<decltype(q)>;
    for (int64_t i = 0; i < count; ++i) q[i] = static_cast<T>(gain * q[i]);
  };
  if (dtype == DType::F32) {
    factor(reinterpret_cast<float *>(out));
  } else if (dtype == DType::F64) {
    factor(reinterpret_cast<double *>(out));
  } else {  // half types: a float32 copy of the matrix after the scalars
    float *q = reinterpret_cast<float *>(scalars + 3 * n);
    for (int64_t i = 0; i < count; ++i) q[i] = static_cast<float>(loadAsDouble(dtype, out, i));
    householderSignedQ(q, m, n, rowStride, colStride, scalars, threads);
    for (int64_t i = 0; i < count; ++i) storeFromDouble(dtype, out, i, gain * q[i]);
  }
}

}  // namespace shardc::runtime
