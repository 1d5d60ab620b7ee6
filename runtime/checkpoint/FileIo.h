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

namespace detail {
/// Calls `move(p, piece, offset)` (a pread or a pwrite) until `size` bytes
/// moved; false when a call moves nothing or fails with other than EINTR.
template <typename Byte, typename Move>
bool moveFully(Byte *p, size_t size, uint64_t offset, Move move) {
  while (size > 0) {
    size_t piece = std::min<size_t>(size, size_t(1) << 30);
    ssize_t n = move(p, piece, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return true;
}
}  // namespace detail

/// Reads exactly `size` bytes at `offset`; false at end of file or on error.
inline bool preadFully(int fd, void *out, size_t size, uint64_t offset) {
  return detail::moveFully(static_cast<std::byte *>(out), size, offset,
                           [fd](std::byte *p, size_t n, off_t at) { return ::pread(fd, p, n, at); });
}

/// Writes exactly `size` bytes at `offset`; false on error.
inline bool pwriteFully(int fd, const void *data, size_t size, uint64_t offset) {
  return detail::moveFully(static_cast<const std::byte *>(data), size, offset,
                           [fd](const std::byte *p, size_t n, off_t at) {
                             return ::pwrite(fd, p, n, at);
                           });
}

}  // namespace shardc::runtime::checkpoint
