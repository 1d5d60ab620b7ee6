// A named tensor in ordinary host memory: inputs, outputs, checkpoint
// contents. Row-major, contiguous; data.size() == numElements(shape) * dtypeSize.
#pragma once

#include "runtime/Plan.h"

#include <cstddef>
#include <string>
#include <vector>

namespace shardc::runtime {

struct HostTensor {
  std::string name;
  plan::DType dtype = plan::DType::F32;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;

  int64_t numElements() const { return plan::numElements(shape); }
  int64_t expectedBytes() const { return numElements() * plan::dtypeSize(dtype); }
  template <typename T> const T *as() const { return reinterpret_cast<const T *>(data.data()); }
  template <typename T> T *as() { return reinterpret_cast<T *>(data.data()); }
};

}  // namespace shardc::runtime
