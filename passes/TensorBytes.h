//===- TensorBytes.h - the bytes a tensor type holds ------------*- C++ -*-===//
#pragma once

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/MathExtras.h"

#include <cstdint>

namespace mlir::tc {

/// A static tensor type's bytes (0 for any other type): what a parameter
/// or a value of that type holds (tc-assign-units' unit sizes, tc-fsdp's
/// owners, tc-narrow-unit-runs' estimate).
inline int64_t tensorBytes(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return 0;
  return tensor.getNumElements() * static_cast<int64_t>(llvm::divideCeil(
                                       tensor.getElementTypeBitWidth(), 8));
}

} // namespace mlir::tc
