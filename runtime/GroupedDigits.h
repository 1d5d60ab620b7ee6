// Byte counts as people read them in reports and errors.
#pragma once

#include <cstdint>
#include <string>

namespace shardc::runtime {

/// 6291460 -> "6,291,460".
inline std::string groupedDigits(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

}  // namespace shardc::runtime
