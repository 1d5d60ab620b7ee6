// The 3-d view of convolution and pooling shapes, shared by their CPU and
// CUDA kernels: an op over 1 or 2 spatial dims is one over 3 whose missing
// leading spatial dims have size 1 (stride 1, no padding, dilation 1), so
// one kernel serves every rank.
#pragma once

#include "runtime/OpFamilies.h"

#include <array>
#include <cstdint>
#include <vector>

namespace shardc::runtime {

/// Size d (0 depth, 1 height, 2 width) of a shape whose last `dims` dims are
/// spatial, in the 3-d view.
inline int64_t spatialSize(const Shape &s, int dims, int d) {
  return d < 3 - dims ? int64_t(1) : s[s.size() - 3 + static_cast<size_t>(d)];
}

/// Entry d (0 depth, 1 height, 2 width) of a per-spatial-dim parameter with
/// `dims` entries, in the 3-d view; `none` for a missing leading dim or an
/// empty vector (torch's defaults).
inline int64_t spatialParam(const std::vector<int64_t> &v, int dims, int d, int64_t none) {
  const int lead = 3 - dims;
  return v.empty() || d < lead ? none : v[static_cast<size_t>(d - lead)];
}

/// All three sizes (depth, height, width) of the 3-d view.
inline std::array<int64_t, 3> spatialSizes(const Shape &s, int dims) {
  return {spatialSize(s, dims, 0), spatialSize(s, dims, 1), spatialSize(s, dims, 2)};
}

/// All three entries (depth, height, width) of a parameter in the 3-d view.
inline std::array<int64_t, 3> spatialParams(const std::vector<int64_t> &v, int dims,
                                            int64_t none) {
  return {spatialParam(v, dims, 0, none), spatialParam(v, dims, 1, none),
          spatialParam(v, dims, 2, none)};
}

/// Assigns the three entries of v to d, h, w (a geometry's named fields).
inline void set3(int64_t &d, int64_t &h, int64_t &w, const std::array<int64_t, 3> &v) {
  d = v[0];
  h = v[1];
  w = v[2];
}

}  // namespace shardc::runtime
