#include "runtime/DeviceName.h"

#include <charconv>

namespace shardc::runtime {

std::optional<int> cudaOrdinalOf(const std::string &device) {
  if (device == "cuda") return 0;
  const std::string prefix = "cuda:";
  if (device.rfind(prefix, 0) != 0 || device.size() == prefix.size()) return std::nullopt;
  int ordinal = -1;
  const char *first = device.data() + prefix.size(), *last = device.data() + device.size();
  auto [end, error] = std::from_chars(first, last, ordinal);
  if (error != std::errc() || end != last || ordinal < 0) return std::nullopt;
  return ordinal;
}

}  // namespace shardc::runtime
