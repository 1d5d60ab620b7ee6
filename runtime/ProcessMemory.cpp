#include "runtime/ProcessMemory.h"

#include <cstdio>
#include <cstring>

namespace shardc::runtime {
namespace {

/// The "KEY:   N kB" line of /proc/self/status, in bytes.
int64_t statusBytes(const char *key) {
  std::FILE *file = std::fopen("/proc/self/status", "r");
  if (!file) return -1;
  char line[256];
  int64_t bytes = -1;
  const size_t length = std::strlen(key);
  while (std::fgets(line, sizeof line, file)) {
    long long kib = 0;
    if (std::strncmp(line, key, length) == 0 && line[length] == ':' &&
        std::sscanf(line + length + 1, "%lld", &kib) == 1) {
      bytes = static_cast<int64_t>(kib) * 1024;
      break;
    }
  }
  std::fclose(file);
  return bytes;
}

}  // namespace

int64_t residentBytes() { return statusBytes("VmRSS"); }

int64_t peakResidentBytes() { return statusBytes("VmHWM"); }

bool resetPeakResident() {
  std::FILE *file = std::fopen("/proc/self/clear_refs", "w");
  if (!file) return false;
  const bool written = std::fputs("5", file) >= 0;
  return std::fclose(file) == 0 && written;
}

}  // namespace shardc::runtime
