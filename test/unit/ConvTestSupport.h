// Helpers shared by the convolution kernels' tests (ConvKernelsTest.cpp,
// ConvWeightGradTest.cpp): parameters in one call, and shapes as 3-d.
#pragma once

#include "runtime/OpFamilies.h"

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace shardc::runtime::familytest {

/// ConvParams of `dims` spatial dims; a transposed one's output padding
/// defaults to zeros.
inline ConvParams convParams(int dims, std::vector<int64_t> stride, std::vector<int64_t> pad,
                             std::vector<int64_t> dil, int64_t groups, bool transposed = false,
                             std::vector<int64_t> outPad = {}) {
  ConvParams p;
  p.spatialDims = dims;
  p.stride = std::move(stride);
  p.padding = std::move(pad);
  p.dilation = std::move(dil);
  p.groups = groups;
  p.transposed = transposed;
  p.outputPadding =
      transposed && outPad.empty() ? std::vector<int64_t>(size_t(dims), 0) : std::move(outPad);
  return p;
}

/// The three spatial sizes of a [N, C, *spatial] shape, as 3-d (the
/// missing leading dims are 1).
inline std::array<int64_t, 3> spatial3(const Shape &s) {
  std::array<int64_t, 3> out{1, 1, 1};
  const size_t dims = s.size() - 2;
  for (size_t d = 0; d < dims; ++d) out[3 - dims + d] = s[2 + d];
  return out;
}

}  // namespace shardc::runtime::familytest
