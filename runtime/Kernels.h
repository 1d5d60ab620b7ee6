// CPU kernels used by the executor. Shapes are row-major and contiguous.
// Kernels throw RuntimeError with the reason only; the executor prefixes the
// instruction's place.
#pragma once

#include "runtime/Plan.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace shardc::runtime {

using Shape = std::vector<int64_t>;

/// Writes `value` to `elements` elements. float16/bfloat16 convert the value
/// to float first, then round to nearest even (as PyTorch's fill_ does).
void fill(plan::DType dtype, void *data, int64_t elements, double value);

/// The fill of a dim-0 shard: the first validRows * rowElements elements get
/// `value`, the remaining padding of the local buffer (localElements) is
/// zeroed, so padding is deterministic and never leaks stale memory.
void shardedFill(plan::DType dtype, void *data, int64_t localElements, int64_t validRows,
                 int64_t rowElements, double value);

/// numpy broadcasting; nullopt when the shapes are incompatible.
std::optional<Shape> broadcastShapes(const Shape &a, const Shape &b);
/// Element strides of row-major `shape` read as an operand of a rank-`rank`
/// broadcast result: 0 on the dims it is broadcast along (size 1 or absent).
std::vector<int64_t> broadcastStrides(const Shape &shape, size_t rank);

/// out = a + b with numpy broadcasting, float32, float64 and bfloat16
/// (binaryKernel, one thread). outShape must be
/// the broadcast of aShape and bShape. `out` may alias `a` or `b` only when
/// its shape equals theirs.
void add(plan::DType dtype, const void *a, const Shape &aShape, const void *b,
         const Shape &bShape, void *out, const Shape &outShape);

std::string shapeToString(const Shape &shape);

}  // namespace shardc::runtime
