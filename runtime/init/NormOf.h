// A derived parameter's init: the 2-norm of another parameter's initial
// values over some of its dims (weight norm: g = ||v|| with v's dims but one
// reduced). The source is never materialized whole: its generator and
// pointwise ops are replayed block by block (every element is a pure
// function of its flat index, runtime/init/Generators.h), and each output
// element's squares are summed in double in the source's row-major order.
// That order depends on the source's shape only, so every rank, every world
// size and every thread count gets the same bytes.
#pragma once

#include "runtime/Plan.h"
#include "runtime/init/Generators.h"
#include "runtime/init/Pointwise.h"

#include <cstdint>
#include <vector>

namespace shardc::runtime::init {

/// How the source parameter's values are made: its generator (spec.shape is
/// its full shape) and the in-place pointwise ops after it, in order.
struct NormOfSource {
  struct Step {
    PointwiseKind kind;
    double a = 0, b = 0;
  };
  GeneratorSpec generator;
  std::vector<Step> pointwise;
  plan::DType dtype = plan::DType::F32;
};

/// Source elements regenerated per block (the block is part of the workspace).
inline constexpr int64_t kNormOfBlockElements = 16384;

/// Workspace bytes for an output of `outputElements` (this rank's storage):
/// one double sum per element and one source block in the widest dtype.
inline int64_t normOfWorkBytes(int64_t outputElements) {
  return (outputElements + kNormOfBlockElements) * 8;
}

/// Elements [begin, begin + count) (flat, row-major, in the norm's shape:
/// the source's with `dims` kept as size 1) into `out` as `outDtype`, each
/// rounded once. `work` holds normOfWorkBytes(count). `dims` are
/// non-negative and distinct (the graph reader checks them).
void normOf(const NormOfSource &source, const std::vector<int64_t> &dims, int64_t begin,
            int64_t count, plan::DType outDtype, void *out, void *work);

}  // namespace shardc::runtime::init
