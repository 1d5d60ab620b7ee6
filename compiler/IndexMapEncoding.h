//===- IndexMapEncoding.h - affine index maps for the runtime ---*- C++ -*-===//
//
// The runtime does not link MLIR, so a generator's index map travels in the
// Plan as integers (docs/plan.md): [numResults, then per result its length L
// and L postfix tokens]: `0 k` dim k, `1 c` constant c, `2` add, `3` mul,
// `4` floordiv, `5` mod, `6` ceildiv.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/IR/AffineMap.h"

#include <cstdint>
#include <vector>

namespace shardc::compiler {

std::vector<int64_t> encodeIndexMap(mlir::AffineMap map);

} // namespace shardc::compiler
