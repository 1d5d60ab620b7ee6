// Writing an output file so that it either appears whole or not at all
// (docs/design.md invariant 5: no partial output file, ever).
#pragma once

#include <string>
#include <string_view>

namespace shardc::runtime {

/// Writes `contents` to `path + ".tmp.<pid>"`, flushes it, and renames it
/// onto `path`. On any failure the temporary is removed, `path` is left as it
/// was, and RuntimeError names the path and the reason.
void writeFileAtomically(const std::string &path, std::string_view contents);

}  // namespace shardc::runtime
