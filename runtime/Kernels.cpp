#include "runtime/Kernels.h"

#include "runtime/ForwardKernels.h"
#include "runtime/HalfFloat.h"
#include "runtime/RuntimeError.h"

#include <algorithm>
#include <cstring>

namespace shardc::runtime {
using plan::DType;

namespace {

template <typename T> void fillAs(void *data, int64_t elements, T value) {
  std::fill_n(static_cast<T *>(data), elements, value);
}

}  // namespace

std::string shapeToString(const Shape &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void fill(DType dtype, void *data, int64_t elements, double value) {
  if (elements <= 0) return;
  switch (dtype) {
  case DType::F32: return fillAs<float>(data, elements, static_cast<float>(value));
  case DType::F64: return fillAs<double>(data, elements, value);
  case DType::F16:
    return fillAs<uint16_t>(data, elements, floatToHalfBits(static_cast<float>(value)));
  case DType::BF16:
    return fillAs<uint16_t>(data, elements, floatToBFloat16Bits(static_cast<float>(value)));
  case DType::I64: return fillAs<int64_t>(data, elements, static_cast<int64_t>(value));
  }
}

void shardedFill(DType dtype, void *data, int64_t localElements, int64_t validRows,
                 int64_t rowElements, double value) {
  const int64_t valid = std::clamp<int64_t>(validRows * rowElements, 0, localElements);
  fill(dtype, data, valid, value);
  std::memset(static_cast<std::byte *>(data) + valid * plan::dtypeSize(dtype), 0,
              static_cast<size_t>((localElements - valid) * plan::dtypeSize(dtype)));
}

std::optional<Shape> broadcastShapes(const Shape &a, const Shape &b) {
  Shape out(std::max(a.size(), b.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[out.size() - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> broadcastStrides(const Shape &shape, size_t rank) {
  std::vector<int64_t> strides(rank, 0);
  int64_t stride = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    const size_t dim = shape.size() - 1 - i, outDim = rank - 1 - i;
    strides[outDim] = shape[dim] == 1 ? 0 : stride;
    stride *= shape[dim];
  }
  return strides;
}

void add(DType dtype, const void *a, const Shape &aShape, const void *b, const Shape &bShape,
         void *out, const Shape &outShape) {
  binaryKernel(BinaryOp::Add, {dtype, aShape, const_cast<void *>(a)},
               {dtype, bShape, const_cast<void *>(b)}, {dtype, outShape, out}, 1);
}

}  // namespace shardc::runtime
