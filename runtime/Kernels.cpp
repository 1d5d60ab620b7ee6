#include "runtime/Kernels.h"

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

template <typename T>
void addTyped(const T *a, const Shape &aShape, const T *b, const Shape &bShape, T *out,
              const Shape &outShape) {
  const int64_t total = plan::numElements(outShape);
  if (total == 0) return;
  const int64_t aCount = plan::numElements(aShape), bCount = plan::numElements(bShape);
  // Fast paths: the common elementwise and scalar cases vectorize well.
  if (aCount == total && bCount == total) {
    for (int64_t i = 0; i < total; ++i) out[i] = a[i] + b[i];
    return;
  }
  if (bCount == 1 && aCount == total) {
    const T s = b[0];
    for (int64_t i = 0; i < total; ++i) out[i] = a[i] + s;
    return;
  }
  if (aCount == 1 && bCount == total) {
    const T s = a[0];
    for (int64_t i = 0; i < total; ++i) out[i] = s + b[i];
    return;
  }
  // General case: strides with 0 on broadcast dims, inner dim contiguous loop.
  const size_t rank = outShape.size();
  auto stridesFor = [&](const Shape &shape) {
    std::vector<int64_t> strides(rank, 0);
    int64_t stride = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      size_t dim = shape.size() - 1 - i, outDim = rank - 1 - i;
      strides[outDim] = shape[dim] == 1 ? 0 : stride;
      stride *= shape[dim];
    }
    return strides;
  };
  const std::vector<int64_t> as = stridesFor(aShape), bs = stridesFor(bShape);
  const int64_t inner = outShape[rank - 1], ai = as[rank - 1], bi = bs[rank - 1];
  std::vector<int64_t> index(rank, 0);
  int64_t aOffset = 0, bOffset = 0;
  for (int64_t o = 0; o < total; o += inner) {
    for (int64_t j = 0; j < inner; ++j) out[o + j] = a[aOffset + j * ai] + b[bOffset + j * bi];
    for (size_t d = rank - 1; d-- > 0;) {
      aOffset += as[d];
      bOffset += bs[d];
      if (++index[d] < outShape[d]) break;
      aOffset -= as[d] * outShape[d];
      bOffset -= bs[d] * outShape[d];
      index[d] = 0;
    }
  }
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

void add(DType dtype, const void *a, const Shape &aShape, const void *b, const Shape &bShape,
         void *out, const Shape &outShape) {
  auto expected = broadcastShapes(aShape, bShape);
  if (!expected)
    throw RuntimeError("add: shapes " + shapeToString(aShape) + " and " +
                       shapeToString(bShape) + " do not broadcast");
  if (*expected != outShape)
    throw RuntimeError("add: output shape " + shapeToString(outShape) +
                       " is not the broadcast shape " + shapeToString(*expected));
  switch (dtype) {
  case DType::F32:
    return addTyped(static_cast<const float *>(a), aShape, static_cast<const float *>(b),
                    bShape, static_cast<float *>(out), outShape);
  case DType::F64:
    return addTyped(static_cast<const double *>(a), aShape, static_cast<const double *>(b),
                    bShape, static_cast<double *>(out), outShape);
  default:
    throw RuntimeError(std::string("add: dtype ") + plan::dtypeName(dtype) +
                       " is not supported (float32 and float64 are)");
  }
}

}  // namespace shardc::runtime
