// Reads a contiguous element range of a checkpoint tensor (a rank's dim-0
// rows) with pread, converting the dtype on the fly through a caller-owned
// bounded buffer: the whole tensor is never read or held.
#pragma once

#include "runtime/checkpoint/SafetensorsIndex.h"

#include <cstddef>
#include <cstdint>

namespace shardc::runtime::checkpoint {

/// Default size of the bounded conversion buffer (`--io-buffer-mib`).
inline constexpr int64_t kDefaultIoBufferBytes = 64ll << 20;

/// Converts `count` elements between the floating dtypes (F32, F64, F16,
/// BF16, any direction; round to nearest even; 64-bit to 16-bit goes
/// through float, as torch's .to()). Same dtype copies. I64 only to I64.
void convertElements(plan::DType from, const std::byte *in, plan::DType to, std::byte *out,
                     int64_t count);

/// Elements [first, first + count) of `entry` (row-major) into `out` as
/// `to`. When the dtypes match, the bytes are pread straight into `out`;
/// otherwise through `buffer` (`bufferBytes`, at least one element of the
/// file's dtype), one buffer-full at a time. Up to `threads` threads read
/// disjoint parts at once (each at least 4 MiB; converting ones each use
/// their own slice of `buffer`, so memory stays bounded by it). Throws
/// CheckpointError naming the file and tensor (range outside the tensor,
/// unsupported conversion, short read: the file was truncated after it was
/// opened).
void readElements(const SafetensorsFile &file, const TensorEntry &entry, int64_t first,
                  int64_t count, plan::DType to, std::byte *out, std::byte *buffer,
                  int64_t bufferBytes, int threads = 1);

/// The io buffer a plan's loads need: enough for the largest local shard
/// read in the widest dtype (8 bytes/element), capped at `cap`; at least 8.
int64_t ioBufferBytesFor(int64_t maxLocalElements, int64_t cap);

}  // namespace shardc::runtime::checkpoint
