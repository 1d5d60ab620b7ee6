// An index_map (runtime/InitOps.h's IndexMap) together with the two shapes
// it maps between, flattened into one fixed-size value that a kernel takes
// by value, so a device can map every output element to its source element
// itself: a `generate` through an index_map is then one launch, with no
// indices computed on the host and copied over (docs/gpu.md).
//
// Header-only, no std:: containers: mapIndex runs on the host (the unit
// tests hold it to IndexMap::evaluate and mapFlatIndices) and in CUDA
// kernels. It says only *whether* an element maps; the words for a failure
// come from the host's IndexMap, which the executor core runs on the first
// failing element (the same message as when the host maps).
#pragma once

#include "runtime/HostDevice.h"

#include <cstdint>

namespace shardc::runtime {

struct IndexMapProgram {
  // Room for the maps the compiler writes (views of up to 8 dims: permutes,
  // slices, reshapes); IndexMap::toProgram refuses larger ones, which the
  // core then maps on the host.
  static constexpr int kMaxRank = 8;
  static constexpr int kMaxTokens = 128;
  static constexpr int kMaxStack = 16;

  // Token kinds, as IndexMap's encoding numbers them.
  static constexpr int64_t kDim = 0, kConst = 1, kAdd = 2, kMul = 3, kFloorDiv = 4, kMod = 5,
                           kCeilDiv = 6;

  int32_t rank = 0;        // of the output (full shape)
  int32_t sourceRank = 0;  // of the generated tensor = the map's results
  int64_t fullShape[kMaxRank] = {};
  int64_t sourceShape[kMaxRank] = {};
  /// Result r's tokens are [r ? resultEnd[r - 1] : 0, resultEnd[r]).
  int32_t resultEnd[kMaxRank] = {};
  int64_t kind[kMaxTokens] = {};
  int64_t operand[kMaxTokens] = {};
};

namespace indexmap {

inline constexpr int64_t kInt64Max = 0x7fffffffffffffffLL;
inline constexpr int64_t kInt64Min = -kInt64Max - 1;

/// a OP b as IndexMap::evaluate computes it (floordiv toward negative
/// infinity, ceildiv toward positive infinity, mod in [0, b) for b > 0);
/// false where evaluate throws (division or modulo by zero, int64 overflow).
SHARDC_HOST_DEVICE inline bool apply(int64_t op, int64_t a, int64_t b, int64_t *result) {
  switch (op) {
  case IndexMapProgram::kAdd:
    if ((b > 0 && a > kInt64Max - b) || (b < 0 && a < kInt64Min - b)) return false;
    *result = a + b;
    return true;
  case IndexMapProgram::kMul:
    // CERT INT32-C: each sign case against the bound it can cross.
    if (a > 0 ? (b > 0 ? a > kInt64Max / b : b < kInt64Min / a)
              : (b > 0 ? a < kInt64Min / b : (a != 0 && b < kInt64Max / a)))
      return false;
    *result = a * b;
    return true;
  case IndexMapProgram::kFloorDiv:
  case IndexMapProgram::kCeilDiv: {
    if (b == 0 || (a == kInt64Min && b == -1)) return false;
    int64_t q = a / b;
    if (a % b != 0) {
      const bool negative = (a < 0) != (b < 0);
      if (op == IndexMapProgram::kFloorDiv && negative) --q;
      if (op == IndexMapProgram::kCeilDiv && !negative) ++q;
    }
    *result = q;
    return true;
  }
  case IndexMapProgram::kMod: {
    if (b == 0) return false;
    if (b == -1) {
      *result = 0;
      return true;
    }
    int64_t m = a % b;
    if (m != 0 && ((m < 0) != (b < 0))) m += b;
    *result = m;
    return true;
  }
  default: return false;
  }
}

/// The row-major flat index in sourceShape of map(p(flat)), p(flat) being
/// the multi-index of output flat index `flat` (0 <= flat < the output's
/// element count). False when a step fails or the mapped multi-index lies
/// outside sourceShape: mapFlatIndices would throw there.
SHARDC_HOST_DEVICE inline bool mapIndex(const IndexMapProgram &m, int64_t flat,
                                        int64_t *source) {
  int64_t p[IndexMapProgram::kMaxRank];
  for (int d = m.rank - 1; d >= 0; --d) {
    p[d] = m.fullShape[d] ? flat % m.fullShape[d] : 0;
    flat = m.fullShape[d] ? flat / m.fullShape[d] : 0;
  }
  int64_t stack[IndexMapProgram::kMaxStack];
  int64_t out = 0;
  int32_t token = 0;
  for (int r = 0; r < m.sourceRank; ++r) {
    int sp = 0;
    for (; token < m.resultEnd[r]; ++token) {
      const int64_t kind = m.kind[token];
      if (kind == IndexMapProgram::kDim) {
        stack[sp++] = p[m.operand[token]];
      } else if (kind == IndexMapProgram::kConst) {
        stack[sp++] = m.operand[token];
      } else {
        const int64_t b = stack[--sp];
        if (!apply(kind, stack[sp - 1], b, &stack[sp - 1])) return false;
      }
    }
    const int64_t s = stack[0];
    if (s < 0 || s >= m.sourceShape[r]) return false;
    out = out * m.sourceShape[r] + s;
  }
  *source = out;
  return true;
}

}  // namespace indexmap
}  // namespace shardc::runtime
