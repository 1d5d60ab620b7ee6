#include "runtime/AtomicFile.h"
#include "runtime/RuntimeError.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace shardc::runtime {

void writeFileAtomically(const std::string &path, std::string_view contents) {
  std::string temp = path + ".tmp." + std::to_string(::getpid());
  auto fail = [&](const std::string &what) {
    std::string reason = std::strerror(errno);
    std::remove(temp.c_str());
    throw RuntimeError("cannot write '" + path + "': " + what + ": " + reason);
  };
  std::FILE *file = std::fopen(temp.c_str(), "wb");
  if (!file) {
    std::string reason = std::strerror(errno);
    throw RuntimeError("cannot write '" + path + "': cannot create '" + temp +
                       "': " + reason);
  }
  bool written = std::fwrite(contents.data(), 1, contents.size(), file) ==
                 contents.size();
  bool closed = std::fclose(file) == 0;
  if (!written || !closed)
    fail("writing '" + temp + "' failed");
  if (std::rename(temp.c_str(), path.c_str()) != 0)
    fail("renaming '" + temp + "' onto it failed");
}

}  // namespace shardc::runtime
