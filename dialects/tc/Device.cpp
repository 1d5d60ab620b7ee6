//===- Device.cpp - parsing of original-device strings --------------------===//
#include "dialects/tc/Device.h"

#include "llvm/ADT/StringExtras.h"

bool mlir::tc::isValidDeviceString(llvm::StringRef device) {
  auto [kind, index] = device.split(':');
  if (kind != "cpu" && kind != "cuda" && kind != "meta")
    return false;
  if (!device.contains(':'))
    return true;
  // "meta" has no index; an index is a non-empty run of digits.
  return kind != "meta" && !index.empty() &&
         llvm::all_of(index, llvm::isDigit) && index.size() <= 9;
}
