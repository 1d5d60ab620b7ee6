// The one exception type the runtime throws.
//
// Every message names the place (function, instruction index + op + loc,
// buffer, file, JSON path) and the reason, so a user can act on it without a
// debugger (docs/design.md invariant 5).
#pragma once

#include <stdexcept>
#include <string>

namespace shardc::runtime {

class RuntimeError : public std::runtime_error {
public:
  explicit RuntimeError(const std::string &message)
      : std::runtime_error(message) {}
};

}  // namespace shardc::runtime
