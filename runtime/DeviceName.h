// The device names users give where ranks should run (`shardc run
// --device`, the JIT API's JitOptions::device): "cpu", "cuda" (GPU 0) or
// "cuda:N". One parser, so both accept the same names.
#pragma once

#include <optional>
#include <string>

namespace shardc::runtime {

/// The GPU ordinal of "cuda" (0) or "cuda:N" (N, decimal, >= 0); nullopt
/// for anything else ("cpu" included).
std::optional<int> cudaOrdinalOf(const std::string &device);

}  // namespace shardc::runtime
