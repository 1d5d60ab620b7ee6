// Whole-range positional reads and writes: pread/pwrite loop until every
// byte moved, retry EINTR, and cap each call at 1 GiB (Linux moves at most
// about 2 GiB per call). Shared by the checkpoint reader, index and writer.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>

#include <unistd.h>

namespace shardc::runtime::checkpoint {

/// Reads exactly `size` bytes at `offset`; false at end of file or on error.
inline bool preadFully(int fd, void *out, size_t size, uint64_t offset) {
  auto *p = static_cast<std::byte *>(out);
  while (size > 0) {
    size_t piece = std::min<size_t>(size, size_t(1) << 30);
    ssize_t n = ::pread(fd, p, piece, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return true;
}

/// Writes exactly `size` bytes at `offset`; false on error.
inline bool pwriteFully(int fd, const void *data, size_t size, uint64_t offset) {
  auto *p = static_cast<const std::byte *>(data);
  while (size > 0) {
    size_t piece = std::min<size_t>(size, size_t(1) << 30);
    ssize_t n = ::pwrite(fd, p, piece, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return true;
}

}  // namespace shardc::runtime::checkpoint
