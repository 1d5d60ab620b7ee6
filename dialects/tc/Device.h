//===- Device.h - parsing of original-device strings ------------*- C++ -*-===//
#pragma once

#include "llvm/ADT/StringRef.h"

namespace mlir::tc {

/// True for the device strings a tc.param may record: "cpu", "meta",
/// "cuda", "cpu:N" and "cuda:N" with N a decimal index.
bool isValidDeviceString(llvm::StringRef device);

} // namespace mlir::tc
